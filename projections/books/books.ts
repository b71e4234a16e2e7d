// The books as read models (issue 41): the lot book (src/books/lot-book.ts) folded a page at a
// time by the projector, its state kept in tables between pages, its bookings summed per day.
// A page loads only the accounts it concerns (named by its events, or whose plan lot ends within
// it) with their lots, folds the events through the same lot book a whole-log fold uses, and
// writes back what changed, with the checkpoint, in the runner's transaction.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import { InvariantViolation } from '../../src/ledger/errors.ts';
import { DEFAULT_CURRENCY } from '../../src/money/money.ts';
import { callChannels, UNRECORDED } from '../../src/catalogue/index.ts';
import {
  applyOwn,
  assertLot,
  BOOK_EVENT_TYPES,
  emptyLotBook,
  expireAccount,
  nextExpiry,
  type AccountLots,
  type Booking,
  type Lot,
  type LotBook,
} from '../../src/books/lot-book.ts';
import { dayOf, defineProjection, type Row } from '../runner/row-projection.ts';
import { byEnd } from '../../src/books/lot-fold.ts';
import { q } from '../runner/sql.ts';
import { noteDayChanges } from '../runner/day-changes.ts';
import { bookAccounts, bookDayChanges, bookDays, bookDeferred, bookEntries, bookLots } from './book-tables.ts';

/** The figures one booking adds to its day's row (book_days), by column. */
export const DAY_COLUMNS = [
  'payments',
  'fees',
  'refunds',
  'disputes',
  'dispute_fees',
  'revenue',
  'refunded_revenue',
  'breakage',
  'promotional_tokens',
  'tax',
  'tax_refunded',
  'fx_gain_loss',
] as const;
export type DayFigures = Record<(typeof DAY_COLUMNS)[number], number>;

export const noFigures = (): DayFigures => ({
  payments: 0,
  fees: 0,
  refunds: 0,
  disputes: 0,
  dispute_fees: 0,
  revenue: 0,
  refunded_revenue: 0,
  breakage: 0,
  promotional_tokens: 0,
  tax: 0,
  tax_refunded: 0,
  fx_gain_loss: 0,
});

/** What one booking adds to its row of the report. */
export function addBooking(r: DayFigures, b: Booking): void {
  switch (b.kind) {
    case 'payment':
      r.payments += b.amount;
      r.fees += b.fee;
      r.tax += b.tax;
      return;
    case 'use':
      r.revenue += b.amount;
      r.promotional_tokens += b.promotionalTokens;
      return;
    case 'breakage':
      r.breakage += b.amount;
      return;
    case 'refund':
    case 'dispute':
      if (b.kind === 'refund') r.refunds += b.amount;
      else r.disputes += b.amount;
      r.refunded_revenue -= b.refundedRevenue;
      r.tax_refunded += b.tax;
      return;
    case 'dispute_fee':
      r.dispute_fees += b.amount;
      return;
    case 'fx':
      r.fx_gain_loss += b.amount;
      return;
  }
}

/** The report's row of a booking: a use without a recorded channel goes under UNRECORDED. */
export const dayKeyOf = (b: Booking): [string, string, string, string] => [dayOf(b.at), b.accountId, b.model, b.model && !b.channel ? UNRECORDED : b.channel];

/** The lot book's state of the accounts a page concerns, and what the page changes. */
interface PageBook {
  book: LotBook;
  currency: string;
  /** Whether the settings row exists (a first page writes it). */
  stateFound: boolean;
  /** The rows as loaded (JSON text), to write only what changed. */
  loadedAccounts: Map<string, string>;
  loadedLots: Map<string, string>;
}

const accountRow = (a: AccountLots, next: string | null): Row => ({
  plan: a.plan,
  plans: a.plans,
  extra: a.extra,
  extra_used: a.extraUsed,
  pending: Object.fromEntries(a.pendingPayment),
  next_expiry: next,
});

