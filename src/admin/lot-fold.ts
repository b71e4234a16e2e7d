// The lot book folded over the log an event at a time, closing each UTC day as the log passes into
// the next: what the finance reports fold (finance.ts) and what verify checks (lot-check.ts).
import { DEFAULT_CURRENCY } from '../money/money.ts';
import { applyEvent, expireLots, type LotBook } from '../money/lot-book.ts';
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

export class LotFold {
  currency: string = DEFAULT_CURRENCY;
  /** The UTC day of the last event folded. */
  day: string | null = null;

  /** Folds events before `end` (an ISO time); `onDayEnd` hears each day closed, after its lots expired. */
  constructor(
    readonly book: LotBook,
    private readonly end: string,
    private readonly onDayEnd: (day: string) => void = () => undefined,
    from?: LotFoldState,
  ) {
    if (from) {
      book.lots = from.lots;
      book.accounts = from.accounts;
      this.currency = from.currency;
      this.day = from.day;
    }
  }

  /** Folds `e`; false (and nothing folded) once the log has reached the end. */
  add(e: ProjectedEvent): boolean {
    if (e.timestamp >= this.end) return false;
    const d = dayOf(e.timestamp);
    if (this.day !== null && d !== this.day) this.closeDay(this.day);
    this.day = d;
    if (e.type === 'SettlementCurrencySet') this.currency = (e.data as { currency: string }).currency;
    applyEvent(this.book, e, this.currency);
    return true;
  }

  /** Closes the last day folded. */
  finish(): void {
    if (this.day !== null) this.closeDay(this.day);
  }

  state(): LotFoldState {
    return { lots: this.book.lots, accounts: this.book.accounts, currency: this.currency, day: this.day };
  }

  private closeDay(d: string): void {
    const at = `${nextDay(d)}T00:00:00.000Z`;
    expireLots(this.book, at, { id: `day:${d}`, type: 'DayEnded', position: 0, timestamp: at, data: {} });
    this.onDayEnd(d);
  }
}
