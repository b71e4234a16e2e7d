// Verify's check of the lots (audit.ts), folded on the replay's first thread (chain-observer.ts) or
// here: every lot sums after every event, every booking's journal entry balances.
import { InvariantViolation } from '../ledger/errors.ts';
import { emptyLotBook } from './lot-book.ts';
import type { ProjectedEvent } from '../eventstore/port.ts';
import { assertBalanced, bookingEntry } from './finance-journal.ts';
import { dayOf, LotFold, nextDay, type LotFoldState } from './lot-fold.ts';

/**
 * Verify's check of the lots over the whole log up to the end of today (UTC): the lot book asserts
 * that every lot sums as it folds, and each booking's journal entry must balance. Stops at the
 * first problem (the rest of the fold would stand on a broken book).
 */
export class LotCheck {
  private readonly fold: LotFold;
  problem: string | null = null;

  /** Starts empty, or where a check of the log's beginning stopped (with the problem it found). */
  constructor(from?: LotFoldState, problem: string | null = null) {
    this.problem = problem;
    const today = new Date().toISOString().slice(0, 10);
    const book = emptyLotBook({ inWindow: (at) => dayOf(at) <= today, keep: false, sink: (b) => assertBalanced([bookingEntry(b)]) });
    this.fold = new LotFold(book, `${nextDay(today)}T00:00:00.000Z`, undefined, from);
  }

  add(e: ProjectedEvent): void {
    if (this.problem === null) this.guard(() => this.fold.add(e));
  }

  /** The problem found, if any, once the last day is closed. */
  finish(): string | null {
    if (this.problem === null) this.guard(() => this.fold.finish());
    return this.problem;
  }

  state(): LotFoldState {
    return this.fold.state();
  }

  get currency(): string {
    return this.fold.currency;
  }

  private guard(fn: () => unknown): void {
    try {
      fn();
    } catch (err) {
      if (!(err instanceof InvariantViolation)) throw err;
      this.problem = err.message;
    }
  }
}
