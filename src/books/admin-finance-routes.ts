// The finance reports under /admin/v1/finance: the report per day, account, model and channel,
// the money reconciliation, the journal (CSV or hledger) and the lots. Each reads the books' read
// models (projections/books/) for the window; from and to are UTC days (as the upstream report's).
import type { Context } from 'koa';
import Router from '@koa/router';
import type { BooksDeps } from './books-deps.ts';
import { badRequest } from '../http/errors.ts';
import { upstreamReportQuery } from '../catalogue/index.ts';
import { deferredRows, financeRows, readBooks, sumRows, type FinanceRow, type Window } from './finance.ts';
import { foldFinance } from './finance-fold.ts';
import { reconcileMoney, unbalancedEvents } from './finance-reconcile.ts';
import { journalCsv, journalEntries, journalHledger, accountBalances } from './finance-journal.ts';
import { bookedEntries, bookedLots } from '../../projections/books/book-reads.ts';
import { DAY_COLUMNS } from '../../projections/books/books.ts';
import { closePeriod, listPeriods, periodsOf, reopenPeriod } from './periods.ts';
import { body } from '../http/admin-input.ts';

const REPORT_COLUMNS: Array<keyof FinanceRow> = ['day', 'account_id', 'model', 'channel', ...DAY_COLUMNS, 'upstream_cost', 'unpriced_calls', 'margin'];

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

  r.get('/report', async (ctx) => {
    const q = windowQuery(ctx, ['json', 'csv']);
    const f = await readBooks(ledger, q);
    const rows = financeRows(f);
    if (q.format === 'csv') {
      ctx.type = 'text/csv';
      ctx.body = `${[REPORT_COLUMNS.join(','), ...rows.map((row) => REPORT_COLUMNS.map((c) => row[c]).join(','))].join('\n')}\n`;
      return;
    }
    ctx.body = {
      object: 'finance_report',
      currency: f.currency,
      from: q.from,
      to: q.to,
      rows,
      deferred: deferredRows(f, q),
      totals: sumRows(rows),
      periods: periodsOf(await listPeriods(ledger), q),
    };
  });

  r.get('/reconciliation', async (ctx) => {
    const q = windowQuery(ctx, ['json']);
    let rec = reconcileMoney(await readBooks(ledger, q), q);
    // A difference breaks an invariant: the events behind it come from a fold of the log that keeps its bookings.
    if (rec.lines.some((l) => l.difference !== 0)) {
      const folded = await foldFinance(ledger, q, { keepBookings: true });
      rec = reconcileMoney(await readBooks(ledger, q), q, (account) => unbalancedEvents(folded, q, account));
    }
    ctx.body = { object: 'money_reconciliation', ...rec, periods: periodsOf(await listPeriods(ledger), q) };
  });

  r.get('/journal', async (ctx) => {
    const q = windowQuery(ctx, ['hledger', 'csv', 'json']);
    const f = await readBooks(ledger, q, { withCostRates: true });
    const { db, schema } = ledger.readModels;
    const entries = journalEntries(f, await bookedEntries(db, schema, q.from, q.to));
    if (q.format === 'json') ctx.body = { object: 'journal', from: q.from, to: q.to, entries, balances: accountBalances(entries) };
    else {
      ctx.type = q.format === 'csv' ? 'text/csv' : 'text/plain';
      ctx.body = q.format === 'csv' ? journalCsv(entries) : journalHledger(entries);
    }
  });

  r.get('/lots', async (ctx) => {
    const q = windowQuery(ctx, ['json']);
    await ledger.readYourWrites();
    const { db, schema } = ledger.readModels;
    ctx.body = { object: 'list', data: (await bookedLots(db, schema, q.to)).map((l) => ({ object: 'lot', ...l })) };
  });
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
