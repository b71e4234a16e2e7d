// Money arithmetic: integer billed tokens, multipliers as integer thousandths (1.25 -> 1250).
import { invalid } from './errors.ts';

export const DEFAULT_TOKENS_PER_IMAGE = 45_000;

/** 1.25 -> 1250. Refuses zero, negatives and more than three decimals. */
export function toMilli(multiplier: number): number {
  if (typeof multiplier !== 'number' || !Number.isFinite(multiplier) || multiplier <= 0) {
    throw invalid('multiplier must be a number greater than 0', { param: 'multiplier' });
  }
  const milli = Math.round(multiplier * 1000);
  if (Math.abs(milli - multiplier * 1000) > 1e-6 || milli < 1) {
    throw invalid('multiplier may have at most three decimals', { param: 'multiplier' });
  }
  return milli;
}

export const fromMilli = (milli: number): number => milli / 1000;

/** ceil(n * milli / 1000) in integers. */
export function applyMultiplier(tokens: number, milli: number): number {
  return Math.floor((tokens * milli + 999) / 1000);
}

export function chatCharge(promptTokens: number, completionTokens: number, milli: number): number {
  return applyMultiplier(promptTokens + completionTokens, milli);
}

export function imageCharge(milli: number, images = 1, tokensPerImage = DEFAULT_TOKENS_PER_IMAGE): number {
  return applyMultiplier(tokensPerImage * images, milli);
}

/** The most raw tokens (prompt + completion) a hold of `billed` tokens covers at `milli`. */
export function rawTokensCoveredBy(billed: number, milli: number): number {
  return Math.floor((billed * 1000) / milli);
}
