// charge.refunded: money given back on a charge. Its amount_refunded is the running total, so the
// refund booked is that total less what is booked already, and its id is the total: the same notice
// again is the same refund.
import type Stripe from 'stripe';
import { ACTOR, idOf, type Outcome, type StripeContext } from './context.ts';
import { paymentOfIntent } from './booking.ts';
import { paidAs } from '../../accounts/index.ts';

export async function chargeRefunded(event: Stripe.ChargeRefundedEvent, ctx: StripeContext): Promise<Outcome> {
  const charge = event.data.object;
  const found = await paymentOfIntent(ctx, idOf(charge.payment_intent));
  if (!found) return 'ignored';
  const lot = await ctx.payments.lotOf(found.accountId, found.paymentId);
  // Stripe counts in the charge's currency: the payment's own (paidAs), which a refund is given in.
  const amount = charge.amount_refunded - paidAs(lot).refunded;
  if (amount <= 0) return 'already_recorded';
  await ctx.payments.refund(found.accountId, found.paymentId, amount, `${charge.id}:${charge.amount_refunded}`, ACTOR);
  return 'refunded';
}
