// The finance reports' answers, written out as the text the client gets: the report (JSON or
// CSV), the money reconciliation, the journal (hledger, CSV or JSON) and the lots of a window,
// from the books' read models. They are read tasks (src/eventstore/read-thread.ts): on a
// PostgreSQL server they run on a thread of their own, so a year's report (tens of thousands of
// rows, megabytes of JSON) never holds the thread that serves calls.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Queryable } from '../eventstore/db.ts';
import type { ReadTasks } from '../eventstore/read-thread.ts';
import { deferredByDay, deferredRows, moneyBooksFrom, type Window } from './finance.ts';
import { reconcileMoney } from './finance-reconcile.ts';
import { FIELDS_OF, journalText, renderStaleDays, reportText, windowParts } from './day-renders.ts';
import { bookedLots, booksCurrency, deferredRows as deferredBalances } from '../../projections/books/book-reads.ts';
import type { PeriodView } from './periods.ts';

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
  const [currency, parts, deferred] = await Promise.all([
    booksCurrency(db, q.schema),
    windowParts(db, q.schema, q.window, q.format === 'csv' ? FIELDS_OF.report.csv : FIELDS_OF.report.json),
    q.format === 'csv' ? null : deferredBalances(db, q.schema, q.window.from, q.window.to),
  ]);
  if (q.format === 'csv') return answer('text/csv', reportText('csv', parts, { currency, window: q.window, deferred: [], periods: [] }));
  const head = { currency, window: q.window, deferred: deferredRows(deferredByDay(deferred!, q.window), q.window), periods: q.periods };
  return answer(JSON_TYPE, reportText('json', parts, head));
}

/** The reconciliation when it balances; one that does not is answered by the caller, with the events behind it. */
async function reconciliation(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const rec = reconcileMoney(await moneyBooksFrom(db, q.schema, q.window), q.window);
  const balanced = rec.lines.every((l) => l.difference === 0);
  return answer(JSON_TYPE, balanced ? JSON.stringify({ object: 'money_reconciliation', ...rec, periods: q.periods }) : '', balanced);
}

async function journal(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const format = q.format === 'json' || q.format === 'csv' ? q.format : 'hledger';
  const text = journalText(format, await windowParts(db, q.schema, q.window, FIELDS_OF.journal[format]), q.window);
  return answer(format === 'json' ? JSON_TYPE : format === 'csv' ? 'text/csv' : 'text/plain', text);
}

async function lots(db: Queryable, q: FinanceQuery): Promise<FinanceAnswer> {
  const data = (await bookedLots(db, q.schema, q.window.to)).map((l) => ({ object: 'lot', ...l }));
  return answer(JSON_TYPE, JSON.stringify({ object: 'list', data }));
}

export const readTasks = { report, reconciliation, journal, lots, renderStaleDays } satisfies ReadTasks;
export type FinanceTask = keyof typeof readTasks;

/** This module, for a read thread to load (the compiled build's .js, or the source). */
export const FINANCE_TASKS_MODULE = new URL(`./finance-answers${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;
