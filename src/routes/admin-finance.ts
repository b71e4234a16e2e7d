// The finance reports under /admin/v1/finance: the report per day, account, model and channel,
// the money reconciliation, the journal (CSV or hledger) and an account's lots. Each reads the log
// through the lot book at request time; from and to are UTC days (as the upstream report's).
import type { Context } from 'koa';
import Router from '@koa/router';
import type { GatewayDeps } from '../gateway/deps.ts';
import { badRequest } from '../http/errors.ts';
import { upstreamReportQuery } from '../admin/upstream-report.ts';
import { deferredRows, financeRows, foldFinance, sumRows, type FinanceRow, type Window } from '../admin/finance.ts';
import { reconcileMoney } from '../admin/finance-reconcile.ts';
import { journalCsv, journalEntries, journalHledger, accountBalances } from '../admin/finance-journal.ts';

const REPORT_COLUMNS: Array<keyof FinanceRow> = [
  'day',
  'account_id',
  'model',
  'channel',
  'payments',
  'fees',
  'refunds',
  'disputes',
  'dispute_fees',
  'revenue',
  'refunded_revenue',
  'breakage',
  'promotional_tokens',
  'upstream_cost',
  'unpriced_calls',
  'margin',
];

/** from, to (UTC days) and a format among `formats` (the first is the default). */
function windowQuery(ctx: Context, formats: string[]): Window & { format: string } {
  const { format = formats[0], ...rest } = ctx.query as Record<string, unknown>;
  if (typeof format !== 'string' || !formats.includes(format)) throw badRequest(`'format' must be ${formats.join(' or ')}.`, 'format');
  const w = upstreamReportQuery(rest);
  return { from: w.from, to: w.to, format };
}

export function adminFinanceRoutes(deps: GatewayDeps): Router {
  const r = new Router({ prefix: '/finance' });
  const { ledger } = deps;

  r.get('/report', async (ctx) => {
    const q = windowQuery(ctx, ['json', 'csv']);
    const f = await foldFinance(ledger, q);
    const rows = financeRows(f);
    if (q.format === 'csv') {
      ctx.type = 'text/csv';
      ctx.body = `${[REPORT_COLUMNS.join(','), ...rows.map((row) => REPORT_COLUMNS.map((c) => row[c]).join(','))].join('\n')}\n`;
      return;
    }
    ctx.body = { object: 'finance_report', currency: f.currency, from: q.from, to: q.to, rows, deferred: deferredRows(f, q), totals: sumRows(rows) };
  });

  r.get('/reconciliation', async (ctx) => {
    const q = windowQuery(ctx, ['json']);
    let rec = reconcileMoney(await foldFinance(ledger, q), q);
    // The events behind a difference come from the bookings: folded again, keeping them.
    if (rec.lines.some((l) => l.difference !== 0)) rec = reconcileMoney(await foldFinance(ledger, q, { keepBookings: true }), q);
    ctx.body = { object: 'money_reconciliation', ...rec };
  });

  r.get('/journal', async (ctx) => {
    const q = windowQuery(ctx, ['hledger', 'csv', 'json']);
    const entries = journalEntries(await foldFinance(ledger, q, { keepBookings: true }), q);
    if (q.format === 'json') ctx.body = { object: 'journal', from: q.from, to: q.to, entries, balances: accountBalances(entries) };
    else {
      ctx.type = q.format === 'csv' ? 'text/csv' : 'text/plain';
      ctx.body = q.format === 'csv' ? journalCsv(entries) : journalHledger(entries);
    }
  });

  r.get('/lots', async (ctx) => {
    const q = windowQuery(ctx, ['json']);
    const f = await foldFinance(ledger, q);
    ctx.body = { object: 'list', data: [...f.book.lots.values()].map((l) => ({ object: 'lot', ...l })) };
  });
  return r;
}