/** The accounts and lots the page needs, as the lot book holds them. */
async function loadPage(tx: Queryable, schema: string, events: ProjectedEvent[]): Promise<PageBook> {
  const named = new Set<string>();
  let until = events[0].timestamp;
  for (const e of events) {
    const accountId = (e.data as { accountId?: unknown }).accountId;
    if (typeof accountId === 'string') named.add(accountId);
    if (e.timestamp > until) until = e.timestamp;
  }
  const [state] = await tx.query<Row>(`SELECT currency FROM ${q(schema, books.table)} WHERE key = 'book'`);
  const rows = await tx.query<Row>(`SELECT * FROM ${q(schema, bookAccounts.table)} WHERE key = ANY($1::text[]) OR next_expiry <= $2::timestamptz`, [
    [...named],
    until,
  ]);
  const ids = [...new Set([...named, ...rows.map((r) => String(r.key))])];
  const lots = ids.length ? await tx.query<Row>(`SELECT key, lot FROM ${q(schema, bookLots.table)} WHERE account_id = ANY($1::text[])`, [ids]) : [];
  const book = emptyLotBook({ keep: false });
  const loadedAccounts = new Map<string, string>();
  const loadedLots = new Map<string, string>();
  for (const r of rows) {
    const a: AccountLots = {
      plan: (r.plan as string | null) ?? null,
      plans: r.plans as string[],
      extra: r.extra as string[],
      extraUsed: Number(r.extra_used),
      pendingPayment: new Map(Object.entries(r.pending as Record<string, never>)),
    };
    book.accounts.set(String(r.key), a);
  }
  for (const r of lots) {
    const l = r.lot as Lot;
    book.lots.set(l.lotId, l);
    loadedLots.set(l.lotId, JSON.stringify(l));
  }
  for (const [id, a] of book.accounts) loadedAccounts.set(id, JSON.stringify(accountRow(a, nextExpiry(book, id))));
  return { book, currency: (state?.currency as string | undefined) ?? DEFAULT_CURRENCY, stateFound: state !== undefined, loadedAccounts, loadedLots };
}

/** The channel of each charge the page's corrections adjust: the page's own charges, then the calls' read model. */
async function adjustedChannels(tx: Queryable, schema: string, events: ProjectedEvent[]): Promise<Map<string, string>> {
  const channels = new Map<string, string>();
  for (const e of events) if (e.type === 'ChatCharged' || e.type === 'ImageCharged') channels.set(e.id, (e.data as { channel?: string }).channel || UNRECORDED);
  const missing = events
    .filter((e) => e.type === 'ChargeAdjusted')
    .map((e) => (e.data as { chargeEventId: string }).chargeEventId)
    .filter((id) => !channels.has(id));
  if (missing.length > 0) for (const [id, channel] of await callChannels(tx, schema, missing)) channels.set(id, channel);
  return channels;
}

/** Deferred revenue of an account: the sum over its lots (null: it has none yet). */
function deferredOf(b: LotBook, accountId: string): number | null {
  const a = b.accounts.get(accountId);
  if (!a || a.plans.length + a.extra.length === 0) return null;
  let sum = 0;
  for (const id of a.plans) sum += b.lots.get(id)!.deferred;
  for (const id of a.extra) sum += b.lots.get(id)!.deferred;
  return sum;
}

/** Plan lots still to end, soonest first: the accounts loaded, and those a grant in the page adds. */
class EndingLots {
  private queue: Array<{ at: string; accountId: string }> = [];
  /** The end queued for each account (an account's plan lot changes only by a grant or its end). */
  private queued = new Map<string, string>();
  constructor(private readonly book: LotBook) {
    for (const id of book.accounts.keys()) this.note(id);
  }
  note(accountId: string): void {
    const at = nextExpiry(this.book, accountId);
    if (at === null || this.queued.get(accountId) === at) return;
    this.queued.set(accountId, at);
    this.queue.push({ at, accountId });
    this.queue.sort((x, y) => byEnd({ expiresAt: x.at, accountId: x.accountId }, { expiresAt: y.at, accountId: y.accountId }));
  }
  /** The accounts whose plan lot has ended by `at` (each ends it itself; a stale entry ends nothing). */
  *due(at: string): Generator<string> {
    while (this.queue.length > 0 && this.queue[0].at <= at) {
      const { accountId } = this.queue.shift()!;
      this.queued.delete(accountId);
      yield accountId;
    }
  }
}

