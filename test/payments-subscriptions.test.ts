// Recurring plans through Stripe, end to end over real HTTP: Checkout in subscription mode (a Stripe
// Price per plan period, looked up or created through the official client against the local
// double), the first period and two renewals by invoice.paid (one renewal replayed, to two gateways
// at once on PostgreSQL; one overtaken by the next), a failed renewal that grants nothing, a
// cancellation recorded as an event (asked, taken back, asked again, ended), a refund of a renewal, every amount exact to the cent, and the same figures after a
// rebuild from zero.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { eventsIn, subscriptionOf } from './support/money.ts';
import type { TestGateway } from './support/gateway.ts';
import { call } from './support/http.ts';
import { startStripeDouble, startStripeGateways, type StripeDouble } from './support/stripe-double.ts';
import { streams, type DomainEvent } from '../src/ledger/events.ts';
import { accountDecider } from '../src/accounts/account-decider.ts';
import { fold } from '../src/ledger/decider.ts';
import { paymentsInOrder } from '../src/accounts/payment-bodies.ts';
import { recurringLookupKey } from '../src/books/stripe-subscriptions.ts';

const ADMIN = 'tg_admin_subscriptions_test_token_0123456789';
const accountId = 'acct_recurring';
let stripe: StripeDouble;
let gw: TestGateway;
let gw2: TestGateway | null = null;
let stopAll: () => Promise<void>;
let key: string;
let subscriptionId: string;
const invoiceIds: string[] = [];

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

async function deliver(type: string, object: Record<string, unknown>, to: TestGateway = gw, previous?: Record<string, unknown>) {
  const { body, signature } = stripe.signed(stripe.event(type, object, previous));
  const r = await call(to, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
  assert.is(r.status, 200, r.text);
  return r.json.outcome as string;
}

const ofType = async (type: string) => (await gw.ledger.events.readStream(streams.account(accountId))).filter((e) => e.type === type);

test.before(async () => {
  stripe = await startStripeDouble();
  ({ gw, gw2, stopAll } = await startStripeGateways(stripe, ADMIN));
  assert.is((await admin('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] })).status, 201);
  assert.is((await admin('/plans/pro/price', { amount: 2000 }, 'PUT')).status, 200);
  assert.is((await admin('/plans', { plan_id: 'decade', name: 'Decade', quota: 10, validity_days: 3650, requests_per_minute: 10, models: ['*'] })).status, 201);
  assert.is((await admin('/plans/decade/price', { amount: 100 }, 'PUT')).status, 200);
  assert.is((await admin('/accounts', { account_id: accountId, name: 'Subscriber' })).status, 201);
  key = (await admin(`/accounts/${accountId}/keys`, { name: 'app' })).json.key;
  await gw.ledger.caughtUp();
});
test.after(() => stopAll());

test('Checkout for a plan is a subscription at a Stripe Price per period, created once and then looked up', async () => {
  const first = await call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'pro' } });
  assert.is(first.status, 201, first.text);
  assert.equal([first.json.mode, first.json.amount, first.json.currency], ['subscription', 2000, 'USD']);
  const second = await call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'pro' } });
  assert.is(second.status, 201, second.text);
  // One recurring Price: $20.00 every 30 days, named by its lookup key; the second checkout found it.
  const prices = [...stripe.prices.values()];
  assert.equal(
    prices.map((p) => [p.lookupKey, p.unitAmount, p.currency, p.intervalCount, p.metadata.plan_id]),
    [[recurringLookupKey('pro', { amount: 2000, currency: 'USD' }, 30), 2000, 'usd', 30, 'pro']],
  );
  assert.is(stripe.requests.filter((r) => r === 'POST /v1/prices').length, 1);
  assert.is(stripe.requests.filter((r) => r === 'GET /v1/prices').length, 2);

  // The customer pays the first session; its first invoice's notice overtakes the session's.
  const session = stripe.pay(first.json.id);
  subscriptionId = session.subscription as string;
  invoiceIds.push(session.invoice as string);
  assert.is(await deliver('invoice.paid', stripe.invoice(invoiceIds[0])), 'recorded');
  assert.is(await deliver('checkout.session.completed', session), 'already_recorded');
  const paid = await ofType('PaymentReceived');
  // $20.00, the fee of its PaymentIntent's balance transaction: 2.9% + 30 cents = 88 cents.
  assert.equal(
    paid.map((e) => [e.data.processor, e.data.processorPaymentId, e.data.amount, e.data.currency, e.data.fee]),
    [['stripe', invoiceIds[0], 2000, 'USD', 88]],
  );
  // The grant is the next event of the same append.
  const started = (await gw.ledger.events.readStream(streams.account(accountId)))[paid[0].revision + 1];
  assert.equal([started.type, started.data.paymentId, started.data.quota], ['SubscriptionStarted', paid[0].data.paymentId, 1000]);
});

