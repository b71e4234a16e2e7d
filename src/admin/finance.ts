// The finance report and the money reconciliation, per UTC day, account, model and channel.
// Both fold the log through the lot book (src/money/lot-book.ts) up to the window's end: what
// was paid, refunded and disputed; revenue recognised, breakage and refunded revenue; deferred
// revenue at the end of each day, read from the lots themselves (not from the bookings), so the
// reconciliation compares two independent figures. The fold reads the log a page at a time and
// sums the window's bookings as they come: its memory is the lots and the report's rows, not the
// log (the bookings themselves are kept only when asked: the journal, an unbalanced reconciliation).
import type { Ledger } from '../ledger/ledger.ts';
import { emptyLotBook, type Booking, type LotBook } from '../money/lot-book.ts';
import { readLogPage } from './log-pages.ts';
import { dayOf, LotFold, nextDay } from './lot-fold.ts';
import { callChannels, upstreamCostBetween, type UpstreamCostRow } from '../../projections/upstream-cost.ts';
import { UNRECORDED } from '../../projections/upstream-report.ts';

export interface Window {
  /** First and last UTC day, inclusive (YYYY-MM-DD). */
  from: string;
  to: string;
}

export interface Folded {
  currency: string;
  book: LotBook;
  /** Deferred revenue per account at the end of each day the log reached (and of the window's last day). */
  deferredAt: Map<string, Map<string, number>>;
  /** Deferred revenue per account when the window opened. */
  deferredBefore: Map<string, number>;
  /** Upstream cost of the window's calls (projections/upstream-cost.ts). */
  costs: UpstreamCostRow[];
  /** The window's bookings summed per day, account, model and channel (financeRows adds the costs). */
  rows: Map<string, FinanceRow>;
}

export interface FoldOptions {
  /** Keep the window's bookings (book.bookings) and each event's change of deferred revenue. */
  keepBookings?: boolean;
  /** Sees every booking of the window as it is made. */
  onBooking?: (b: Booking) => void;
}

export { nextDay } from './lot-fold.ts';

function deferredByAccount(book: LotBook): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of book.lots.values()) out.set(l.accountId, (out.get(l.accountId) ?? 0) + l.deferred);
  return out;
}

/** Folds the log up to the end of `w.to` (UTC), noting deferred revenue at each day's end. */
export async function foldFinance(ledger: Ledger, w: Window, opts: FoldOptions = {}): Promise<Folded> {
  const end = `${nextDay(w.to)}T00:00:00.000Z`;
  // The read models (the calls' channels, the costs) as of now: the log is read up to here too.
  await ledger.readYourWrites();
  const { db, schema } = ledger.readModels;
  const rows = new Map<string, FinanceRow>();
  const channels = new Map<string, string>();
  const book = emptyLotBook({
    inWindow: (at) => inWindow(w, at),
    keep: !!opts.keepBookings,
    sink: (b) => {
      addBooking(rowOf(rows, dayOf(b.at), b.accountId, b.model, b.model && !b.channel ? UNRECORDED : b.channel), b);
      opts.onBooking?.(b);
    },
    channelOf: (id) => channels.get(id) ?? '',
  });
  const deferredAt = new Map<string, Map<string, number>>();
  let deferredBefore = new Map<string, number>();
  const fold = new LotFold(book, end, (d) => {
    if (d < w.from) deferredBefore = deferredByAccount(book);
    else deferredAt.set(d, deferredByAccount(book));
  });
  let position = 0;
  outer: for (;;) {
    const page = await readLogPage(ledger, position);
    if (page.length === 0) break;
    // The channels of the charges this page's corrections adjust (only the page's are held).
    const adjusted = page.filter((e) => e.type === 'ChargeAdjusted').map((e) => (e.data as { chargeEventId: string }).chargeEventId);
    channels.clear();
    if (adjusted.length > 0) for (const [id, channel] of await callChannels(db, schema, adjusted)) channels.set(id, channel);
    for (const e of page) if (!fold.add(e)) break outer;
    position = page[page.length - 1].position;
  }
  fold.finish();
  const currency = fold.currency;
  // Days without events keep the deferred revenue of the day before.
  let last = deferredBefore;
  for (let d = w.from; d <= w.to; d = nextDay(d)) {
    const seen = deferredAt.get(d);
    if (seen) last = seen;
    else deferredAt.set(d, last);
  }
  const costs = await upstreamCostBetween(db, schema, w.from, w.to, { withEvents: !!opts.keepBookings });
  return { currency, book, deferredAt, deferredBefore, costs, rows };
}

