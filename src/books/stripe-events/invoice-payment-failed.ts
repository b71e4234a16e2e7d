// invoice.payment_failed: a renewal's charge failed. Nothing is granted: the paid period runs out at
// its expiry, and Stripe retries; a later invoice.paid renews.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';

export async function invoicePaymentFailed(event: Stripe.InvoicePaymentFailedEvent, ctx: StripeContext): Promise<Outcome> {
  ctx.log.info({ invoice: event.data.object.id, attempts: event.data.object.attempt_count }, 'stripe renewal payment failed: nothing granted');
  return 'failed';
}
