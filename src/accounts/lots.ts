// What an account remembers of each payment (a paid lot): enough to make a payment, a refund and a
// dispute idempotent by the processor's ids, and to know what a refund may withdraw.
import type { PaymentFacts } from '../ledger/events.ts';

export interface PaidLot extends PaymentFacts {
  paymentId: string;
  receivedAt: string;
  reference: string | null;
  /** What the payment bought, as the grant appended with it. */
  kind: 'plan' | 'pack';
  itemId: string;
  tokens: number;
  /** The plan period it bought (startsAt of its grant); null for a pack. */
  periodStartsAt: string | null;
  /** Money given back so far, the refunds (by the processor's refund id) and the tokens they withdrew. */
  refunded: number;
  refundIds: string[];
  tokensWithdrawn: number;
  /** The tax the amount held (0: untaxed) and how much of it refunds gave back. */
  tax: number;
  taxRefunded: number;
  /**
   * A pack's place in the extra pool: the extra tokens granted before it, net of withdrawals.
   * Extra tokens are used oldest first, so its unused tokens are what the pool's use has not
   * reached yet (absent on lots recorded before it was kept: the whole pool then).
   */
  extraStart?: number;
  /** A payment made in another currency: as made, the rate it was booked at, and what refunds gave back in it. */
  fx?: PaidInCurrency;
  /** A pack's place in the account's grants of extra tokens: its lot of credit, if its grant had terms (src/accounts/credits.ts). */
  credit?: number;
}

/**
 * The money rule for the extra pool, the one definition the decider's refunds and the lot book
 * share: the pool is used oldest first, so of a lot holding `own` tokens from `start` on (the
 * pool's tokens before it), the pool's use `poolUsed` has reached this many.
 */
export const poolShare = (start: number, own: number, poolUsed: number): number => Math.max(0, Math.min(own, poolUsed - start));

export interface PaidInCurrency {
  currency: string;
  amount: number;
  tax: number;
  rate: string;
  day: string;
  source: string;
  refunded: number;
  taxRefunded: number;
}

/** What a payment was made as: in its own currency when it came in another than the settlement currency. */
export const paidAs = (lot: PaidLot): { amount: number; refunded: number; currency: string } =>
  lot.fx
    ? { amount: lot.fx.amount, refunded: lot.fx.refunded, currency: lot.fx.currency }
    : { amount: lot.amount, refunded: lot.refunded, currency: lot.currency };

/** A dispute as the account knows it: open (outcome null) or closed; kept once closed, so a replayed notice opens nothing. */
export interface DisputeRecord {
  paymentId: string;
  amount: number;
  suspendsKeys: boolean;
  outcome: 'won' | 'lost' | null;
}
