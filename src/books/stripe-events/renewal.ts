// A subscription's cancellation, or its withdrawal, on the account its metadata names (idempotent
// by the subscription's id). Each of its notices carries the whole subscription as it was then, so
// on a replay only the latest notice about a subscription is run: an older one would apply a state
// that a later one already replaced (a cancellation taken back since).
import type Stripe from 'stripe';
import { ACTOR, type Outcome, type StripeContext } from './context.ts';
import { accountState } from '../../accounts/index.ts';

/** The notice types that carry a subscription's state. */
export const SUBSCRIPTION_NOTICES = ['customer.subscription.updated', 'customer.subscription.deleted'] as const;

export async function renewal(ctx: StripeContext, sub: Stripe.Subscription, change: 'at_period_end' | 'deleted' | 'resume'): Promise<Outcome> {
  const accountId = sub.metadata?.account_id;
  if (!accountId || !(await accountState(ctx.ledger, accountId).catch(() => null))?.opened) {
    ctx.log.warn({ subscription: sub.id }, 'stripe subscription names no known account: nothing recorded');
    return 'ignored';
  }
  const events = await ctx.payments.setRenewal(accountId, 'stripe', sub.id, change, ACTOR);
  if (events.length === 0) return 'already_recorded';
  return change === 'resume' ? 'resumed' : 'cancelled';
}

/** On a replay, whether a later notice about this subscription supersedes this one (logged). */
export async function superseded(ctx: StripeContext, sub: Stripe.Subscription): Promise<boolean> {
  const later = ctx.supersededBy ? await ctx.supersededBy(SUBSCRIPTION_NOTICES) : null;
  if (later) ctx.log.info({ subscription: sub.id, later }, 'stripe replay: a later notice about this subscription supersedes this one');
  return later !== null;
}
