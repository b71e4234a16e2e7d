// The lot book folded over the log an event at a time, closing each UTC day as the log passes into
// the next: what the finance reports fold (finance.ts) and what verify checks (lot-check.ts).
import { DEFAULT_CURRENCY } from '../money/money.ts';
import { applyOwn, BOOK_EVENT_TYPES, dueLot, expireAccount, type Lot, type LotBook } from './lot-book.ts';
import type { ProjectedEvent } from '../eventstore/port.ts';

export const dayOf = (iso: string): string => iso.slice(0, 10);
export const nextDay = (day: string): string => new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);

/** Where a fold stands, to go on with elsewhere (structured-cloneable: it crosses from a thread). */
export interface LotFoldState {
  lots: LotBook['lots'];
  accounts: LotBook['accounts'];
  currency: string;
  day: string | null;
}

/** Events that neither start, renew nor end a plan lot (a charge draws on lots; it ends none). */
const KEEPS_PLAN_LOTS = new Set(['ChatCharged', 'ImageCharged', 'QuotaReserved', 'ReservationReleased']);

/** Plan lots by when they end, then by account. */
export const byEnd = (x: { expiresAt: string | null; accountId: string }, y: { expiresAt: string | null; accountId: string }): number =>
  x.expiresAt! < y.expiresAt! ? -1 : x.expiresAt! > y.expiresAt! ? 1 : x.accountId < y.accountId ? -1 : x.accountId > y.accountId ? 1 : 0;

export class LotFold {
  currency: string = DEFAULT_CURRENCY;
  /** The UTC day of the last event folded. */
  day: string | null = null;
  /** earliestPlanEnd's answer until an event may have changed it (undefined: to work out). */
  private planEnd: string | null | undefined = undefined;

  /**
   * Folds events before `end` (an ISO time); `onDayEnd` hears each day closed; `onEnded` hears each
   * plan lot ended, with the deferred revenue that left it and the day of the event that found it over.
   */
  constructor(
    readonly book: LotBook,
    private readonly end: string,
    private readonly onDayEnd: (day: string) => void = () => undefined,
    from?: LotFoldState,
    private readonly onEnded: (lot: Lot, deferred: number, foundOn: string) => void = () => undefined,
  ) {
    if (from) {
      book.lots = from.lots;
      book.accounts = from.accounts;
      this.currency = from.currency;
      this.day = from.day;
    }
  }

  /**
   * Folds `e`; false (and nothing folded) once the log has reached the end. Every plan lot whose
   * period is over by `e` is ended first (breakage dated at the period's end): the lot book's
   * clock is its own events, so a fold of the whole log and the books' read models (which see
   * only these events) end a lot at the same point.
   */
  add(e: ProjectedEvent): boolean {
    if (e.timestamp >= this.end) return false;
    const d = dayOf(e.timestamp);
    if (this.day !== null && d !== this.day) this.closeDay(this.day);
    this.day = d;
    if (e.type === 'SettlementCurrencySet') this.currency = (e.data as { currency: string }).currency;
    const next = BOOK_EVENT_TYPES.has(e.type) ? this.earliestPlanEnd() : null;
    if (next !== null && next <= e.timestamp) {
      // Ended in the order they ran out (the read models' order too).
      const due = [...this.book.accounts.keys()].map((id) => dueLot(this.book, id, e.timestamp)).filter((l): l is Lot => l !== null);
      for (const l of due.sort(byEnd)) {
        const deferred = l.deferred;
        expireAccount(this.book, l.accountId, e.timestamp, e);
        this.onEnded(l, deferred, d);
      }
      this.planEnd = undefined;
    }
    // The plan lots over by now were ended above, in the order they ran out.
    if (BOOK_EVENT_TYPES.has(e.type)) applyOwn(this.book, e, this.currency);
    if (!KEEPS_PLAN_LOTS.has(e.type)) this.planEnd = undefined;
    return true;
  }

  /**
   * When the first live plan lot ends (null: none will): a charge looks every account's plan lot
   * over only once one is due, not at every event (that made the fold's cost grow with accounts).
   */
  private earliestPlanEnd(): string | null {
    if (this.planEnd === undefined) {
      let first: string | null = null;
      for (const a of this.book.accounts.values()) {
        const l = a.plan ? this.book.lots.get(a.plan) : undefined;
        if (l && !l.ended && l.expiresAt !== null && (first === null || l.expiresAt < first)) first = l.expiresAt;
      }
      this.planEnd = first;
    }
    return this.planEnd;
  }

  /** Closes the last day folded. */
  finish(): void {
    if (this.day !== null) this.closeDay(this.day);
  }

  state(): LotFoldState {
    return { lots: this.book.lots, accounts: this.book.accounts, currency: this.currency, day: this.day };
  }

  // Lots end as the book's own events pass their end (add), not as days close.
  private closeDay(d: string): void {
    this.onDayEnd(d);
  }
}
