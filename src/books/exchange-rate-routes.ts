// The operator's exchange rates under /admin/v1: a rate into the settlement currency for a UTC day
// and its source, each an event with the operator as its actor (src/books/exchange-rates.ts decides
// them), and every rate set, newest day first.
import Router from '@koa/router';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { currencyOf } from '../money/money.ts';
import { badRequest } from '../http/errors.ts';
import { body } from '../http/admin-input.ts';
import { exchangeRatesDecider, type RateUsed } from '../money/exchange-rates.ts';
import { priceListDecider } from './prices.ts';

/** One rate as the API answers it. */
export interface ExchangeRateRow extends RateUsed {
  currency: string;
}

/** What PUT /exchange-rates/:currency reads; any other field is refused by its name (a misspelt `day` would silently mean today). */
const FIELDS = new Set(['rate', 'source', 'day']);

/** The settlement currency (null until it is set, at start-up). */
const settlementOf = async (ledger: Ledger): Promise<string | null> => (await ledger.streamState(priceListDecider, streams.priceList())).currency;

/**
 * Every rate set, as the log has it now (another gateway may have set one): currencies in
 * alphabetical order, each newest day first; only `currency`'s when it is given.
 */
export async function exchangeRates(ledger: Ledger, currency?: string): Promise<{ settlement: string | null; data: ExchangeRateRow[] }> {
  const only = currency === undefined ? undefined : currencyOf(currency).code;
  const [settlement, { rates }] = await Promise.all([settlementOf(ledger), ledger.streamState(exchangeRatesDecider, streams.exchangeRates())]);
  const data = Object.keys(rates)
    .filter((c) => only === undefined || c === only)
    .sort()
    .flatMap((c) =>
      Object.values(rates[c])
        .sort((a, b) => (a.day < b.day ? 1 : a.day > b.day ? -1 : 0))
        .map((r) => ({ currency: c, rate: r.rate, day: r.day, source: r.source })),
    );
  return { settlement, data };
}

/** Sets `currency`'s rate for a day (default today, UTC) by the exchange-rates decider; the event's data. */
export async function setExchangeRate(
  ledger: Ledger,
  input: { currency: string; rate: unknown; day: unknown; source: unknown },
  actor: string,
  now = new Date(),
) {
  const settlement = await settlementOf(ledger);
  const res = await ledger.command(
    exchangeRatesDecider,
    streams.exchangeRates(),
    { type: 'SetRate', currency: input.currency, settlement, rate: input.rate, day: input.day, source: input.source, now },
    metadataFor(actor),
  );
  const set = res.events.find((e) => e.type === 'ExchangeRateSet');
  if (!set) throw new Error('the exchange-rates decider appended no ExchangeRateSet');
  return set.data as { currency: string; settlement: string; rate: string; day: string; source: string };
}

export function exchangeRateRoutes(ledger: Ledger): Router {
  const r = new Router();
  r.put('/exchange-rates/:currency', async (ctx) => {
    const b = body(ctx);
    const unknown = Object.keys(b).find((k) => !FIELDS.has(k));
    if (unknown !== undefined)
      throw badRequest(`'${unknown.slice(0, 100)}' is not a field of an exchange rate: send rate, source and (optionally) day.`, unknown.slice(0, 100));
    const data = await setExchangeRate(ledger, { currency: ctx.params.currency, rate: b.rate, day: b.day, source: b.source }, ctx.state.actor);
    ctx.body = { object: 'exchange_rate', currency: data.currency, settlement: data.settlement, rate: data.rate, day: data.day, source: data.source };
  });
  r.get('/exchange-rates', async (ctx) => {
    const q = ctx.query.currency;
    if (Array.isArray(q)) throw badRequest("'currency' may be given once.", 'currency');
    const { settlement, data } = await exchangeRates(ledger, q);
    ctx.body = { object: 'list', settlement, data };
  });
  return r;
}