test('a plan longer than Stripe can renew, or a recurring flag that is not a boolean: 400, nothing created', async () => {
  const before = [stripe.prices.size, stripe.sessions.size];
  const long = await call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'decade' } });
  assert.is(long.status, 400, long.text);
  assert.is(long.json.error.param, 'plan_id');
  const flag = await call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'pro', recurring: 'yes' } });
  assert.is(flag.status, 400, flag.text);
  assert.is(flag.json.error.param, 'recurring');
  assert.equal([stripe.prices.size, stripe.sessions.size], before);
});

test('a renewal replayed (to two gateways at once on PostgreSQL) renews once', async () => {
  const renewal = stripe.renew(subscriptionId);
  invoiceIds.push(renewal.id as string);
  const targets = [gw, gw2 ?? gw, gw, gw2 ?? gw];
  const outcomes = await Promise.all(targets.map((t) => deliver('invoice.paid', renewal, t)));
  assert.is(outcomes.filter((o) => o === 'recorded').length, 1, outcomes.join());
  assert.ok(
    outcomes.every((o) => o === 'recorded' || o === 'already_recorded'),
    outcomes.join(),
  );
  const renewed = await ofType('SubscriptionRenewed');
  assert.is(renewed.length, 1);
  const paid = await ofType('PaymentReceived');
  assert.equal([paid.length, paid[1].data.processorPaymentId, renewed[0].data.paymentId], [2, invoiceIds[1], paid[1].data.paymentId]);
});

test('a renewal overtaken by the next: the earlier period is recorded first, read back from Stripe', async () => {
  const earlier = stripe.renew(subscriptionId);
  const later = stripe.renew(subscriptionId);
  invoiceIds.push(earlier.id as string, later.id as string);
  assert.is(await deliver('invoice.paid', later), 'recorded');
  assert.is(await deliver('invoice.paid', earlier), 'already_recorded');
  assert.is(await deliver('invoice.paid', later), 'already_recorded');
  const paid = await ofType('PaymentReceived');
  const renewed = await ofType('SubscriptionRenewed');
  // In period order: each renewal starts at the start of the period its invoice paid for.
  assert.equal(
    paid.map((e) => e.data.processorPaymentId),
    invoiceIds,
  );
  assert.equal(
    renewed.map((e) => Date.parse(e.data.startsAt as string) / 1000),
    invoiceIds.slice(1).map((id) => (stripe.invoice(id).lines as { data: Array<{ period: { start: number } }> }).data[0].period.start),
  );
  // Money exact: four periods at $20.00, four fees of 88 cents; the current period is a fresh 1000 tokens.
  assert.equal([paid.reduce((s, e) => s + (e.data.amount as number), 0), paid.reduce((s, e) => s + (e.data.fee as number), 0)], [8000, 352]);
  const sub = await subscriptionOf(gw, key);
  assert.equal([sub.quota.total, sub.quota.used], [1000, 0]);
});

test("every period paid, each renewal's included, has exactly one invoice for what it paid (issued by whichever gateway recorded it)", async () => {
  const paid = await ofType('PaymentReceived');
  let invoices: Array<{ object: string; payment_id: string; total: number }> = [];
  for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
    const listed = await admin(`/invoices?account_id=${accountId}`);
    assert.is(listed.status, 200, listed.text);
    invoices = listed.json.data;
    if (invoices.length >= paid.length) break;
  }
  assert.equal(invoices.map((d) => [d.object, d.payment_id, d.total]).sort(), paid.map((e) => ['invoice', e.data.paymentId, e.data.amount]).sort());
});

test('a failed renewal grants nothing and writes nothing; the paid period runs on', async () => {
  const streamsTouched = [streams.account(accountId), streams.unmatchedPayments()];
  const before = await eventsIn(gw.ledger.events, streamsTouched);
  const subBefore = await subscriptionOf(gw, key);
  assert.is(await deliver('invoice.payment_failed', stripe.renew(subscriptionId, { paid: false })), 'failed');
  assert.is(await eventsIn(gw.ledger.events, streamsTouched), before);
  const subAfter = await subscriptionOf(gw, key);
  assert.equal([subAfter.quota, subAfter.expires_at, subAfter.status], [subBefore.quota, subBefore.expires_at, subBefore.status]);
});

