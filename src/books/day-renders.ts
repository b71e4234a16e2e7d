// The finance report's and the journal's text, a UTC day at a time. A window's answer is its days'
// parts in day order: the report's rows and the journal's entries sort by day first, and totals
// and balances add up. So a closed day's parts are rendered once and kept while the day is
// unchanged (projections/books/book-renders.ts; the day renderer keeps them current), and a read
// renders only the days with no current part (today, a day a late event changed). Joining the
// parts gives, byte for byte, what rendering the whole window at once gives (test/day-renders.test.ts).
import type { Queryable } from '../eventstore/db.ts';
import { bookedEntries, bookedDaysWithCost } from '../../projections/books/book-reads.ts';
import { ensureRendersTable, keepParts, keptParts, staleDays, type DayParts, type PartField, type SomeParts } from '../../projections/books/book-renders.ts';
import { DAY_COLUMNS } from '../../projections/books/books.ts';
import { journalBooksFrom, nextDay, sumRows, withMargin, type FinanceRow, type Window } from './finance.ts';
import { accountBalances, JOURNAL_CSV_HEADER, journalCsvLines, journalEntries, journalHledger } from './finance-journal.ts';

export type { DayParts, PartField } from '../../projections/books/book-renders.ts';

/** The parts each answer is made of. */
export const FIELDS_OF = {
  report: { json: ['reportJson', 'reportTotals'], csv: ['reportCsv'] },
  journal: { hledger: ['journalHledger'], csv: ['journalCsv'], json: ['journalJson', 'journalBalances'] },
} satisfies Record<string, Record<string, PartField[]>>;

export const REPORT_COLUMNS: Array<keyof FinanceRow> = ['day', 'account_id', 'model', 'channel', ...DAY_COLUMNS, 'upstream_cost', 'unpriced_calls', 'margin'];
type Totals = ReturnType<typeof sumRows>;

const REPORT_FIELDS: PartField[] = ['reportJson', 'reportCsv', 'reportTotals'];
const JOURNAL_FIELDS: PartField[] = ['journalHledger', 'journalCsv', 'journalJson', 'journalBalances'];

/** The report's parts of each day from `from` to `to` (a day with nothing booked has empty ones). */
async function reportParts(db: Queryable, schema: string, from: string, to: string): Promise<Map<string, SomeParts>> {
  const rowsOf = groupByDay((await bookedDaysWithCost(db, schema, from, to)).map(withMargin), (r) => r.day);
  const out = new Map<string, SomeParts>();
  for (let day = from; day <= to; day = nextDay(day)) {
    const rows = rowsOf.get(day) ?? [];
    out.set(day, {
      day,
      reportJson: rows.map((r) => JSON.stringify(r)).join(','),
      reportCsv: rows.map((r) => REPORT_COLUMNS.map((c) => r[c]).join(',')).join('\n'),
      reportTotals: JSON.stringify(sumRows(rows)),
    });
  }
  return out;
}

/** The journal's parts of each day from `from` to `to`, with the settlement currency its uses and costs are booked in. */
async function journalParts(db: Queryable, schema: string, from: string, to: string): Promise<Map<string, SomeParts>> {
  const [journal, bookings] = await Promise.all([journalBooksFrom(db, schema, { from, to }), bookedEntries(db, schema, from, to)]);
  const entriesOf = groupByDay(journalEntries(journal, bookings), (e) => e.date);
  const out = new Map<string, SomeParts>();
  for (let day = from; day <= to; day = nextDay(day)) {
    const entries = entriesOf.get(day) ?? [];
    out.set(day, {
      day,
      currency: journal.currency,
      journalHledger: journalHledger(entries),
      journalCsv: journalCsvLines(entries).join('\n'),
      journalJson: entries.map((e) => JSON.stringify(e)).join(','),
      journalBalances: JSON.stringify(accountBalances(entries)),
    });
  }
  return out;
}

/** The parts of every UTC day from `from` to `to` that `fields` asks for (the report's, the journal's or both), rendered from the read models now. */
export async function renderDays(db: Queryable, schema: string, from: string, to: string, fields: PartField[]): Promise<SomeParts[]> {
  const none = Promise.resolve(new Map<string, SomeParts>());
  const [report, journal] = await Promise.all([
    fields.some((f) => REPORT_FIELDS.includes(f)) ? reportParts(db, schema, from, to) : none,
    fields.some((f) => JOURNAL_FIELDS.includes(f)) ? journalParts(db, schema, from, to) : none,
  ]);
  const out: SomeParts[] = [];
  for (let day = from; day <= to; day = nextDay(day)) out.push({ ...report.get(day), ...journal.get(day), day });
  return out;
}

