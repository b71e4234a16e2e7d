// The books of a window folded from the log itself, through the same lot book the read models
// keep (projections/books/books.ts): what the reports read before the read models, kept for what
// only a fold can tell (which events' own bookings do not balance, when a reconciliation finds a
// difference) and as the reference the read models are tested against. It reads the whole log up
// to the window's end a page at a time: its memory is the lots and the report's rows.
import type { Ledger } from '../ledger/ledger.ts';
import type { ProjectedEvent } from '../eventstore/port.ts';
import { emptyLotBook, type LotBook } from './lot-book.ts';
import { readLogPage } from '../ledger/log-pages.ts';
import { dayOf, LotFold, nextDay } from './lot-fold.ts';
import { callChannels, upstreamCostBetween } from '../catalogue/index.ts';
import { addBooking, dayKeyOf } from '../../projections/books/books.ts';
import { inWindow, rowOf, type Books, type FinanceRow, type Window } from './finance.ts';

export interface Folded extends Books {
  book: LotBook;
}

function deferredByAccount(book: LotBook): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of book.lots.values()) out.set(l.accountId, (out.get(l.accountId) ?? 0) + l.deferred);
  return out;
}

/**
 * The fold itself, fed the log a page at a time in order (pure: the page's channels come with it).
 * keepBookings: keep the window's bookings (book.bookings) and each event's change of deferred revenue.
 */
export class FinanceFold {
  readonly book: LotBook;
  private readonly rows = new Map<string, FinanceRow>();
  private readonly channels = new Map<string, string>();
  private readonly deferredAt = new Map<string, Map<string, number>>();
  private deferredBefore = new Map<string, number>();
  private readonly fold: LotFold;
  /** False once the log has passed the window's end. */
  open = true;

  constructor(
    private readonly w: Window,
    opts: { keepBookings?: boolean } = {},
  ) {
    this.book = emptyLotBook({
      inWindow: (at) => inWindow(w, at),
      keep: !!opts.keepBookings,
      sink: (b) => addBooking(rowOf(this.rows, ...dayKeyOf(b)), b),
      channelOf: (id) => this.channels.get(id) ?? '',
    });
    this.fold = new LotFold(
      this.book,
      `${nextDay(w.to)}T00:00:00.000Z`,
      (d) => {
        if (d < w.from) this.deferredBefore = deferredByAccount(this.book);
        else this.deferredAt.set(d, deferredByAccount(this.book));
      },
      undefined,
      (lot, deferred, foundOn) => {
        const endedOn = dayOf(lot.expiresAt!);
        if (endedOn < foundOn && deferred !== 0) this.late.push({ accountId: lot.accountId, from: endedOn, until: foundOn, deferred });
      },
    );
  }

  /**
   * Plan lots found over only on a later day (no book event between): the days from their end to
   * that day had closed with their deferred revenue in, which their end had taken out.
   */
  private readonly late: Array<{ accountId: string; from: string; until: string; deferred: number }> = [];

  /** Folds a page; `channels`: the channel of each charge its corrections adjust. */
  add(page: ProjectedEvent[], channels: Map<string, string>): void {
    this.channels.clear();
    for (const [id, c] of channels) this.channels.set(id, c);
    for (const e of page)
      if (!this.fold.add(e)) {
        this.open = false;
        return;
      }
  }

  /** The window's books, but for the upstream cost (the caller's). */
  finish(): Omit<Folded, 'costs'> {
    this.fold.finish();
    // Days without events keep the deferred revenue of the day before.
    let last = this.deferredBefore;
    for (let d = this.w.from; d <= this.w.to; d = nextDay(d)) {
      last = new Map(this.deferredAt.get(d) ?? last);
      this.deferredAt.set(d, last);
    }
    // Dated at their end, as the read models date them.
    const dayBefore = new Date(Date.parse(`${this.w.from}T00:00:00.000Z`) - 86_400_000).toISOString().slice(0, 10);
    for (const l of this.late) {
      const at = (day: string) => (day === dayBefore ? this.deferredBefore : this.deferredAt.get(day));
      for (let d = l.from < dayBefore ? dayBefore : l.from; d < l.until; d = nextDay(d)) {
        const balances = at(d);
        if (balances?.has(l.accountId)) balances.set(l.accountId, balances.get(l.accountId)! - l.deferred);
      }
    }
    return { currency: this.fold.currency, book: this.book, deferredAt: this.deferredAt, deferredBefore: this.deferredBefore, rows: this.rows };
  }
}

/** Folds the log up to the end of `w.to` (UTC), noting deferred revenue at each day's end. */
export async function foldFinance(ledger: Ledger, w: Window, opts: { keepBookings?: boolean } = {}): Promise<Folded> {
  // The read models (the calls' channels, the costs) as of now: the log is read up to here too.
  await ledger.readYourWrites();
  const { db, schema } = ledger.readModels;
  const fold = new FinanceFold(w, opts);
  let position = 0;
  while (fold.open) {
    const page = await readLogPage(ledger, position);
    if (page.length === 0) break;
    // The channels of the charges this page's corrections adjust (only the page's are held).
    const adjusted = page.filter((e) => e.type === 'ChargeAdjusted').map((e) => (e.data as { chargeEventId: string }).chargeEventId);
    fold.add(page, adjusted.length > 0 ? await callChannels(db, schema, adjusted) : new Map());
    position = page[page.length - 1].position;
  }
  const costs = await upstreamCostBetween(db, schema, w.from, w.to, { withRates: !!opts.keepBookings });
  return { ...fold.finish(), costs };
}
