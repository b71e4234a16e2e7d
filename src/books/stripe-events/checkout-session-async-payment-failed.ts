// checkout.session.async_payment_failed: an asynchronous payment did not come through; nothing is granted.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';

export async function checkoutSessionAsyncPaymentFailed(event: Stripe.CheckoutSessionAsyncPaymentFailedEvent, ctx: StripeContext): Promise<Outcome> {
  ctx.log.info({ session: event.data.object.id }, 'stripe asynchronous payment failed: nothing granted');
  return 'failed';
}
