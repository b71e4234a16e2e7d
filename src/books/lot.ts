// A lot (a grant's tokens and the money paid for them), the movements of money booked on it, and
// its invariant. The lot book (lot-book.ts) folds the log into these.
import { InvariantViolation } from '../ledger/errors.ts';
import type { Rate } from '../money/money.ts';

export type LotSource = 'payment' | 'code' | 'free' | 'returned';

export interface Lot {
  lotId: string;
  accountId: string;
  source: LotSource;
  paymentId: string | null;
  pool: 'main' | 'extra';
  currency: string;
  tokens: number;
  /** Money paid for the lot less the tax it held (0 for a free lot); `carriedIn`: value of returned tokens it holds. */
  paid: number;
  carriedIn: number;
  used: number;
  withdrawn: number;
  /** The value rate of the lot's tokens (paid per tokens; a returned lot: its origin's rate). */
  rate: Rate;
  /** Rounded cumulative value of the tokens used so far (the series bookedAmount runs on). */
  valueUsed: number;
  recognised: number;
  breakage: number;
  refunded: number;
  carriedOut: number;
  deferred: number;
  /** When it was granted (a correction of a charge made in a plan period finds that period's lot). */
  grantedAt: string;
  /** A plan lot: its period's end; an extra lot: when its credit expires (null: never). */
  expiresAt: string | null;
  ended: boolean;
  /** An extra lot whose grant had terms (src/accounts/credits.ts): drawn by the charges' recorded splits, not in the pool. */
  termed?: boolean;
}

export type BookingKind = 'payment' | 'use' | 'breakage' | 'refund' | 'dispute' | 'dispute_fee' | 'fx';

/** One movement of money, booked to the journal and the reports. */
export interface Booking {
  at: string;
  eventId: string;
  accountId: string;
  lotId: string | null;
  kind: BookingKind;
  currency: string;
  model: string;
  channel: string;
  /** payment: the amount (tax included), its fee and its tax; use: revenue (negative: moved back to
   * deferred); breakage; refund/dispute: the money given back, split into its tax, its deferred and
   * its revenue part; fx: the FX gain (negative: loss) of a refund in another currency, booked at
   * its payment's rate while the money went back at the day's. */
  amount: number;
  fee: number;
  fromDeferred: number;
  refundedRevenue: number;
  tax: number;
  /** Promotional tokens used (uses of free lots). */
  promotionalTokens: number;
}

/** recognised + breakage + refunded + carried out + deferred = paid + carried in, and no part below zero. */
export function assertLot(l: Lot): void {
  const parts = l.recognised + l.breakage + l.refunded + l.carriedOut + l.deferred;
  if (parts !== l.paid + l.carriedIn)
    throw new InvariantViolation(
      `lot ${l.lotId}: recognised ${l.recognised} + breakage ${l.breakage} + refunded ${l.refunded} + carried out ${l.carriedOut} + deferred ${l.deferred} != paid ${l.paid} + carried in ${l.carriedIn}`,
    );
  if (l.deferred < 0 || l.used < 0 || l.used + l.withdrawn > l.tokens)
    throw new InvariantViolation(`lot ${l.lotId}: deferred ${l.deferred}, used ${l.used} + withdrawn ${l.withdrawn} of ${l.tokens}`);
}
