// charge.dispute.created: the customer's bank disputes a charge; the account's keys are suspended
// until it closes (unless TOLLGATE_DISPUTE_SUSPENDS_KEYS=off). Once per dispute id.
import type Stripe from 'stripe';
import { ACTOR, idOf, type Outcome, type StripeContext } from './context.ts';
import { paymentOfIntent } from './booking.ts';

export async function chargeDisputeCreated(event: Stripe.ChargeDisputeCreatedEvent, ctx: StripeContext): Promise<Outcome> {
  const dispute = event.data.object;
  const found = await paymentOfIntent(ctx, idOf(dispute.payment_intent));
  if (!found) return 'ignored';
  await ctx.payments.openDispute(found.accountId, found.paymentId, dispute.id, dispute.amount, ctx.disputeSuspendsKeys, ACTOR);
  return 'disputed';
}
