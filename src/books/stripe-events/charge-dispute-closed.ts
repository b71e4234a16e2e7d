// charge.dispute.closed: won or lost, with the fee Stripe kept; a lost dispute also refunds the
// disputed amount. Once per dispute id.
import type Stripe from 'stripe';
import { ACTOR, idOf, type Outcome, type StripeContext } from './context.ts';
import { paymentOfIntent } from './booking.ts';

/**
 * The dispute fee Stripe kept, as its balance transactions book it: the withdrawal carries the fee
 * (positive), and the reinstatement of a won dispute gives it back as a negative fee where Stripe
 * returns it (0 where it keeps it). So the sum of the fees, never below zero; never each fee alone.
 */
export function disputeFeeKept(balanceTransactions: ReadonlyArray<{ fee: number }>): number {
  const net = balanceTransactions.reduce((sum, bt) => sum + bt.fee, 0);
  return Math.max(0, net);
}

export async function chargeDisputeClosed(event: Stripe.ChargeDisputeClosedEvent, ctx: StripeContext): Promise<Outcome> {
  const dispute = event.data.object;
  const found = await paymentOfIntent(ctx, idOf(dispute.payment_intent));
  if (!found) return 'ignored';
  const fee = disputeFeeKept(dispute.balance_transactions ?? []);
  await ctx.payments.closeDispute(found.accountId, dispute.id, dispute.status === 'lost' ? 'lost' : 'won', fee, ACTOR);
  return 'dispute_closed';
}
