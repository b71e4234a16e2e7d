// The finance report and the money reconciliation, per UTC day, account, model and channel, read
// from the books' read models (projections/books/): the bookings summed per day, each account's
// deferred revenue at each day's end (read from the lots, not from the bookings, so the
// reconciliation compares two independent figures) and the upstream cost of the window's calls.
// Every read is bounded by the window; nothing walks the log.
import type { Ledger } from '../ledger/ledger.ts';
import type { Queryable } from '../eventstore/db.ts';
import { upstreamCostBetween, type UpstreamCostRow } from '../catalogue/index.ts';
import { bookedDays, booksCurrency, deferredRows as deferredBalances } from '../../projections/books/book-reads.ts';
import { noFigures, type DayFigures } from '../../projections/books/books.ts';
import { dayOf, nextDay } from './lot-fold.ts';

export { nextDay } from './lot-fold.ts';

export interface Window {
  /** First and last UTC day, inclusive (YYYY-MM-DD). */
  from: string;
  to: string;
}

export interface FinanceRow extends DayFigures {
  day: string;
  account_id: string;
  model: string;
  channel: string;
  /** Upstream cost (minor units) of the calls priced, the calls no rate prices, and revenue - cost. */
  upstream_cost: number;
  unpriced_calls: number;
  margin: number;
}

/** What the reports of a window stand on. */
export interface Books {
  currency: string;
  /** Deferred revenue per account at the end of each day of the window. */
  deferredAt: Map<string, Map<string, number>>;
  /** Deferred revenue per account when the window opened. */
  deferredBefore: Map<string, number>;
  /** Upstream cost of the window's calls (projections/catalogue/upstream-cost.ts). */
  costs: UpstreamCostRow[];
  /** The window's bookings summed per day, account, model and channel (financeRows adds the costs). */
  rows: Map<string, FinanceRow>;
}

export const zeroRow = (day: string, account_id: string, model: string, channel: string): FinanceRow => ({
  day,
  account_id,
  model,
  channel,
  ...noFigures(),
  upstream_cost: 0,
  unpriced_calls: 0,
  margin: 0,
});

export function rowOf(rows: Map<string, FinanceRow>, day: string, account: string, model: string, channel: string): FinanceRow {
  // Joined with a character no id holds: tens of thousands of rows a year's report, each keyed twice.
  const key = `${day}\u0000${account}\u0000${model}\u0000${channel}`;
  let r = rows.get(key);
  if (!r) rows.set(key, (r = zeroRow(day, account, model, channel)));
  return r;
}

/** The books of a window, from the read models as of now (the log is read up to here first). */
export async function readBooks(ledger: Ledger, w: Window, opts: { withCostRates?: boolean } = {}): Promise<Books> {
  await ledger.readYourWrites();
  return readBooksFrom(ledger.readModels.db, ledger.readModels.schema, w, opts);
}

/** The same, from a read-model schema as it stands. */
export async function readBooksFrom(db: Queryable, schema: string, w: Window, opts: { withCostRates?: boolean } = {}): Promise<Books> {
  const [currency, days, deferred, costs] = await Promise.all([
    booksCurrency(db, schema),
    bookedDays(db, schema, w.from, w.to),
    deferredBalances(db, schema, w.from, w.to),
    upstreamCostBetween(db, schema, w.from, w.to, { withRates: !!opts.withCostRates }),
  ]);
  const rows = new Map<string, FinanceRow>();
  for (const d of days) Object.assign(rowOf(rows, d.day, d.account_id, d.model, d.channel), d);
  return { currency, ...deferredByDay(deferred, w), costs, rows };
}

/** Each day's end balances of the window: a day without a row keeps the balance of the day before. */
export function deferredByDay(
  d: { before: Map<string, number>; within: Array<{ account_id: string; day: string; deferred: number }> },
  w: Window,
): Pick<Books, 'deferredAt' | 'deferredBefore'> {
  const byDay = new Map<string, Array<{ account_id: string; deferred: number }>>();
  for (const r of d.within) {
    let list = byDay.get(r.day);
    if (!list) byDay.set(r.day, (list = []));
    list.push(r);
  }
  const deferredAt = new Map<string, Map<string, number>>();
  const running = new Map(d.before);
  for (let day = w.from; day <= w.to; day = nextDay(day)) {
    for (const r of byDay.get(day) ?? []) running.set(r.account_id, r.deferred);
    deferredAt.set(day, new Map(running));
  }
  return { deferredAt, deferredBefore: d.before };
}

export const inWindow = (w: Window, at: string): boolean => dayOf(at) >= w.from && dayOf(at) <= w.to;

/** The report's rows: one per day, account, model and channel that moved money (usage rows carry model and channel). */
export function financeRows(f: Pick<Books, 'rows' | 'costs'>): FinanceRow[] {
  const rows = new Map([...f.rows].map(([k, r]) => [k, { ...r }]));
  for (const c of f.costs) {
    const r = rowOf(rows, c.day, c.account_id, c.model, c.channel);
    r.upstream_cost += Number(c.cost_minor);
    r.unpriced_calls += c.unpriced_calls;
  }
  // Each row's sort key made once, not at every comparison.
  const keyed = [...rows.values()].map((r) => {
    r.margin = r.revenue - r.upstream_cost;
    return { r, key: r.day + r.account_id + r.model + r.channel };
  });
  return keyed.sort((a, b) => (a.key < b.key ? -1 : 1)).map((k) => k.r);
}

export const sumRows = (rows: FinanceRow[]): Omit<FinanceRow, 'day' | 'account_id' | 'model' | 'channel'> => {
  const t = zeroRow('', '', '', '');
  for (const r of rows) for (const k of Object.keys(t) as Array<keyof FinanceRow>) if (typeof t[k] === 'number') (t[k] as number) += r[k] as number;
  const { day: _d, account_id: _a, model: _m, channel: _c, ...sums } = t;
  return sums;
};

/** Deferred revenue at the end of each day of the window, per account. */
export function deferredRows(f: Pick<Books, 'deferredAt'>, w: Window): Array<{ day: string; account_id: string; deferred: number }> {
  const out: Array<{ day: string; account_id: string; deferred: number }> = [];
  for (let d = w.from; d <= w.to; d = nextDay(d)) {
    const accounts = [...(f.deferredAt.get(d) ?? [])].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [account_id, deferred] of accounts) out.push({ day: d, account_id, deferred });
  }
  return out;
}
