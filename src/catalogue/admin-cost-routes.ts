// The operator's side of upstream cost under /admin/v1: cost rates (events with the operator as
// actor and an effective time), the cost per day and per call, bills imported from the providers'
// exports, and the reconciliation of Tollgate's cost against them (JSON or CSV).
import Router from '@koa/router';
import type { CatalogueDeps } from './catalogue-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { costRatesDecider, PRICE_FIELDS, type PriceParam } from './cost-rates.ts';
import { exchangeRatesDecider, rateOn } from '../money/exchange-rates.ts';
import { billDecider, billOf, type BillFormat, type BillProvider } from './cost-bills.ts';
import { exactMinorText } from '../money/upstream-cost.ts';
import { upstreamReportQuery } from './upstream-report.ts';
import { reconcileBills, reconciliationCsv } from './cost-reconciliation.ts';
import { allRates, bookedCallsPage, upstreamCostBetween } from '../../projections/catalogue/upstream-cost.ts';
import type { CostRate } from '../money/upstream-cost.ts';

import { body } from '../http/admin-input.ts';

const rateBody = (r: CostRate & { eventId: string }) => ({
  object: 'cost_rate',
  event_id: r.eventId,
  channel: r.channel,
  upstream_model: r.upstreamModel,
  currency: r.currency,
  effective_at: r.effectiveAt,
  input: r.input,
  cache_read: r.cacheRead,
  cache_write_5m: r.cacheWrite5m,
  cache_write_1h: r.cacheWrite1h,
  output: r.output,
  image: r.image,
  // Given in another currency: as given, and the exchange rate it was converted at.
  ...(r.fx ? { given_in: { currency: r.fx.currency, rate: r.fx.rate, day: r.fx.day, source: r.fx.source, ...r.fx.given } } : {}),
});

const MAX_PAGE = 1000;
/** A window of whole UTC days from the query, as the upstream report reads it, plus paging for the per-call list. */
function windowQuery(query: Record<string, unknown>, extra: string[] = []) {
  const rest = Object.fromEntries(Object.entries(query).filter(([k]) => !extra.includes(k)));
  return upstreamReportQuery(rest);
}

