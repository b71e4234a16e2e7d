// The finance report and the money reconciliation, per UTC day, account, model and channel, read
// from the books' read models (projections/books/): the bookings summed per day, each account's
// deferred revenue at each day's end (read from the lots, not from the bookings, so the
// reconciliation compares two independent figures) and the upstream cost of the window's calls.
// Every read is bounded by the window; nothing walks the log.
import type { Ledger } from '../ledger/ledger.ts';
import type { Queryable } from '../eventstore/db.ts';
import { upstreamCostBetween, type UpstreamCostRow } from '../catalogue/index.ts';
import {
  bookedDays,
  bookedDaysWithCost,
  bookedPerAccount,
  bookedRevenue,
  booksCurrency,
  deferredRows as deferredBalances,
  type CostedDayRow,
} from '../../projections/books/book-reads.ts';
import { DAY_COLUMNS, noFigures, type DayFigures } from '../../projections/books/books.ts';
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

/** The books of a window from a read-model schema as it stands: every row of the window, as the whole-log fold gives them (the read models' test compares them). */
export async function readBooksFrom(db: Queryable, schema: string, w: Window): Promise<Books> {
  const [currency, days, deferred, costs] = await Promise.all([
    booksCurrency(db, schema),
    bookedDays(db, schema, w.from, w.to),
    deferredBalances(db, schema, w.from, w.to),
    upstreamCostBetween(db, schema, w.from, w.to),
  ]);
  const rows = new Map<string, FinanceRow>();
  for (const d of days) Object.assign(rowOf(rows, d.day, d.account_id, d.model, d.channel), d);
  return { currency, ...deferredByDay(deferred, w), costs, rows };
}

/** The finance report of a window from the read models: its rows joined and sorted by the database, and each day's deferred revenue. */
export async function reportFrom(db: Queryable, schema: string, w: Window): Promise<Pick<Books, 'currency' | 'deferredAt'> & { rows: FinanceRow[] }> {
  const [currency, rows, deferred] = await Promise.all([
    booksCurrency(db, schema),
    bookedDaysWithCost(db, schema, w.from, w.to),
    deferredBalances(db, schema, w.from, w.to),
  ]);
  return { currency, rows: rows.map(withMargin), deferredAt: deferredByDay(deferred, w).deferredAt };
}

/** What the money reconciliation stands on: each account's bookings summed over the window, and its deferred revenue at the window's two ends. */
export interface MoneyBooks {
  currency: string;
  perAccount: Map<string, DayFigures>;
  deferredBefore: Map<string, number>;
  deferredAtEnd: Map<string, number>;
}

/** A window's money books from the read models (summed per account by the database). */
export async function moneyBooksFrom(db: Queryable, schema: string, w: Window): Promise<MoneyBooks> {
  const [currency, perAccount, deferred] = await Promise.all([
    booksCurrency(db, schema),
    bookedPerAccount(db, schema, w.from, w.to),
    deferredBalances(db, schema, w.from, w.to),
  ]);
  const d = deferredByDay(deferred, w);
  return { currency, perAccount, deferredBefore: d.deferredBefore, deferredAtEnd: d.deferredAt.get(w.to) ?? new Map() };
}

/** The same, as of now (the log is read up to here first). */
export async function readMoneyBooks(ledger: Ledger, w: Window): Promise<MoneyBooks> {
  await ledger.readYourWrites();
  return moneyBooksFrom(ledger.readModels.db, ledger.readModels.schema, w);
}

/** A window's money books from its rows (a fold's, or readBooksFrom's). */
export function moneyBooksOf(f: Pick<Books, 'currency' | 'rows' | 'deferredAt' | 'deferredBefore'>, w: Window): MoneyBooks {
  const perAccount = new Map<string, DayFigures>();
  for (const r of f.rows.values()) {
    let sum = perAccount.get(r.account_id);
    if (!sum) perAccount.set(r.account_id, (sum = noFigures()));
    for (const c of DAY_COLUMNS) sum[c] += r[c];
  }
  return { currency: f.currency, perAccount, deferredBefore: f.deferredBefore, deferredAtEnd: f.deferredAt.get(w.to) ?? new Map() };
}

/** What the journal books of a window: the uses' revenue per day, account, model and channel, and the upstream cost with the rates in force. */
export interface JournalBooks {
  currency: string;
  uses: Array<{ day: string; account_id: string; model: string; channel: string; revenue: number }>;
  costs: UpstreamCostRow[];
}

export async function journalBooksFrom(db: Queryable, schema: string, w: Window): Promise<JournalBooks> {
  const [currency, uses, costs] = await Promise.all([
    booksCurrency(db, schema),
    bookedRevenue(db, schema, w.from, w.to),
    upstreamCostBetween(db, schema, w.from, w.to, { withRates: true }),
  ]);
  return { currency, uses, costs };
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

/** A report row's margin: its revenue less its upstream cost. */
export const withMargin = (r: CostedDayRow): FinanceRow => Object.assign(r, { margin: r.revenue - r.upstream_cost });

/**
 * The report's rows: one per day, account, model and channel that moved money (usage rows carry
 * model and channel), from a fold's or readBooksFrom's rows and costs; reportFrom has the database do
 * the same join.
 */
export function financeRows(f: Pick<Books, 'rows' | 'costs'>): FinanceRow[] {
  const rows = new Map([...f.rows].map(([k, r]) => [k, { ...r }]));
  for (const c of f.costs) {
    const r = rowOf(rows, c.day, c.account_id, c.model, c.channel);
    r.upstream_cost += Number(c.cost_minor);
    r.unpriced_calls += c.unpriced_calls;
  }
  // Each row's sort key made once, not at every comparison.
  const keyed = [...rows.values()].map((r) => ({ r: withMargin(r), key: `${r.day}\u0000${r.account_id}\u0000${r.model}\u0000${r.channel}` }));
  return keyed.sort((a, b) => (a.key < b.key ? -1 : 1)).map((k) => k.r);
}

const SUMMED = [...DAY_COLUMNS, 'upstream_cost', 'unpriced_calls', 'margin'] as const;

export const sumRows = (rows: FinanceRow[]): Omit<FinanceRow, 'day' | 'account_id' | 'model' | 'channel'> => {
  const { day: _d, account_id: _a, model: _m, channel: _c, ...sums } = zeroRow('', '', '', '');
  for (const r of rows) for (const k of SUMMED) sums[k] += r[k];
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
