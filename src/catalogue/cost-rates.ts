// Upstream cost rates (one stream): what each channel's upstream model costs, as events with their
// actor and the time they take effect. A price is a decimal of the settlement currency's major
// units per million tokens (an image: per image), kept exact: at most the currency's minor digits
// plus six decimals, so it is always a whole number of 10^-12 minor units per token. A rate given in
// another currency (an upstream that bills in US dollars) is converted at the day's exchange rate,
// and the event keeps both.
import type { Decider } from '../ledger/decider.ts';
import type { CostPrices, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { convertDecimal, currencyOf, minorDigits } from '../money/money.ts';
import { EXTRA_PRICE_DIGITS, type CostRate } from '../money/upstream-cost.ts';

/** The price fields as the admin API names them, and the event field each fills. */
export const PRICE_FIELDS = {
  input: 'input',
  cache_read: 'cacheRead',
  cache_write_5m: 'cacheWrite5m',
  cache_write_1h: 'cacheWrite1h',
  output: 'output',
  image: 'image',
} as const satisfies Record<string, keyof CostPrices>;
export type PriceParam = keyof typeof PRICE_FIELDS;

const DECIMAL = /^(0|[1-9][0-9]{0,11})(?:\.([0-9]+))?$/;

/** A price as given (a decimal string, or a whole number), checked for `currency`; an invalid error naming `param` otherwise. */
export function priceText(value: unknown, currency: string, param: string): string {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  const m = typeof text === 'string' ? DECIMAL.exec(text) : null;
  if (!m) throw invalid(`${param} must be a non-negative decimal string of ${currency} per million tokens, such as "3" or "0.075"`, { param });
  const allowed = minorDigits(currency) + EXTRA_PRICE_DIGITS;
  if ((m[2] ?? '').length > allowed)
    throw invalid(`${param} has more than ${allowed} decimals: finer than 10^-${EXTRA_PRICE_DIGITS} ${currency} minor units per million tokens`, { param });
  return text as string;
}

export interface SetRateCommand {
  type: 'SetRate';
  channel: string;
  upstreamModel: string;
  currency: string;
  effectiveAt: string;
  /** Prices by admin API name; cache reads and writes default to the input price, the 1-hour write to the 5-minute one. */
  prices: Partial<Record<PriceParam, unknown>>;
  /** Prices in another currency: the exchange rate into the settlement currency they are converted at (null: none recorded). */
  rate?: { rate: string; day: string; source: string } | null;
}

export interface CostRatesState {
  /** Rates set so far, in log order. */
  count: number;
}

/** The rate a command sets: every price checked, the defaults filled in, so the event says all it prices. */
export function rateOf(c: SetRateCommand, settlement: string | null): CostRate {
  if (!settlement) throw new DomainError('conflict', 'the settlement currency is not set yet');
  const currency = currencyOf(c.currency ?? settlement).code;
  if (currency !== settlement && !c.rate)
    throw new DomainError(
      'conflict',
      `there is no exchange rate for ${currency} into ${settlement}: record one first (PUT /admin/v1/exchange-rates/${currency})`,
      {
        param: 'currency',
      },
    );
  const at = typeof c.effectiveAt === 'string' ? Date.parse(c.effectiveAt) : NaN;
  if (!Number.isFinite(at)) throw invalid('effective_at must be an ISO 8601 time', { param: 'effective_at' });
  const given = (p: PriceParam) => (c.prices[p] === undefined || c.prices[p] === null ? undefined : priceText(c.prices[p], currency, p));
  const input = given('input');
  const output = given('output');
  if (input === undefined) throw invalid('input is required', { param: 'input' });
  if (output === undefined) throw invalid('output is required', { param: 'output' });
  const cacheWrite5m = given('cache_write_5m') ?? input;
  const prices = {
    input,
    cacheRead: given('cache_read') ?? input,
    cacheWrite5m,
    cacheWrite1h: given('cache_write_1h') ?? cacheWrite5m,
    output,
    image: given('image') ?? null,
  };
  const head = { channel: c.channel, upstreamModel: c.upstreamModel, currency: settlement, effectiveAt: new Date(at).toISOString() };
  if (currency === settlement) return { ...head, ...prices };
  // Another currency's prices, converted at the rate given, as exact as the settlement currency's prices are kept.
  const fx = c.rate!;
  const digits = minorDigits(settlement) + EXTRA_PRICE_DIGITS;
  const to = (text: string) => convertDecimal(text, currency, settlement, fx.rate, digits);
  return {
    ...head,
    input: to(prices.input),
    cacheRead: to(prices.cacheRead),
    cacheWrite5m: to(prices.cacheWrite5m),
    cacheWrite1h: to(prices.cacheWrite1h),
    output: to(prices.output),
    image: prices.image === null ? null : to(prices.image),
    fx: { currency, rate: fx.rate, day: fx.day, source: fx.source, given: prices },
  };
}

export const costRatesDecider: Decider<CostRatesState, SetRateCommand & { settlement: string | null }, StreamEvents['upstreamCosts']> = {
  initialState: () => ({ count: 0 }),
  decide: (c) => [{ type: 'UpstreamCostRateSet', data: rateOf(c, c.settlement) }],
  evolve: (s, e) => (e.type === 'UpstreamCostRateSet' ? { count: s.count + 1 } : s),
};
