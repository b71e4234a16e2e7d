// What the finance reports read from the books' read models (books.ts): each a query on an index,
// bounded by the window, never a walk of the log.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { Booking, Lot } from '../../src/books/lot-book.ts';
import { DEFAULT_CURRENCY } from '../../src/money/money.ts';
import { fromTable, q } from '../runner/sql.ts';
import type { Row } from '../runner/row-projection.ts';
import { books, type DayFigures } from './books.ts';
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
