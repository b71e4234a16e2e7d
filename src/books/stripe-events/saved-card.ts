// A Checkout Session in setup mode completed: the customer saved a card for auto top-up. Its
// SetupIntent names the card (a PaymentMethod of the session's Customer); only the processor's ids
// and the card's brand and last four digits are kept, on the account the session names.
import type Stripe from 'stripe';
import { accountCommand } from '../../accounts/index.ts';
import { metadataFor } from '../../ledger/ledger.ts';
import { ACTOR, idOf, type Outcome, type StripeContext } from './context.ts';

export async function savedCard(ctx: StripeContext, session: Stripe.Checkout.Session): Promise<Outcome> {
  const accountId = session.metadata?.account_id;
  const setupIntentId = idOf(session.setup_intent);
  const customerId = idOf(session.customer);
  if (!accountId || !setupIntentId || !customerId) return 'ignored';
  const setup = await ctx.stripe.setupIntents.retrieve(setupIntentId, { expand: ['payment_method'] });
  const method = setup.payment_method;
  if (setup.status !== 'succeeded' || !method) return 'waiting';
  const card = typeof method === 'object' ? method.card : null;
  const res = await accountCommand(
    ctx.ledger,
    accountId,
    {
      type: 'SavePaymentMethod',
      card: {
        processor: 'stripe',
        customerId,
        paymentMethodId: idOf(method)!,
        brand: card?.brand?.slice(0, 30) ?? null,
        last4: card?.last4 && /^[0-9]{4}$/.test(card.last4) ? card.last4 : null,
      },
    },
    metadataFor(ACTOR),
  );
  return res.events.length > 0 ? 'recorded' : 'already_recorded';
}
