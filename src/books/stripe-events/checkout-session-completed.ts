// checkout.session.completed: the customer finished Checkout. Paid by card, the purchase is
// booked now; by an asynchronous method (a bank debit) the session completes unpaid and its own
// notice (checkout.session.async_payment_succeeded or _failed) follows.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { paidSession } from './booking.ts';

export const checkoutSessionCompleted = (event: Stripe.CheckoutSessionCompletedEvent, ctx: StripeContext): Promise<Outcome> =>
  event.data.object.payment_status === 'unpaid' ? Promise.resolve('waiting') : paidSession(ctx, event.data.object);
