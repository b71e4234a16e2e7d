// The finance reports under /admin/v1/finance: the report per day, account, model and channel,
// the money reconciliation, the journal (CSV or hledger) and the lots. Each reads the books' read
// models (projections/books/) for the window, on the finance read thread (finance-answers.ts);
// from and to are UTC days (as the upstream report's).
import type { Context } from 'koa';
import Router from '@koa/router';
import type { BooksDeps } from './books-deps.ts';
import { badRequest } from '../http/errors.ts';
import { upstreamReportQuery } from '../catalogue/index.ts';
import { readMoneyBooks, type Window } from './finance.ts';
import { foldFinance } from './finance-fold.ts';
import { reconcileMoney, unbalancedEvents } from './finance-reconcile.ts';
import type { FinanceAnswer, FinanceQuery, FinanceTask } from './finance-answers.ts';
import { closePeriod, listPeriods, periodsOf, reopenPeriod } from './periods.ts';
import { body } from '../http/admin-input.ts';

/** from, to (UTC days) and a format among `formats` (the first is the default). */
function windowQuery(ctx: Context, formats: string[]): Window & { format: string } {
  const { format = formats[0], ...rest } = ctx.query as Record<string, unknown>;
  if (typeof format !== 'string' || !formats.includes(format)) throw badRequest(`'format' must be ${formats.join(' or ')}.`, 'format');
  const w = upstreamReportQuery(rest);
  return { from: w.from, to: w.to, format };
}

export function adminFinanceRoutes(deps: BooksDeps): Router {
  const r = new Router({ prefix: '/finance' });
  const { ledger } = deps;

  /** A window's answer, read on the finance read thread (or here, on the embedded database). */
  const answer = async (ctx: Context, task: FinanceTask, formats: string[]): Promise<FinanceAnswer> => {
    const q = windowQuery(ctx, formats);
    // The months closed come from the log itself: read while the read models catch up.
    const [periods] = await Promise.all([listPeriods(ledger), ledger.readYourWrites()]);
    const query: FinanceQuery = { schema: ledger.readModels.schema, window: { from: q.from, to: q.to }, format: q.format, periods: periodsOf(periods, q) };
    return deps.financeReads.run<FinanceAnswer>(task, query);
  };
  const send = (ctx: Context, a: FinanceAnswer) => {
    ctx.type = a.type;
    ctx.body = Buffer.from(a.body.buffer, a.body.byteOffset, a.body.byteLength);
  };

  r.get('/report', async (ctx) => send(ctx, await answer(ctx, 'report', ['json', 'csv'])));
  r.get('/reconciliation', async (ctx) => {
    const a = await answer(ctx, 'reconciliation', ['json']);
    if (a.balanced) return send(ctx, a);
    // A difference breaks an invariant: the events behind it come from a fold of the log that keeps its bookings.
    const q = windowQuery(ctx, ['json']);
    const folded = await foldFinance(ledger, q, { keepBookings: true });
    const rec = reconcileMoney(await readMoneyBooks(ledger, q), q, (account) => unbalancedEvents(folded, q, account));
    ctx.body = { object: 'money_reconciliation', ...rec, periods: periodsOf(await listPeriods(ledger), q) };
  });
  r.get('/journal', async (ctx) => send(ctx, await answer(ctx, 'journal', ['hledger', 'csv', 'json'])));
  r.get('/lots', async (ctx) => send(ctx, await answer(ctx, 'lots', ['json'])));
  // The month close: GET the months closed (and reopened), close one, reopen one.
  r.get('/periods', async (ctx) => {
    ctx.body = { object: 'list', data: await listPeriods(ledger) };
  });
  r.post('/periods/:period/close', async (ctx) => {
    const b = body(ctx);
    for (const k of Object.keys(b)) if (k !== 'reason') throw badRequest(`Unknown field '${k}'.`, k);
    if (b.reason !== undefined && typeof b.reason !== 'string') throw badRequest("'reason' must be a string.", 'reason');
    ctx.body = await closePeriod(
      ledger,
      { period: ctx.params.period, reason: b.reason, billToleranceMinor: deps.paymentSettings.billToleranceMinor },
      ctx.state.actor,
    );
  });
  r.post('/periods/:period/reopen', async (ctx) => {
    const b = body(ctx);
    for (const k of Object.keys(b)) if (k !== 'reason') throw badRequest(`Unknown field '${k}'.`, k);
    if (typeof b.reason !== 'string' || !b.reason.trim()) throw badRequest("Reopening a month needs a 'reason'.", 'reason');
    ctx.body = await reopenPeriod(ledger, { period: ctx.params.period, reason: b.reason }, ctx.state.actor);
  });
  return r;
}
