// The upstream cost of a call: the upstream's own usage on its charge times the rate in force at
// the call's time, exact (a numerator over COST_DENOMINATOR), rounded only where it is booked. A
// call is booked in its series (one UTC day of one channel and upstream model, in log order) by
// the one rounding rule, so a day's calls add up to the rounded cost of the whole day: the figure
// a provider's daily bill shows.
import type { EventDataByType } from '../ledger/events.ts';
import { bookedExact, minorDigits } from './money.ts';

export type CostRate = EventDataByType['UpstreamCostRateSet'];

/** Extra decimals a price may carry beyond the currency's minor unit (per million tokens: 10^-12 minor units per token). */
export const EXTRA_PRICE_DIGITS = 6;
/** Exact costs are numerators over this: 10^-12 minor units. */
export const COST_DENOMINATOR = 10n ** 12n;

/** A checked price in 10^-12 minor units per token (per image: 10^-6 minor units per image; see imageScale). */
export function scaledPrice(text: string, currency: string): bigint {
  const [whole, frac = ''] = text.split('.');
  const digits = minorDigits(currency) + EXTRA_PRICE_DIGITS;
  return BigInt(whole + frac.padEnd(digits, '0'));
}

/** What the upstream counted for one call, split the way rates price it (prompt parts are disjoint). */
export interface CallUsage {
  /** Prompt tokens neither read from nor written to the cache. */
  input: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  output: number;
  images: number;
}

/** An image's price is per image; scaledPrice gives 10^-6 minor units, costs are in 10^-12. */
const IMAGE_SCALE = 10n ** 6n;

/** The exact cost of `u` at `rate` (10^-12 minor units), or null when the rate does not price something the call used. */
export function exactCost(rate: CostRate, u: CallUsage): bigint | null {
  const p = (text: string) => scaledPrice(text, rate.currency);
  let n =
    BigInt(u.input) * p(rate.input) +
    BigInt(u.cacheRead) * p(rate.cacheRead) +
    BigInt(u.cacheWrite5m) * p(rate.cacheWrite5m) +
    BigInt(u.cacheWrite1h) * p(rate.cacheWrite1h) +
    BigInt(u.output) * p(rate.output);
  if (u.images > 0) {
    if (rate.image === null) return null;
    n += BigInt(u.images) * p(rate.image) * IMAGE_SCALE;
  }
  return n;
}

/**
 * Books the exact costs of one series in order: each call gets round(total so far) - round(total
 * before it) minor units; an unpriced call (null) gets null and leaves the running total alone.
 */
export function bookSeries(exact: ReadonlyArray<bigint | null>): Array<bigint | null> {
  let total = 0n;
  return exact.map((n) => {
    if (n === null) return null;
    const before = total;
    total += n;
    return bookedExact(before, total, COST_DENOMINATOR);
  });
}

/** The exact cost as a decimal of minor units ("1.234567890123"), for per-call listings. */
export function exactMinorText(n: bigint): string {
  const digits = String(COST_DENOMINATOR).length - 1;
  const s = n.toString().padStart(digits + 1, '0');
  const frac = s.slice(-digits).replace(/0+$/, '');
  return frac ? `${s.slice(0, -digits)}.${frac}` : s.slice(0, -digits);
}

/**
 * The rate in force at `at` among the rates of one channel and upstream model, given in effective
 * time then log order: the latest effective at or before it (of two effective at the same time,
 * the later set). Null: no rate covers it, and the call is unpriced, never free.
 */
export function rateInForce<R extends { effectiveAt: string }>(ordered: readonly R[], at: string): R | null {
  const t = Date.parse(at);
  let found: R | null = null;
  for (const r of ordered) {
    if (Date.parse(r.effectiveAt) > t) break;
    found = r;
  }
  return found;
}

/** Where a rate goes among `ordered` (effective time, then log order: it is the latest set). */
export function withRate<R extends { effectiveAt: string }>(ordered: readonly R[], rate: R): R[] {
  const t = Date.parse(rate.effectiveAt);
  const at = ordered.findIndex((r) => Date.parse(r.effectiveAt) > t);
  return at < 0 ? [...ordered, rate] : [...ordered.slice(0, at), rate, ...ordered.slice(at)];
}

/**
 * The rates among `ordered` (as rateInForce takes them) that are in force at some time from `from`
 * up to `to` (excluded): the one in force at `from`, then each taking effect before `to` (of two
 * at the same time, only the later set, which wins).
 */
export function ratesInForceDuring<R extends { effectiveAt: string }>(ordered: readonly R[], from: string, to: string): R[] {
  const start = Date.parse(from);
  const end = Date.parse(to);
  const out: R[] = [];
  for (const r of ordered) {
    const t = Date.parse(r.effectiveAt);
    if (t >= end) break;
    // A rate effective at or before the start, or at the same time as the one before it, replaces it.
    const last = out.at(-1);
    if (last && (t <= start || Date.parse(last.effectiveAt) === t)) out.pop();
    out.push(r);
  }
  return out;
}
