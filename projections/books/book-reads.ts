// What the finance reports read from the books' read models (books.ts): each a query on an index,
// bounded by the window, never a walk of the log.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { Booking, Lot } from '../../src/books/lot-book.ts';
import { DEFAULT_CURRENCY } from '../../src/money/money.ts';
import { fromTable, q } from '../runner/sql.ts';
import type { Row } from '../runner/row-projection.ts';
import { upstreamCostPerRowSql } from '../../src/catalogue/index.ts';
import { books, DAY_COLUMNS, type DayFigures } from './books.ts';
import { bookAccounts, bookDays, bookDeferred, bookEntries, bookLots } from './book-tables.ts';

export interface DayRow extends Row, DayFigures {
  day: string;
  account_id: string;
  model: string;
  channel: string;
}

/** The settlement currency the books hold. */
export async function booksCurrency(db: Queryable, schema: string): Promise<string> {
  const [row] = await db.query<Row>(`SELECT currency FROM ${q(schema, books.table)} WHERE key = 'book'`);
  return (row?.currency as string | undefined) ?? DEFAULT_CURRENCY;
}

/** The bookings summed per day, account, model and channel, for the UTC days `from` to `to`. */
export async function bookedDays(db: Queryable, schema: string, from: string, to: string): Promise<DayRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, bookDays.table)} WHERE day >= $1 AND day <= $2`, [from, to]);
  return rows.map((r) => fromTable<DayRow>(r));
}

/** A report row as stored: the day's bookings with the upstream cost of its calls (finance.ts adds the margin). */
export interface CostedDayRow extends DayRow {
  upstream_cost: number;
  unpriced_calls: number;
}

const ROW_KEYS = ['day', 'account_id', 'model', 'channel'];

/**
 * The bookings of the UTC days `from` to `to` per day, account, model and channel, joined with the
 * upstream cost of the same calls (a row may have either), in byte order of those four: the
 * finance report's rows, summed and sorted by the database (a year's report is tens of thousands
 * of rows). financeRows (src/books/finance.ts) is the same join in memory, for the whole-log fold.
 */
export async function bookedDaysWithCost(db: Queryable, schema: string, from: string, to: string): Promise<CostedDayRow[]> {
  const either = (c: string) => `coalesce(b.${c}, c.${c}) AS ${c}`;
  const figure = (c: string) => `coalesce(b.${c}, 0) AS ${c}`;
  return db.query<CostedDayRow>(
    `SELECT ${ROW_KEYS.map(either).join(', ')}, ${DAY_COLUMNS.map(figure).join(', ')},
       coalesce(c.upstream_cost, 0) AS upstream_cost, coalesce(c.unpriced_calls, 0) AS unpriced_calls
     FROM (SELECT * FROM ${q(schema, bookDays.table)} WHERE day >= $1 AND day <= $2) b
     FULL JOIN (${upstreamCostPerRowSql(schema)}) c USING (${ROW_KEYS.join(', ')})
     ORDER BY ${ROW_KEYS.map((c) => `${c} COLLATE "C"`).join(', ')}`,
    [from, to],
  );
}

/** The bookings of the UTC days `from` to `to` summed per account (the money reconciliation's left and right sides). */
export async function bookedPerAccount(db: Queryable, schema: string, from: string, to: string): Promise<Map<string, DayFigures>> {
  const rows = await db.query<Row>(
    `SELECT account_id, ${DAY_COLUMNS.map((c) => `sum(${c})::bigint AS ${c}`).join(', ')} FROM ${q(schema, bookDays.table)}
     WHERE day >= $1 AND day <= $2 GROUP BY account_id`,
    [from, to],
  );
  return new Map(rows.map(({ account_id, ...figures }) => [String(account_id), figures as DayFigures]));
}

/** The days, accounts, models and channels of the UTC days `from` to `to` whose uses moved revenue (the journal's use entries). */
export async function bookedRevenue(
  db: Queryable,
  schema: string,
  from: string,
  to: string,
): Promise<Array<{ day: string; account_id: string; model: string; channel: string; revenue: number }>> {
  return db.query(
    `SELECT day, account_id, model, channel, revenue FROM ${q(schema, bookDays.table)} WHERE day >= $1 AND day <= $2 AND revenue <> 0
     ORDER BY ${ROW_KEYS.map((c) => `${c} COLLATE "C"`).join(', ')}`,
    [from, to],
  );
}

/**
 * Each account's deferred revenue at the end of the day before `from` (its last row before the
 * window), and the rows of the window's days. An account with no row before has none.
 */
export async function deferredRows(
  db: Queryable,
  schema: string,
  from: string,
  to: string,
): Promise<{ before: Map<string, number>; within: Array<{ account_id: string; day: string; deferred: number }> }> {
  const t = q(schema, bookDeferred.table);
  const [before, within] = await Promise.all([
    // One look-up on (account_id, day) per account, not a scan of every day before the window.
    db.query<Row>(
      `SELECT a.key AS account_id, d.deferred FROM ${q(schema, bookAccounts.table)} a
       CROSS JOIN LATERAL (SELECT deferred FROM ${t} WHERE account_id = a.key AND day < $1 ORDER BY day DESC LIMIT 1) d`,
      [from],
    ),
    db.query<Row>(`SELECT account_id, day, deferred FROM ${t} WHERE day >= $1 AND day <= $2 ORDER BY day`, [from, to]),
  ]);
  return {
    before: new Map(before.map((r) => [String(r.account_id), Number(r.deferred)])),
    within: within.map((r) => ({ account_id: String(r.account_id), day: String(r.day), deferred: Number(r.deferred) })),
  };
}

/** The bookings other than uses of the window's days, in log order. */
export async function bookedEntries(db: Queryable, schema: string, from: string, to: string): Promise<Booking[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, bookEntries.table)} WHERE day >= $1 AND day <= $2 ORDER BY day, position, seq`, [from, to]);
  return rows.map((r) => ({
    at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
    eventId: String(r.event_id),
    accountId: String(r.account_id),
    lotId: (r.lot_id as string | null) ?? null,
    kind: r.kind as Booking['kind'],
    currency: String(r.currency),
    model: '',
    channel: '',
    amount: Number(r.amount),
    fee: Number(r.fee),
    fromDeferred: Number(r.from_deferred),
    refundedRevenue: Number(r.refunded_revenue),
    tax: Number(r.tax),
    promotionalTokens: 0,
  }));
}

/** Every lot granted on or before the UTC day `to`, as it stands now, in grant order. */
export async function bookedLots(db: Queryable, schema: string, to: string): Promise<Lot[]> {
  const rows = await db.query<Row>(`SELECT lot FROM ${q(schema, bookLots.table)} WHERE granted_at < $1::timestamptz ORDER BY granted_at, key`, [
    new Date(Date.parse(`${to}T00:00:00.000Z`) + 86_400_000).toISOString(),
  ]);
  return rows.map((r) => r.lot as Lot);
}