test('a cancellation is an event with its actor: the plan stops renewing and ends with its paid period, in every read', async () => {
  const subBefore = await subscriptionOf(gw, key);
  assert.is(subBefore.cancellation, null);
  // The customer asks to stop at the period's end; the notice reaches two gateways at once (on PostgreSQL).
  const asked = stripe.cancelAtPeriodEnd(subscriptionId);
  const outcomes = await Promise.all([gw, gw2 ?? gw].map((t) => deliver('customer.subscription.updated', asked.object, t, asked.previous)));
  assert.equal(outcomes.sort(), ['already_recorded', 'cancelled']);
  const [cancelled] = await ofType('SubscriptionCancelled');
  assert.equal(
    [
      cancelled.metadata.actor,
      cancelled.data.processor,
      cancelled.data.processorSubscriptionId,
      cancelled.data.planId,
      cancelled.data.kind,
      cancelled.data.endsAt,
    ],
    ['stripe:webhook', 'stripe', subscriptionId, 'pro', 'at_period_end', subBefore.expires_at],
  );
  const sub = await subscriptionOf(gw, key);
  // Nothing of the paid period changes: it runs to its expiry, where the plan ends.
  assert.equal([sub.status, sub.quota, sub.expires_at], ['active', subBefore.quota, subBefore.expires_at]);
  assert.equal([sub.cancellation.kind, sub.cancellation.subscription_id, sub.cancellation.ends_at], ['at_period_end', subscriptionId, sub.expires_at]);
  assert.equal((await admin(`/accounts/${accountId}/payments`)).json.cancellation, sub.cancellation);

  // Taken back before the end: it renews again. Asked again, then Stripe ends it: that deletion is the same cancellation.
  const undone = stripe.cancelAtPeriodEnd(subscriptionId, false);
  assert.is(await deliver('customer.subscription.updated', undone.object, gw, undone.previous), 'resumed');
  assert.is((await subscriptionOf(gw, key)).cancellation, null);
  const again = stripe.cancelAtPeriodEnd(subscriptionId);
  assert.is(await deliver('customer.subscription.updated', again.object, gw, again.previous), 'cancelled');
  assert.is(await deliver('customer.subscription.deleted', stripe.cancel(subscriptionId)), 'already_recorded');
  // A later update while it stays cancelled records nothing.
  assert.is(await deliver('customer.subscription.updated', stripe.cancelAtPeriodEnd(subscriptionId).object, gw, { metadata: {} }), 'already_recorded');
  assert.equal(
    (await ofType('SubscriptionCancelled')).map((e) => e.data.kind),
    ['at_period_end', 'at_period_end'],
  );
  assert.is((await ofType('SubscriptionResumed')).length, 1);
  const after = await subscriptionOf(gw, key);
  assert.equal(
    [after.status, after.quota, after.expires_at, after.cancellation.ends_at],
    ['active', subBefore.quota, subBefore.expires_at, subBefore.expires_at],
  );
});

test("a renewal refunded through Stripe: found by its invoice, the period's unused tokens withdrawn", async () => {
  const last = invoiceIds.at(-1)!;
  assert.is(await deliver('charge.refunded', stripe.refund(stripe.intentOfInvoice(last), 500)), 'refunded');
  const [refund] = await ofType('PaymentRefunded');
  // $5.00 of $20.00 bought 250 of the period's 1000 tokens, none used: all withdrawn, all from deferred revenue.
  assert.equal([refund.data.amount, refund.data.tokensWithdrawn, refund.data.fromDeferred, refund.data.refundedRevenue], [500, 250, 500, 0]);
  assert.is((await subscriptionOf(gw, key)).quota.total, 750);
});

test('a rebuild from zero gives the same figures', async () => {
  const subBefore = await subscriptionOf(gw, key);
  const paymentsBefore = (await call(gw, '/v1/payments', { key })).json;
  assert.equal(
    paymentsBefore.data.map((p: any) => [p.amount, p.fee, p.refunded]),
    [
      [2000, 88, 0],
      [2000, 88, 0],
      [2000, 88, 0],
      [2000, 88, 500],
    ],
  );
  const rebuild = await admin('/rebuild', {});
  assert.ok(rebuild.text.includes('"type":"done"'), rebuild.text);
  const subAfter = await subscriptionOf(gw, key);
  assert.equal([subAfter.quota, subAfter.expires_at, subAfter.cancellation], [subBefore.quota, subBefore.expires_at, subBefore.cancellation]);
  assert.ok(subAfter.cancellation);
  const s = fold(
    accountDecider,
    (await gw.ledger.events.readStream(streams.account(accountId))).map((e) => ({ type: e.type, data: e.data }) as DomainEvent),
  );
  assert.equal(
    paymentsInOrder(s.payments.values()).map((p) => [p.paymentId, p.amount, p.fee, p.refunded, p.tokensWithdrawn]),
    paymentsBefore.data.map((p: any) => [p.id, p.amount, p.fee, p.refunded, p.tokens_withdrawn]),
  );
  assert.equal((await call(gw, '/v1/payments', { key })).json, paymentsBefore);
});

test.run();