export interface FinanceRow {
  day: string;
  account_id: string;
  model: string;
  channel: string;
  payments: number;
  fees: number;
  refunds: number;
  disputes: number;
  dispute_fees: number;
  revenue: number;
  /** Contra-revenue: negative, the part of refunds and lost disputes that had been recognised. */
  refunded_revenue: number;
  breakage: number;
  promotional_tokens: number;
  /** Upstream cost (minor units) of the calls priced, the calls no rate prices, and revenue - cost. */
  upstream_cost: number;
  unpriced_calls: number;
  margin: number;
}

const zeroRow = (day: string, account_id: string, model: string, channel: string): FinanceRow => ({
  day,
  account_id,
  model,
  channel,
  payments: 0,
  fees: 0,
  refunds: 0,
  disputes: 0,
  dispute_fees: 0,
  revenue: 0,
  refunded_revenue: 0,
  breakage: 0,
  promotional_tokens: 0,
  upstream_cost: 0,
  unpriced_calls: 0,
  margin: 0,
});

/** What one booking adds to its row of the report. */
function addBooking(r: FinanceRow, b: Booking): void {
  switch (b.kind) {
    case 'payment':
      r.payments += b.amount;
      r.fees += b.fee;
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
      return;
    case 'dispute_fee':
      r.dispute_fees += b.amount;
      return;
  }
}

export const inWindow = (w: Window, at: string): boolean => dayOf(at) >= w.from && dayOf(at) <= w.to;

function rowOf(rows: Map<string, FinanceRow>, day: string, account: string, model: string, channel: string): FinanceRow {
  const key = JSON.stringify([day, account, model, channel]);
  let r = rows.get(key);
  if (!r) rows.set(key, (r = zeroRow(day, account, model, channel)));
  return r;
}

/** The report's rows: one per day, account, model and channel that moved money (usage rows carry model and channel). */
export function financeRows(f: Folded): FinanceRow[] {
  const rows = new Map([...f.rows].map(([k, r]) => [k, { ...r }]));
  for (const c of f.costs) {
    const r = rowOf(rows, c.day, c.account_id, c.model, c.channel);
    r.upstream_cost += Number(c.cost_minor);
    r.unpriced_calls += c.unpriced_calls;
  }
  for (const r of rows.values()) r.margin = r.revenue - r.upstream_cost;
  return [...rows.values()].sort((a, b) => (a.day + a.account_id + a.model + a.channel < b.day + b.account_id + b.model + b.channel ? -1 : 1));
}

export const sumRows = (rows: FinanceRow[]): Omit<FinanceRow, 'day' | 'account_id' | 'model' | 'channel'> => {
  const t = zeroRow('', '', '', '');
  for (const r of rows) for (const k of Object.keys(t) as Array<keyof FinanceRow>) if (typeof t[k] === 'number') (t[k] as number) += r[k] as number;
  const { day: _d, account_id: _a, model: _m, channel: _c, ...sums } = t;
  return sums;
};

/** Deferred revenue at the end of each day of the window, per account and in total. */
export function deferredRows(f: Folded, w: Window): Array<{ day: string; account_id: string; deferred: number }> {
  const out: Array<{ day: string; account_id: string; deferred: number }> = [];
  for (let d = w.from; d <= w.to; d = nextDay(d)) for (const [account_id, deferred] of f.deferredAt.get(d) ?? []) out.push({ day: d, account_id, deferred });
  return out;
}
