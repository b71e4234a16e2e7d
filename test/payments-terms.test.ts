// The terms of a purchase over real HTTP, on PGlite and PostgreSQL: a price applies from the moment it
// is set, and a purchase keeps the price it was bought at (a Checkout Session opened before a price
// change is paid at the old price); a code can pay for a plan period, and an expired code answers
// like a wrong one; an operator's dispute that does not suspend the keys leaves them working; a Stripe
// payment in another currency or for an unknown pack is kept unmatched.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { adminApi, deliverStripe, subscriptionOf } from './support/money.ts';
import { startStripeDouble, startStripeGateways, type StripeDouble } from './support/stripe-double.ts';
import { streams } from '../src/ledger/events.ts';

const ADMIN = 'tg_admin_payment_terms_test_token_0123456789';
const accountId = 'acct_terms';
let stripe: StripeDouble;
let gw: TestGateway;
let stopAll: () => Promise<void>;
let key: string;

const admin = (path: string, body?: unknown, method?: string) => adminApi(gw, ADMIN)(path, body, method);
const deliver = (type: string, object: Record<string, unknown>) => deliverStripe(gw, stripe, type, object);

test.before(async () => {
  stripe = await startStripeDouble();
  ({ gw, stopAll } = await startStripeGateways(stripe, ADMIN));
  assert.is((await admin('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] })).status, 201);
  assert.is((await admin('/plans/pro/price', { amount: 2000 }, 'PUT')).status, 200);
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  assert.is((await admin('/accounts', { account_id: accountId, name: 'Terms customer' })).status, 201);
  key = (await admin(`/accounts/${accountId}/keys`, { name: 'app' })).json.key;
  await gw.ledger.caughtUp();
});
test.after(() => stopAll());

test('a price applies from then on; a purchase keeps the price it was bought at', async () => {
  const before = await call(gw, '/v1/checkout/sessions', { key, body: { pack_id: 'p300' } });
  assert.equal([before.status, before.json.amount], [201, 300], before.text);
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 450 }, 'PUT')).status, 200);
  const after = await call(gw, '/v1/checkout/sessions', { key, body: { pack_id: 'p300' } });
  assert.equal([after.status, after.json.amount], [201, 450], after.text);
  // The customer pays the session opened before the change: at its price, $3.00.
  assert.is(await deliver('checkout.session.completed', stripe.pay(before.json.id)), 'recorded');
  const payments = (await call(gw, '/v1/payments', { key })).json.data;
  assert.equal(
    payments.map((p: any) => [p.processor, p.amount, p.display, p.item.tokens]),
    [['stripe', 300, '3.00', 300]],
  );
  const prices = await call(gw, '/v1/prices', { key });
  assert.equal(
    prices.json.packs.map((p: any) => [p.pack_id, p.amount, p.display]),
    [['p300', 450, '4.50']],
  );
  // Each price is an event with its actor, in order.
  const priced = (await gw.ledger.events.readStream(streams.priceList())).filter((e) => e.type === 'TokenPackPriced');
  assert.equal(
    priced.map((e) => [e.data.amount, e.metadata.actor]),
    [
      [300, 'admin:operator'],
      [450, 'admin:operator'],
    ],
  );
});