export function adminCostRoutes(deps: CatalogueDeps, opts: { billToleranceMinor: number }): Router {
  const r = new Router();
  const { ledger } = deps;
  const settlement = () => deps.settlementCurrency();

  r.get('/cost-rates', async (ctx) => {
    await ledger.readYourWrites();
    ctx.body = { object: 'list', data: (await allRates(ledger.readModels.db, ledger.rmSchema)).map(rateBody) };
  });
  r.post('/cost-rates', async (ctx) => {
    const b = body(ctx);
    const known = new Set(['channel', 'currency', 'effective_at', ...Object.keys(PRICE_FIELDS)]);
    for (const k of Object.keys(b)) if (!known.has(k)) throw badRequest(`Unknown field '${k}'.`, k);
    const channel = deps.channels.list().find((c) => c.id === b.channel);
    if (!channel) throw badRequest(`channel must be one of the configured channels (GET /admin/v1/channels).`, 'channel');
    const prices = Object.fromEntries(Object.keys(PRICE_FIELDS).map((p) => [p, b[p]])) as Record<PriceParam, unknown>;
    const effectiveAt = (b.effective_at as string | undefined) ?? new Date().toISOString();
    const from = Date.parse(effectiveAt);
    const closed = Number.isFinite(from) ? await deps.closedMonthEndingAfter(new Date(from).toISOString()) : null;
    if (closed)
      throw new ApiError(
        409,
        `effective_at reaches into ${closed}, a closed month of the books: its calls keep the cost they were reported with. Set the rate from the first open month, or reopen ${closed} first.`,
        'invalid_request_error',
        'period_closed',
        'effective_at',
      );
    const currency = (b.currency as string | undefined) ?? (await settlement()) ?? 'USD';
    // Prices in another currency convert at the exchange rate of the day they take effect (the latest before it).
    const rates = await ledger.streamState(exchangeRatesDecider, streams.exchangeRates());
    const rate = typeof currency === 'string' && Number.isFinite(from) ? rateOn(rates, currency, new Date(from).toISOString().slice(0, 10)) : null;
    const res = await ledger.command(
      costRatesDecider,
      streams.upstreamCosts(),
      {
        type: 'SetRate',
        channel: channel.id,
        upstreamModel: channel.upstream_model,
        currency,
        effectiveAt,
        prices,
        rate,
        settlement: await settlement(),
      },
      metadataFor(ctx.state.actor),
    );
    const [e] = res.events;
    ctx.status = 201;
    ctx.body = rateBody({ ...(e.data as unknown as CostRate), eventId: e.id });
  });

  r.get('/upstream-costs', async (ctx) => {
    const q = windowQuery(ctx.query);
    await ledger.readYourWrites();
    ctx.body = {
      object: 'list',
      from: q.from,
      to: q.to,
      currency: await settlement(),
      data: await upstreamCostBetween(ledger.readModels.db, ledger.rmSchema, q.from, q.to),
    };
  });

  // Per call, in log order, for margin per call (revenue recognised less this cost).
  r.get('/upstream-costs/calls', async (ctx) => {
    const q = windowQuery(ctx.query, ['limit', 'after']);
    const limit = ctx.query.limit === undefined ? 100 : Number(ctx.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw badRequest(`'limit' must be a whole number from 1 to ${MAX_PAGE}.`, 'limit');
    const after = ctx.query.after === undefined ? null : Number(ctx.query.after);
    if (after !== null && !Number.isSafeInteger(after)) throw badRequest("'after' must be the 'next' cursor of the page before.", 'after');
    await ledger.readYourWrites();
    const { calls: page, hasMore } = await bookedCallsPage(ledger.readModels.db, ledger.rmSchema, q.from, q.to, after, limit);
    ctx.body = {
      object: 'list',
      currency: await settlement(),
      data: page.map((c) => ({
        object: 'call_cost',
        charge_event_id: c.event_id,
        request_id: c.request_id,
        at: c.at,
        account_id: c.account_id,
        model: c.model,
        channel: c.channel,
        upstream_model: c.upstream_model,
        usage: c.usage,
        priced: c.cost_minor !== null,
        rate_event_id: c.rate_event_id,
        cost_exact_minor: c.exact === null ? null : exactMinorText(c.exact),
        cost_minor: c.cost_minor === null ? null : c.cost_minor.toString(),
      })),
      has_more: hasMore,
      next: page.length > 0 ? String(page[page.length - 1].position) : null,
    };
  });

  r.post('/upstream-bills', async (ctx) => {
    const b = body(ctx);
    for (const k of Object.keys(b)) if (!['provider', 'channel', 'file', 'format'].includes(k)) throw badRequest(`Unknown field '${k}'.`, k);
    if (typeof b.channel !== 'string' || !deps.channels.list().some((c) => c.id === b.channel))
      throw badRequest('channel must be one of the configured channels (GET /admin/v1/channels).', 'channel');
    if (typeof b.file !== 'string' || !b.file) throw badRequest("'file' must be the export's text (its JSON, or its CSV with format csv).", 'file');
    const currency = (await settlement()) ?? 'USD';
    const bill = billOf(b.provider as BillProvider, b.channel, b.file, currency, (b.format ?? 'json') as BillFormat);
    let recorded = true;
    try {
      await ledger.command(billDecider, streams.upstreamBill(bill.billId), { type: 'Import', bill }, metadataFor(ctx.state.actor));
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'already_exists')) throw err;
      recorded = false;
    }
    ctx.status = recorded ? 201 : 200;
    ctx.body = {
      object: 'upstream_bill',
      id: bill.billId,
      provider: bill.provider,
      channel: bill.channel,
      currency,
      sha256: bill.sha256,
      already_imported: !recorded,
      lines: bill.lines.map((l) => ({ day: l.day, upstream_model: l.upstreamModel, cost_minor: l.costMinor })),
    };
  });

  r.get('/upstream-bills/reconciliation', async (ctx) => {
    const q = windowQuery(ctx.query);
    await ledger.readYourWrites();
    const rec = await reconcileBills(ledger, q, (await settlement()) ?? 'USD', opts.billToleranceMinor);
    if (q.format === 'csv') {
      ctx.type = 'text/csv; charset=utf-8';
      ctx.body = reconciliationCsv(rec);
    } else ctx.body = { object: 'upstream_bills_reconciliation', ...rec };
  });
  return r;
}
