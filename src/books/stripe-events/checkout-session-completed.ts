// checkout.session.completed: the customer finished Checkout. Paid by card, the purchase is
// booked now; by an asynchronous method (a bank debit) the session completes unpaid and its own
// notice (checkout.session.async_payment_succeeded or _failed) follows. In setup mode nothing was
// paid: the customer saved a card for auto top-up.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { paidSession } from './booking.ts';
import { savedCard } from './saved-card.ts';

export function checkoutSessionCompleted(event: Stripe.CheckoutSessionCompletedEvent, ctx: StripeContext): Promise<Outcome> {
  const session = event.data.object;
  if (session.mode === 'setup') return savedCard(ctx, session);
  return session.payment_status === 'unpaid' ? Promise.resolve('waiting') : paidSession(ctx, session);
}