test('a code pays for a plan period; an expired code answers like a wrong one', async () => {
  const plan = await admin('/code-batches', { count: 1, plan_id: 'pro', amount: 1500 });
  assert.is(plan.status, 201, plan.text);
  const redeemed = await call(gw, '/v1/redemptions', { key, body: { code: plan.json.codes[0] } });
  assert.is(redeemed.status, 201, redeemed.text);
  assert.equal(
    [redeemed.json.payment.processor, redeemed.json.payment.amount, redeemed.json.payment.item],
    ['code', 1500, { kind: 'plan', plan_id: 'pro', tokens: 1000 }],
  );
  const events = await gw.ledger.events.readStream(streams.account(accountId));
  const paid = events.find((e) => e.type === 'PaymentReceived' && e.data.paymentId === redeemed.json.payment.id)!;
  assert.equal([events[paid.revision + 1].type, events[paid.revision + 1].data.paymentId], ['SubscriptionStarted', redeemed.json.payment.id]);
  const sub = await subscriptionOf(gw, key);
  assert.equal([sub.plan.id, sub.quota.total], ['pro', 1000]);

  const expiresAt = new Date(Date.now() + 1500);
  const soon = await admin('/code-batches', { count: 2, pack_id: 'p300', amount: 250, expires_at: expiresAt.toISOString() });
  assert.is(soon.status, 201, soon.text);
  while (Date.now() <= expiresAt.getTime() + 50) await new Promise((r) => setTimeout(r, 100));
  const expired = await call(gw, '/v1/redemptions', { key, body: { code: soon.json.codes[0] } });
  const other = soon.json.codes[1] as string;
  const wrong = await call(gw, '/v1/redemptions', { key, body: { code: other.slice(0, -1) + (other.endsWith('a') ? 'b' : 'a') } });
  assert.is(expired.status, 400, expired.text);
  assert.equal(expired.json, wrong.json);
  assert.is(expired.json.error.code, 'invalid_code');
  assert.is((await subscriptionOf(gw, key)).extra_tokens.granted, 300);
});

test("an operator's dispute with suspend_keys false leaves the keys working until it closes", async () => {
  const pay = await admin(`/accounts/${accountId}/payments`, { reference: 'INV-TERMS-1', amount: 300, currency: 'USD', pack_id: 'p300' });
  assert.is(pay.status, 201, pay.text);
  const opened = await admin(`/accounts/${accountId}/payments/${pay.json.id}/disputes`, { dispute_id: 'dp_terms', amount: 300, suspend_keys: false });
  assert.is(opened.status, 200, opened.text);
  const listed = await admin(`/accounts/${accountId}/payments`);
  assert.equal(
    listed.json.disputes.map((d: any) => [d.id, d.suspends_keys, d.status]),
    [['dp_terms', false, 'open']],
  );
  const r = await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('hi'), max_tokens: 5 });
  assert.is(r.status, 200, r.text);
  const closed = await admin(`/accounts/${accountId}/disputes/dp_terms/close`, { outcome: 'won' });
  assert.equal(
    closed.json.events.map((e: any) => [e.type, e.outcome]),
    [['DisputeClosed', 'won']],
  );
});

test('a Stripe payment in another currency, or for a pack that does not exist, is kept unmatched and grants nothing', async () => {
  const paidBefore = (await call(gw, '/v1/payments', { key })).json.data.length;
  // p300 costs $4.50 since the first test.
  const inEuros = stripe.pay((await call(gw, '/v1/checkout/sessions', { key, body: { pack_id: 'p300' } })).json.id);
  const unknownPack = stripe.pay((await call(gw, '/v1/checkout/sessions', { key, body: { pack_id: 'p300' } })).json.id);
  assert.is(await deliver('checkout.session.completed', { ...inEuros, currency: 'eur' }), 'unmatched');
  assert.is(await deliver('checkout.session.completed', { ...unknownPack, metadata: { account_id: accountId, pack_id: 'p_gone' } }), 'unmatched');
  const unmatched = (await admin('/unmatched-payments')).json.data;
  const of = (session: Record<string, unknown>) => unmatched.find((u: any) => u.processorPaymentId === session.payment_intent);
  assert.equal(
    [of(inEuros).amount, of(inEuros).currency, of(inEuros).reason],
    [450, 'EUR', 'paid in EUR, which the item is not offered in (the ledger settles in USD)'],
  );
  assert.match(of(unknownPack).reason, /^no known plan or pack/);
  assert.is((await call(gw, '/v1/payments', { key })).json.data.length, paidBefore);
});

test.run();
