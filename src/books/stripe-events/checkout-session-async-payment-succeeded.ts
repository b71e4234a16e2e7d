// checkout.session.async_payment_succeeded: an asynchronous payment (a bank debit) came through.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { paidSession } from './booking.ts';

export const checkoutSessionAsyncPaymentSucceeded = (event: Stripe.CheckoutSessionAsyncPaymentSucceededEvent, ctx: StripeContext): Promise<Outcome> =>
  paidSession(ctx, event.data.object);
