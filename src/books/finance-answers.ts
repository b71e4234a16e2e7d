// The finance reports' answers, written out as the text the client gets: the report (JSON or
// CSV), the money reconciliation, the journal (hledger, CSV or JSON) and the lots of a window,
// from the books' read models. They are read tasks (src/eventstore/read-thread.ts): on a
// PostgreSQL server they run on a thread of their own, so a year's report (tens of thousands of
// rows, megabytes of JSON) never holds the thread that serves calls.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Queryable } from '../eventstore/db.ts';
import type { ReadTasks } from '../eventstore/read-thread.ts';
import { deferredRows, journalBooksFrom, moneyBooksFrom, reportFrom, sumRows, type FinanceRow, type Window } from './finance.ts';
import { reconcileMoney } from './finance-reconcile.ts';
import { accountBalances, journalCsv, journalEntries, journalHledger } from './finance-journal.ts';
import { bookedEntries, bookedLots } from '../../projections/books/book-reads.ts';
import { DAY_COLUMNS } from '../../projections/books/books.ts';
import type { PeriodView } from './periods.ts';

const REPORT_COLUMNS: Array<keyof FinanceRow> = ['day', 'account_id', 'model', 'channel', ...DAY_COLUMNS, 'upstream_cost', 'unpriced_calls', 'margin'];

/** What a task is asked: the read models' schema, the window and format, and the months it touches (read by the caller). */
export interface FinanceQuery {
  schema: string;
  window: Window;
  format: string;
  periods: PeriodView[];
}

/** An answer: its content type and body (UTF-8, moved to the thread that sends it); a reconciliation also says whether it balanced. */
export interface FinanceAnswer {
  type: string;
  body: Uint8Array;
  balanced?: boolean;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const utf8 = new TextEncoder();
const answer = (type: string, text: string, balanced?: boolean): FinanceAnswer => ({
  type,
  body: utf8.encode(text),
  ...(balanced === undefined ? {} : { balanced }),
});

async function report(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const f = await reportFrom(db, q.schema, q.window);
  const rows = f.rows;
  if (q.format === 'csv')
    return answer('text/csv', `${[REPORT_COLUMNS.join(','), ...rows.map((row) => REPORT_COLUMNS.map((c) => row[c]).join(','))].join('\n')}\n`);
  const body = {
    object: 'finance_report',
    currency: f.currency,
    from: q.window.from,
    to: q.window.to,
    rows,
    deferred: deferredRows(f, q.window),
    totals: sumRows(rows),
    periods: q.periods,
  };
  return answer(JSON_TYPE, JSON.stringify(body));
}

/** The reconciliation when it balances; one that does not is answered by the caller, with the events behind it. */
async function reconciliation(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const rec = reconcileMoney(await moneyBooksFrom(db, q.schema, q.window), q.window);
  const balanced = rec.lines.every((l) => l.difference === 0);
  return answer(JSON_TYPE, balanced ? JSON.stringify({ object: 'money_reconciliation', ...rec, periods: q.periods }) : '', balanced);
}

async function journal(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const [books, bookings] = await Promise.all([journalBooksFrom(db, q.schema, q.window), bookedEntries(db, q.schema, q.window.from, q.window.to)]);
  const entries = journalEntries(books, bookings);
  if (q.format === 'json')
    return answer(JSON_TYPE, JSON.stringify({ object: 'journal', from: q.window.from, to: q.window.to, entries, balances: accountBalances(entries) }));
  return q.format === 'csv' ? answer('text/csv', journalCsv(entries)) : answer('text/plain', journalHledger(entries));
}

async function lots(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const data = (await bookedLots(db, q.schema, q.window.to)).map((l) => ({ object: 'lot', ...l }));
  return answer(JSON_TYPE, JSON.stringify({ object: 'list', data }));
}

export const readTasks = { report, reconciliation, journal, lots } satisfies ReadTasks;
export type FinanceTask = keyof typeof readTasks;

/** This module, for a read thread to load (the compiled build's .js, or the source). */
export const FINANCE_TASKS_MODULE = new URL(`./finance-answers${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;
