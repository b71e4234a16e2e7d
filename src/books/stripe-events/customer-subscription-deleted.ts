// customer.subscription.deleted: Stripe ended the subscription, no more renewals. The period already
// paid for stays until its expiry (its tokens were bought).
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { renewal, superseded } from './renewal.ts';

export async function customerSubscriptionDeleted(event: Stripe.CustomerSubscriptionDeletedEvent, ctx: StripeContext): Promise<Outcome> {
  if (await superseded(ctx, event.data.object)) return 'superseded';
  return renewal(ctx, event.data.object, 'deleted');
}
