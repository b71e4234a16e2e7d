// The tables of the books' read models (issue 41): what the lot book holds between pages, and what
// the finance reports read. One fold keeps them all (books.ts); each is declared here so the
// schema, a rebuild and verify know it.
import { foldedTable as bookTable } from '../runner/row-projection.ts';
import { DAY_CHANGE_COLUMNS } from '../runner/day-changes.ts';

/**
 * Each account's place in the lot book (key: account id): its plan lots, its extra pool in grant
 * order and the pool's use, the payments waiting for their grant, and when its plan lot ends.
 */
export const bookAccounts = bookTable(
  'book_accounts',
  `plan text, plans jsonb NOT NULL, extra jsonb NOT NULL, extra_used bigint NOT NULL, pending jsonb NOT NULL, next_expiry timestamptz`,
  ['next_expiry'],
);

/** Every lot as it stands (key: lot id), with its account and grant time for the lists. */
export const bookLots = bookTable('book_lots', 'account_id text NOT NULL, granted_at timestamptz NOT NULL, lot jsonb NOT NULL', ['account_id', 'granted_at']);

/** The bookings summed per UTC day, account, model and channel: the finance report's rows before upstream cost. */
export const bookDays = bookTable(
  'book_days',
  `day text NOT NULL, account_id text NOT NULL, model text NOT NULL, channel text NOT NULL, payments bigint NOT NULL, fees bigint NOT NULL,
    refunds bigint NOT NULL, disputes bigint NOT NULL, dispute_fees bigint NOT NULL, revenue bigint NOT NULL, refunded_revenue bigint NOT NULL,
    breakage bigint NOT NULL, promotional_tokens bigint NOT NULL`,
  ['day'],
  // Tax came later (issue 43): every booking before it was untaxed.
  { addedColumns: ['tax bigint NOT NULL DEFAULT 0', 'tax_refunded bigint NOT NULL DEFAULT 0', 'fx_gain_loss bigint NOT NULL DEFAULT 0'] },
);

/**
 * An account's deferred revenue at the end of each UTC day the lot book moved it or folded one of
 * its events (key: account and day); a day without a row has the balance of the row before it.
 */
export const bookDeferred = bookTable('book_deferred', 'account_id text NOT NULL, day text NOT NULL, deferred bigint NOT NULL', ['account_id, day', 'day']);

/**
 * The bookings other than uses (payments, refunds, disputes, their fees, breakage), one row each
 * in log order (key: the booking's event and its place among the event's bookings). Uses are too
 * many to keep one by one: the journal books them per day from book_days.
 */
export const bookEntries = bookTable(
  'book_entries',
  `position bigint NOT NULL, seq integer NOT NULL, at timestamptz NOT NULL, day text NOT NULL, event_id text NOT NULL, account_id text NOT NULL,
    lot_id text, kind text NOT NULL, currency text NOT NULL, amount bigint NOT NULL, fee bigint NOT NULL, from_deferred bigint NOT NULL,
    refunded_revenue bigint NOT NULL`,
  ['day, position, seq'],
  { addedColumns: ['tax bigint NOT NULL DEFAULT 0'] },
);

/**
 * The last event that changed each UTC day's bookings (key: the day; projections/runner/day-changes.ts).
 */
export const bookDayChanges = bookTable('book_day_changes', DAY_CHANGE_COLUMNS);
