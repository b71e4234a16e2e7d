// Stripe's notices, one small handler per event type, found in one table. A type not in the table
// is acknowledged ('ignored') and kept like every notice (stripe-notices.ts), so a handler added
// later can be run over the ones that already came (stripe-replay.ts).
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { checkoutSessionCompleted } from './checkout-session-completed.ts';
import { checkoutSessionAsyncPaymentSucceeded } from './checkout-session-async-payment-succeeded.ts';
import { checkoutSessionAsyncPaymentFailed } from './checkout-session-async-payment-failed.ts';
import { invoicePaid } from './invoice-paid.ts';
import { invoicePaymentFailed } from './invoice-payment-failed.ts';
import { customerSubscriptionDeleted } from './customer-subscription-deleted.ts';
import { customerSubscriptionUpdated } from './customer-subscription-updated.ts';
import { chargeRefunded } from './charge-refunded.ts';
import { chargeDisputeCreated } from './charge-dispute-created.ts';
import { chargeDisputeClosed } from './charge-dispute-closed.ts';

export { contextFor, type Outcome, type StripeContext } from './context.ts';
export { disputeFeeKept } from './charge-dispute-closed.ts';

type Handler<T extends Stripe.Event['type']> = (event: Extract<Stripe.Event, { type: T }>, ctx: StripeContext) => Promise<Outcome>;

/** Checks that each type's handler takes that type's event. */
const table = <T extends Stripe.Event['type']>(t: { readonly [K in T]: Handler<K> }) => t;

const handlers = table({
  'checkout.session.completed': checkoutSessionCompleted,
  'checkout.session.async_payment_succeeded': checkoutSessionAsyncPaymentSucceeded,
  'checkout.session.async_payment_failed': checkoutSessionAsyncPaymentFailed,
  'invoice.paid': invoicePaid,
  'invoice.payment_failed': invoicePaymentFailed,
  'customer.subscription.deleted': customerSubscriptionDeleted,
  'customer.subscription.updated': customerSubscriptionUpdated,
  'charge.refunded': chargeRefunded,
  'charge.dispute.created': chargeDisputeCreated,
  'charge.dispute.closed': chargeDisputeClosed,
});

/** The event types Tollgate acts on. */
export type HandledType = keyof typeof handlers;

const isHandled = (type: string): type is HandledType => Object.hasOwn(handlers, type);

/** Runs the notice's handler; a type without one is 'ignored'. */
export function dispatch(event: Stripe.Event, ctx: StripeContext): Promise<Outcome> {
  if (!isHandled(event.type)) return Promise.resolve('ignored');
  // The table pairs each type with its handler; TypeScript cannot follow the pair through the lookup.
  const handler = handlers[event.type] as Handler<HandledType>;
  return handler(event as Extract<Stripe.Event, { type: HandledType }>, ctx);
}
