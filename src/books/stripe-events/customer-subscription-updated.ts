// customer.subscription.updated: only the cancellation flag matters here. Set, the plan ends with
// its paid period; cleared (it was set before), it renews again; any other change is ignored.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { renewal, superseded } from './renewal.ts';

export async function customerSubscriptionUpdated(event: Stripe.CustomerSubscriptionUpdatedEvent, ctx: StripeContext): Promise<Outcome> {
  const sub = event.data.object;
  if (await superseded(ctx, sub)) return 'superseded';
  const before = event.data.previous_attributes as { cancel_at_period_end?: boolean } | undefined;
  if (sub.cancel_at_period_end) return renewal(ctx, sub, 'at_period_end');
  return before?.cancel_at_period_end === true ? renewal(ctx, sub, 'resume') : 'ignored';
}