/** Folds the page and writes what it changed. */
async function foldPage(tx: Queryable, schema: string, events: ProjectedEvent[]): Promise<void> {
  const page = await loadPage(tx, schema, events);
  const channels = await adjustedChannels(tx, schema, events);
  const { book } = page;
  book.channelOf = (id) => channels.get(id) ?? '';
  const days = new Map<string, { key: [string, string, string, string]; figures: DayFigures }>();
  const entries: Row[] = [];
  const balances = new Map<string, { account_id: string; day: string; deferred: number }>();
  /** The last event that booked on each day (events come in log order). */
  const changed = new Map<string, number>();
  let current: ProjectedEvent = events[0];
  let seq = 0;
  book.sink = (b) => {
    const key = dayKeyOf(b);
    changed.set(key[0], current.position);
    const k = JSON.stringify(key);
    let d = days.get(k);
    if (!d) days.set(k, (d = { key, figures: noFigures() }));
    addBooking(d.figures, b);
    if (b.kind !== 'use')
      entries.push({
        key: `${current.id}|${seq}`,
        position: current.position,
        seq: seq++,
        at: b.at,
        day: dayOf(b.at),
        event_id: b.eventId,
        account_id: b.accountId,
        lot_id: b.lotId,
        kind: b.kind,
        currency: b.currency,
        amount: b.amount,
        fee: b.fee,
        from_deferred: b.fromDeferred,
        refunded_revenue: b.refundedRevenue,
        tax: b.tax,
      });
  };
  const noteBalance = (accountId: string, day: string) => {
    const deferred = deferredOf(book, accountId);
    if (deferred !== null) balances.set(`${accountId}|${day}`, { account_id: accountId, day, deferred });
  };
  const ending = new EndingLots(book);
  let currency = page.currency;
  for (const e of events) {
    current = e;
    seq = 0;
    for (const accountId of ending.due(e.timestamp)) {
      const ended = expireAccount(book, accountId, e.timestamp, e);
      if (ended) noteBalance(accountId, dayOf(ended.expiresAt!));
    }
    if (e.type === 'SettlementCurrencySet') currency = (e.data as { currency: string }).currency;
    applyOwn(book, e, currency);
    const accountId = (e.data as { accountId?: unknown }).accountId;
    if (typeof accountId === 'string') {
      noteBalance(accountId, dayOf(e.timestamp));
      ending.note(accountId);
    }
  }
  // The days' changes go with the page's other writes, not in a round trip of their own.
  await Promise.all([writePage(tx, schema, page, currency, days, entries, balances), noteDayChanges(tx, schema, bookDayChanges.table, changed)]);
}

async function writePage(
  tx: Queryable,
  schema: string,
  page: PageBook,
  currency: string,
  days: Map<string, { key: [string, string, string, string]; figures: DayFigures }>,
  entries: Row[],
  balances: Map<string, Row>,
): Promise<void> {
  const { book } = page;
  const accounts: Row[] = [];
  for (const [id, a] of book.accounts) {
    const row = accountRow(a, nextExpiry(book, id));
    if (page.loadedAccounts.get(id) !== JSON.stringify(row)) accounts.push({ key: id, ...row });
  }
  const lots: Row[] = [];
  for (const l of book.lots.values()) {
    assertLot(l);
    if (page.loadedLots.get(l.lotId) !== JSON.stringify(l)) lots.push({ key: l.lotId, account_id: l.accountId, granted_at: l.grantedAt, lot: l });
  }
  const writes: Array<Promise<unknown>> = [];
  const send = (text: string, params: unknown[]) => {
    const w = tx.query(text, params);
    w.catch(() => undefined);
    writes.push(w);
  };
  if (currency !== page.currency || !page.stateFound)
    send(`INSERT INTO ${q(schema, books.table)} (key, currency) VALUES ('book', $1) ON CONFLICT (key) DO UPDATE SET currency = excluded.currency`, [currency]);
  if (accounts.length)
    send(
      upsert(
        schema,
        bookAccounts.table,
        Object.keys(accounts[0]).filter((c) => c !== 'key'),
      ),
      [JSON.stringify(accounts)],
    );
  if (lots.length) send(upsert(schema, bookLots.table, ['account_id', 'granted_at', 'lot']), [JSON.stringify(lots)]);
  if (days.size) {
    const rows = [...days.values()].map(({ key: [day, account_id, model, channel], figures }) => ({
      key: JSON.stringify([day, account_id, model, channel]),
      day,
      account_id,
      model,
      channel,
      ...figures,
    }));
    const t = q(schema, bookDays.table);
    send(
      `INSERT INTO ${t} AS t SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)
       ON CONFLICT (key) DO UPDATE SET ${DAY_COLUMNS.map((c) => `${c} = t.${c} + excluded.${c}`).join(', ')}`,
      [JSON.stringify(rows)],
    );
  }
  if (balances.size)
    send(upsert(schema, bookDeferred.table, ['account_id', 'day', 'deferred']), [JSON.stringify([...balances].map(([key, r]) => ({ key, ...r })))]);
  if (entries.length) {
    const t = q(schema, bookEntries.table);
    send(`INSERT INTO ${t} SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)`, [JSON.stringify(entries)]);
  }
  await Promise.all(writes);
}

const upsert = (schema: string, table: string, columns: string[]): string => {
  const t = q(schema, table);
  return `INSERT INTO ${t} SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)
    ON CONFLICT (key) DO UPDATE SET ${columns.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`;
};

/**
 * The lot book's fold: its table holds the book's settings (the settlement currency); the
 * accounts, lots, days, deferred balances and bookings go to the tables of book-tables.ts.
 */
export const books = defineProjection<Row>({
  name: 'books',
  table: 'book_state',
  columns: 'currency text NOT NULL',
  handles: BOOK_EVENT_TYPES,
  keysOf: () => {
    throw new InvariantViolation('the books fold a page at a time (applyPage)');
  },
  evolve: () => {
    throw new InvariantViolation('the books fold a page at a time (applyPage)');
  },
  applyPage: foldPage,
});
