// The worked example of docs/payments.md, performed as written against an `npm start` process
// (Stripe through the official client, pointed at the local double; notices signed with the
// library's own helper) and read back only over HTTP: every figure the example prints, to the cent.
//   plan pro (1000 tokens) bought through Stripe for $20.00, fee $0.88; 500 tokens used; a refund of
//   $15.00 (750 tokens' worth, 500 unused: withdrawn); a pack of 300 tokens redeemed from a code sold
//   at $2.50, its tokens worth 83 + 84 + 83 cents per 100.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { call, type Reply } from './support/http.ts';
import { startStripeDouble, stripeEnv, type StripeDouble } from './support/stripe-double.ts';
import { adminApi, deliverStripe, spendExactly } from './support/money.ts';

const ADMIN = 'tg_admin_readme_payments_example_0123456789';
const accountId = 'acme';
let stripe: StripeDouble;
let proc: GatewayProcess;
let gw: { url: string };
let key: string;

const admin = (path: string, body?: unknown, method?: string) => adminApi(gw, ADMIN)(path, body, method);
const deliver = (type: string, object: Record<string, unknown>) => deliverStripe(gw, stripe, type, object);

/** The account's events as the auditor's export has them. */
async function accountEvents(): Promise<Array<{ type: string; position: number; data: Record<string, any>; metadata: Record<string, any> }>> {
  const r = await admin('/events');
  assert.is(r.status, 200, r.text);
  return r.text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .filter((e) => e.stream === `account-${accountId}`);
}

async function ok(r: Promise<Reply>, status = 200): Promise<any> {
  const reply = await r;
  assert.is(reply.status, status, reply.text);
  return reply.json;
}

const spend = (tokens: number) => spendExactly(gw, key, tokens);

const subscription = () => ok(call(gw, '/v1/subscription', { key }));
/** A payment's lot as the finance read folds it (the window: from before this test to tomorrow). */
const lotOf = async (paymentId: string) => {
  const to = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
  return (await ok(admin(`/finance/lots?from=2026-01-01&to=${to}`))).data.find((l: any) => l.paymentId === paymentId);
};

test.before(async () => {
  stripe = await startStripeDouble();
  proc = await spawnGateway({
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    ...stripeEnv(stripe),
  });
  gw = { url: proc.baseUrl.replace(/\/v1$/, '') };
  await ok(admin('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] }), 201);
  await ok(admin('/plans/pro/price', { amount: 2000 }, 'PUT'));
  await ok(admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT'));
  await ok(admin('/accounts', { account_id: accountId, name: 'Acme' }), 201);
  key = (await ok(admin(`/accounts/${accountId}/keys`, { name: 'app' }), 201)).key;
});
test.after(async () => {
  await proc?.stop();
  await stripe?.close();
});

let planPayment: string;

test('plan pro bought through Stripe for $20.00, fee $0.88: PaymentReceived 2000 and SubscriptionStarted in one append; 2 cents a token', async () => {
  const session = await ok(call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'pro' } }), 201);
  assert.equal([session.amount, session.currency], [2000, 'USD']);
  assert.is(await deliver('checkout.session.completed', stripe.pay(session.id)), 'recorded');
  const events = await accountEvents();
  const paid = events.find((e) => e.type === 'PaymentReceived')!;
  const started = events.find((e) => e.position === paid.position + 1)!;
  assert.equal([paid.data.processor, paid.data.amount, paid.data.currency, paid.data.fee], ['stripe', 2000, 'USD', 88]);
  assert.equal([started.type, started.data.paymentId, started.data.quota], ['SubscriptionStarted', paid.data.paymentId, 1000]);
  planPayment = paid.data.paymentId;
  const lot = await lotOf(planPayment);
  // 2 cents a token: the lot's rate is its price per its tokens.
  assert.equal([lot.paid, lot.tokens, lot.rate.amount / lot.rate.per], [2000, 1000, 2]);
  const sub = await subscription();
  assert.equal([sub.quota.total, sub.purchases[0].display, sub.purchases[0].fee], [1000, '20.00', 88]);
});

test('500 tokens used', async () => {
  await spend(500);
  const sub = await subscription();
  assert.equal([sub.quota.total, sub.quota.used, sub.quota.remaining], [1000, 500, 500]);
  assert.equal([(await lotOf(planPayment)).recognised, (await lotOf(planPayment)).deferred], [1000, 1000]);
});

test('a refund of $15.00 bought 750 tokens, 500 unused: 500 withdrawn, $10.00 from deferred, $5.00 refunded revenue', async () => {
  const intent = stripe.intentOfInvoice(String((await accountEvents()).find((e) => e.type === 'PaymentReceived')!.data.processorPaymentId));
  assert.is(await deliver('charge.refunded', stripe.refund(intent, 1500)), 'refunded');
  const refund = (await accountEvents()).find((e) => e.type === 'PaymentRefunded')!;
  assert.equal([refund.data.amount, refund.data.tokensWithdrawn, refund.data.fromDeferred, refund.data.refundedRevenue], [1500, 500, 1000, 500]);
  const sub = await subscription();
  // quota 1000 -> 500, used 500, remaining 0.
  assert.equal([sub.quota.total, sub.quota.used, sub.quota.remaining], [500, 500, 0]);
  // The customer keeps $5.00 of paid value, all of it used: nothing deferred is left on the lot.
  const lot = await lotOf(planPayment);
  assert.equal([lot.paid - lot.refunded, lot.deferred, lot.used, lot.withdrawn], [500, 0, 500, 500]);
  const receipt = await ok(call(gw, `/v1/payments/${planPayment}`, { key }));
  assert.equal([receipt.amount, receipt.fee, receipt.refunded, receipt.tokens_withdrawn], [2000, 88, 1500, 500]);
  const page = await call(gw, `/v1/payments/${planPayment}?format=html`, { key });
  assert.match(page.text, /20\.00 USD/);
  assert.match(page.text, /15\.00 USD/);
});

test('a pack of 300 tokens redeemed from a code sold at $2.50: PaymentReceived 250 (code) and ExtraTokensGranted 300; worth 83 + 84 + 83 cents per 100', async () => {
  const batch = await ok(admin('/code-batches', { count: 1, pack_id: 'p300', amount: 250 }), 201);
  const redeemed = await ok(call(gw, '/v1/redemptions', { key, body: { code: batch.codes[0] } }), 201);
  const codePayment = redeemed.payment.id;
  const events = await accountEvents();
  const paid = events.find((e) => e.type === 'PaymentReceived' && e.data.paymentId === codePayment)!;
  const granted = events.find((e) => e.position === paid.position + 1)!;
  assert.equal([paid.data.processor, paid.data.amount, paid.data.fee], ['code', 250, null]);
  assert.equal([granted.type, granted.data.amount, granted.data.paymentId], ['ExtraTokensGranted', 300, codePayment]);
  assert.equal((await subscription()).extra_tokens, { granted: 300, used: 0, remaining: 300, credits: [] });
  const recognised: number[] = [];
  for (let i = 0; i < 3; i++) {
    await spend(100);
    recognised.push((await lotOf(codePayment)).recognised);
  }
  assert.equal(
    recognised.map((r, i) => r - (recognised[i - 1] ?? 0)),
    [83, 84, 83],
  );
  assert.equal((await subscription()).extra_tokens, { granted: 300, used: 300, remaining: 0, credits: [] });
});

test.run();