function groupByDay<T>(items: T[], dayOf: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const day = dayOf(item);
    let list = out.get(day);
    if (!list) out.set(day, (list = []));
    list.push(item);
  }
  return out;
}

/** The parts `fields` asks for of every day of the window, in day order: those kept and current, the others rendered now (a run of days at once). */
export async function windowParts(db: Queryable, schema: string, w: Window, fields: PartField[]): Promise<SomeParts[]> {
  const kept = await keptParts(db, schema, w.from, w.to, fields);
  const missing: string[] = [];
  for (let day = w.from; day <= w.to; day = nextDay(day)) if (!kept.has(day)) missing.push(day);
  const rendered = (await Promise.all(runsOf(missing).map((r) => renderDays(db, schema, r.from, r.to, fields)))).flat();
  for (const p of rendered) kept.set(p.day, p);
  const out: SomeParts[] = [];
  for (let day = w.from; day <= w.to; day = nextDay(day)) out.push(kept.get(day)!);
  return out;
}

/** Consecutive days as runs (each rendered with one set of queries). */
function runsOf(days: string[]): Array<{ from: string; to: string }> {
  const runs: Array<{ from: string; to: string }> = [];
  for (const day of [...days].sort()) {
    const last = runs[runs.length - 1];
    if (last && nextDay(last.to) === day) last.to = day;
    else runs.push({ from: day, to: day });
  }
  return runs;
}

/**
 * Renders and keeps the parts of up to `limit` closed days (before `before`, the current UTC day)
 * that have none or an out-of-date one, latest first; resolves with how many it rendered. Each
 * day's change is read before its rows, so a part is never kept as newer than what it shows.
 */
export async function renderStaleDays(db: Queryable, q: { schema: string; before: string; limit: number }): Promise<number> {
  await ensureRendersTable(db, q.schema);
  const stale = await staleDays(db, q.schema, q.before, q.limit);
  const stamps = new Map(stale.map((s) => [s.day, s.stamp]));
  for (const run of runsOf([...stamps.keys()])) {
    // A run holds stale days only, so every part rendered is kept.
    const parts = (await renderDays(db, q.schema, run.from, run.to, [...REPORT_FIELDS, ...JOURNAL_FIELDS])) as DayParts[];
    await keepParts(db, q.schema, parts, stamps);
  }
  return stale.length;
}

const joined = (parts: SomeParts[], field: PartField, separator: string): string =>
  parts
    .map((p) => p[field] ?? '')
    .filter((text) => text !== '')
    .join(separator);

/** Adds each part's figures, in the order of the first: totals and balances keep the key order a whole-window rendering gives. */
function added<T extends Record<string, number>>(start: T, parts: string[]): T {
  const out: Record<string, number> = { ...start };
  for (const text of parts) for (const [k, v] of Object.entries(JSON.parse(text) as Record<string, number>)) out[k] = (out[k] ?? 0) + v;
  return out as T;
}

/** The finance report of a window from its days' parts: JSON (with the deferred revenue and the periods given) or CSV. */
export function reportText(
  format: 'json' | 'csv',
  parts: SomeParts[],
  head: { currency: string; window: Window; deferred: unknown[]; periods: unknown[] },
): string {
  if (format === 'csv') return `${[REPORT_COLUMNS.join(','), joined(parts, 'reportCsv', '\n')].filter((t) => t !== '').join('\n')}\n`;
  const totals = added<Totals>(
    sumRows([]),
    parts.map((p) => p.reportTotals ?? '{}'),
  );
  return (
    `{"object":"finance_report","currency":${JSON.stringify(head.currency)},"from":${JSON.stringify(head.window.from)},"to":${JSON.stringify(head.window.to)},` +
    `"rows":[${joined(parts, 'reportJson', ',')}],"deferred":${JSON.stringify(head.deferred)},"totals":${JSON.stringify(totals)},"periods":${JSON.stringify(head.periods)}}`
  );
}

/** The journal of a window from its days' parts: hledger, CSV or JSON (with each journal account's balance). */
export function journalText(format: 'hledger' | 'csv' | 'json', parts: SomeParts[], w: Window): string {
  if (format === 'hledger') return joined(parts, 'journalHledger', '\n');
  if (format === 'csv') return `${[JOURNAL_CSV_HEADER, joined(parts, 'journalCsv', '\n')].filter((t) => t !== '').join('\n')}\n`;
  const balances = added<Record<string, number>>(
    {},
    parts.map((p) => p.journalBalances ?? '{}'),
  );
  return `{"object":"journal","from":${JSON.stringify(w.from)},"to":${JSON.stringify(w.to)},"entries":[${joined(parts, 'journalJson', ',')}],"balances":${JSON.stringify(balances)}}`;
}
