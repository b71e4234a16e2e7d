// Re-pricing one charge with the corrections that cover it. Pure.
import type { CorrectionWindow } from '../catalogue/index.ts';
import type { CorrectionComponent } from '../ledger/events.ts';
import { chatCharge, imageCharge } from '../money/pricing.ts';
import type { ChargeRow } from '../calls/index.ts';

export interface PriceInputs {
  multiplierMilli: number;
  cacheReadMilli: number;
  cacheWriteMilli: number;
  tokensPerImage: number;
}

const INPUT_OF: Record<CorrectionComponent, keyof PriceInputs> = {
  multiplier: 'multiplierMilli',
  cache_read_weight: 'cacheReadMilli',
  cache_write_weight: 'cacheWriteMilli',
  image_tokens: 'tokensPerImage',
};

/** The charges a component prices: the multiplier all, cache weights chat, tokens per image images. */
export const KINDS: Record<CorrectionComponent, Array<'chat' | 'image'>> = {
  multiplier: ['chat', 'image'],
  cache_read_weight: ['chat'],
  cache_write_weight: ['chat'],
  image_tokens: ['image'],
};

const inputsOf = (r: ChargeRow): PriceInputs => ({
  multiplierMilli: Number(r.multiplier_milli),
  cacheReadMilli: Number(r.cache_read_milli ?? 1000),
  cacheWriteMilli: Number(r.cache_write_milli ?? 1000),
  tokensPerImage: Number(r.tokens_per_image),
});

function priceOf(r: ChargeRow, p: PriceInputs): number {
  return r.kind === 'image'
    ? imageCharge(p.multiplierMilli, Number(r.images), p.tokensPerImage)
    : chatCharge(
        Number(r.prompt_tokens),
        Number(r.completion_tokens),
        p.multiplierMilli,
        { cachedTokens: Number(r.cached_tokens ?? 0), cacheWriteTokens: Number(r.cache_write_tokens ?? 0) },
        { readMilli: p.cacheReadMilli, writeMilli: p.cacheWriteMilli },
      );
}

const covers = (w: CorrectionWindow, r: ChargeRow, at: number) =>
  Date.parse(w.from) <= at && at < Date.parse(w.to) && KINDS[w.component].includes(r.kind as 'chat' | 'image');

/**
 * The charge re-priced with every correction that covers it (`corrections` in stream order: the
 * later one's value wins). A charge that was capped (billed below its price because the account
 * could not cover more) moves by the difference the correction makes to its price, so a
 * correction back to the original inputs gives back exactly what was billed.
 */
export function correctedFigure(
  r: ChargeRow,
  corrections: CorrectionWindow[],
): { billed: number; original: PriceInputs; inputs: PriceInputs; owner: CorrectionWindow | null } {
  const at = new Date(r.at).getTime();
  const original = inputsOf(r);
  const inputs = { ...original };
  let owner: CorrectionWindow | null = null;
  for (const w of corrections) {
    if (!covers(w, r, at)) continue;
    inputs[INPUT_OF[w.component]] = w.value;
    owner = w;
  }
  const billed = Number(r.billed);
  if (!owner) return { billed, original, inputs, owner };
  return { billed: Math.max(0, billed + priceOf(r, inputs) - priceOf(r, original)), original, inputs, owner };
}
