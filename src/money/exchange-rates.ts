// Exchange rates into the settlement currency (the books' payments and refunds, the catalogue's cost
// rates convert at them), one stream: each rate is an event with its UTC day
// and its source (a bank's reference rate, the processor's, the operator's own). A foreign amount
// is booked at the rate of its day, or of the latest day before it that has one, and the booking
// records which (FX_RATE_USED on the event), so a rate set later never changes it.
import type { Decider } from '../ledger/decider.ts';
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { currencyOf } from './money.ts';

export type RateUsed = Pick<EventDataByType['ExchangeRateSet'], 'rate' | 'day' | 'source'>;

export interface ExchangeRatesState {
  /** By currency: its rates by day, as set last for each day. */
  rates: Record<string, Record<string, RateUsed>>;
}

export type ExchangeRatesCommand = { type: 'SetRate'; currency: string; settlement: string | null; rate: unknown; day: unknown; source: unknown; now: Date };

const RATE = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,12})?$/;
const DAY = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/;

/** A day as YYYY-MM-DD that is a real date and not after `now`'s. */
function requireDay(v: unknown, now: Date): string {
  const ok = typeof v === 'string' && DAY.test(v) && new Date(`${v}T00:00:00Z`).toISOString().slice(0, 10) === v;
  if (!ok) throw invalid('day must be a UTC date, YYYY-MM-DD', { param: 'day' });
  if (v > now.toISOString().slice(0, 10)) throw invalid('day must not be in the future: a rate is recorded for a day that has come', { param: 'day' });
  return v;
}

export const exchangeRatesDecider: Decider<ExchangeRatesState, ExchangeRatesCommand, StreamEvents['exchangeRates']> = {
  initialState: () => ({ rates: {} }),
  decide(c) {
    if (!c.settlement) throw new DomainError('conflict', 'the settlement currency is not set yet');
    const currency = currencyOf(c.currency).code;
    if (currency === c.settlement) throw invalid(`${currency} is the settlement currency: it needs no exchange rate`, { param: 'currency' });
    if (typeof c.rate !== 'string' || !RATE.test(c.rate) || /^0(\.0+)?$/.test(c.rate))
      throw invalid(`rate must be a positive decimal string of ${c.settlement} per 1 ${currency}, e.g. "1.0523" (at most 12 decimals)`, { param: 'rate' });
    const day = requireDay(c.day ?? c.now.toISOString().slice(0, 10), c.now);
    if (typeof c.source !== 'string' || c.source.trim().length === 0 || c.source.length > 200)
      throw invalid('source must say where the rate comes from (1-200 characters), e.g. "ECB reference rate"', { param: 'source' });
    return [{ type: 'ExchangeRateSet', data: { currency, settlement: c.settlement, rate: c.rate, day, source: c.source.trim() } }];
  },
  evolve(s, e) {
    if (e.type !== 'ExchangeRateSet') return s;
    const { currency, rate, day, source } = e.data;
    return { rates: { ...s.rates, [currency]: { ...s.rates[currency], [day]: { rate, day, source } } } };
  },
};

/** The rate for `currency` on `day`: that day's, or the latest day's before it (null: none yet). */
export function rateOn(s: ExchangeRatesState, currency: string, day: string): RateUsed | null {
  const days = Object.keys(s.rates[currency] ?? {})
    .filter((d) => d <= day)
    .sort();
  return days.length ? s.rates[currency][days[days.length - 1]] : null;
}

/** The rate for `currency` on `day`, or a conflict naming the currency: a foreign amount is never booked without one. */
export function requireRateOn(s: ExchangeRatesState, currency: string, day: string): RateUsed {
  const r = rateOn(s, currency, day);
  if (!r)
    throw new DomainError('conflict', `there is no exchange rate for ${currency} on or before ${day}: the operator records one first`, { param: 'currency' });
  return r;
}
