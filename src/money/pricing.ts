// Money arithmetic: integer billed tokens, multipliers as integer thousandths (1.25 -> 1250).
import { invalid } from '../ledger/errors.ts';

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

/**
 * How a model's price weighs prompt tokens served from or written to the upstream's cache, in
 * integer thousandths of a plain prompt token. 1000 each (the default) is the specification's
 * rule: every prompt token counts once, cached or not.
 */
export interface CacheWeights {
  readMilli: number;
  writeMilli: number;
}
export const SPEC_CACHE_WEIGHTS: CacheWeights = { readMilli: 1000, writeMilli: 1000 };

/** The parts of a prompt the cache weights apply to (both within promptTokens). */
export interface CacheCounts {
  cachedTokens?: number;
  cacheWriteTokens?: number;
}

/**
 * ceil((prompt + completion) * milli / 1000), with cached and cache-written prompt tokens
 * counted at their weights. All in integers: tokens in thousandths, then the multiplier.
 */
export function chatCharge(
  promptTokens: number,
  completionTokens: number,
  milli: number,
  cache: CacheCounts = {},
  weights: CacheWeights = SPEC_CACHE_WEIGHTS,
): number {
  const read = cache.cachedTokens ?? 0;
  const write = cache.cacheWriteTokens ?? 0;
  if (read + write > promptTokens) throw invalid('cached prompt tokens exceed the prompt', { param: 'usage' });
  if (weights.readMilli === 1000 && weights.writeMilli === 1000) return applyMultiplier(promptTokens + completionTokens, milli);
  const weightedMilli = (promptTokens - read - write + completionTokens) * 1000 + read * weights.readMilli + write * weights.writeMilli;
  // ceil(weightedMilli * milli / 1e6); below 2^53 for any count and multiplier the schemas allow.
  return Math.floor((weightedMilli * milli + 999_999) / 1_000_000);
}

/** Weights from optional event fields (absent: the specification's rule). */
export function cacheWeightsOf(d: { cacheReadMilli?: number | null; cacheWriteMilli?: number | null }): CacheWeights {
  return { readMilli: d.cacheReadMilli ?? 1000, writeMilli: d.cacheWriteMilli ?? 1000 };
}

export function imageCharge(milli: number, images = 1, tokensPerImage = DEFAULT_TOKENS_PER_IMAGE): number {
  return applyMultiplier(tokensPerImage * images, milli);
}

/** The most raw tokens (prompt + completion) a hold of `billed` tokens covers at `milli`. */
export function rawTokensCoveredBy(billed: number, milli: number): number {
  return Math.floor((billed * 1000) / milli);
}
