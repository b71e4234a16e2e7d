// Money in the ledger over real HTTP: prices, a manual payment with its grant in one append, a
// partial refund after use, a pack bought by a redemption code (exactly once under 50 concurrent
// requests, over two gateways on PostgreSQL), a dispute lost, bad input refused with nothing
// written, and the same figures after a rebuild from zero.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { eventsIn, subscriptionOf, useMainPlanUntil } from './support/money.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { spawnGateway, startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { accountDecider } from '../src/accounts/account-decider.ts';
import { fold } from '../src/ledger/decider.ts';
import { streams, type DomainEvent } from '../src/ledger/events.ts';
import { paymentsInOrder } from '../src/accounts/payment-bodies.ts';

const ADMIN = 'tg_admin_payments_test_token_0123456789abcdef';
const admin = (gw: TestGateway, path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

let gw: TestGateway;
let key: string;
const accountId = 'acct_pay';

/** Everything a refused request could have written to: the account, the price list. */
const eventCount = () => eventsIn(gw.ledger.events, [streams.account(accountId), streams.priceList()]);

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  assert.is((await admin(gw, '/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] })).status, 201);
  assert.is((await admin(gw, '/accounts', { account_id: accountId, name: 'Paying customer' })).status, 201);
  key = (await admin(gw, `/accounts/${accountId}/keys`, { name: 'app' })).json.key;
  await gw.ledger.caughtUp();
});
test.after(async () => {
  await gw.stop();
});

test('prices are events with their actor; customers read the price list', async () => {
  let r = await admin(gw, '/plans/pro/price', { amount: 2000 }, 'PUT');
  assert.is(r.status, 200, r.text);
  r = await admin(gw, '/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT');
  assert.is(r.status, 200, r.text);
  const prices = await call(gw, '/v1/prices', { key });
  assert.is(prices.status, 200, prices.text);
  assert.is(prices.json.currency, 'USD');
  assert.equal(
    prices.json.plans.map((p: any) => [p.plan_id, p.amount, p.display]),
    [['pro', 2000, '20.00']],
  );
  assert.equal(
    prices.json.packs.map((p: any) => [p.pack_id, p.tokens, p.amount, p.display]),
    [['p300', 300, 300, '3.00']],
  );
  const priced = (await gw.ledger.events.readStream(streams.priceList())).find((e) => e.type === 'PlanPriced');
  assert.is(priced?.metadata.actor, 'admin:operator');
});

test('bad input is a 400 and writes nothing', async () => {
  const before = await eventCount();
  const cases: Array<[string, unknown, string]> = [
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: -5, currency: 'USD', plan_id: 'pro' }, 'amount'],
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: 12.5, currency: 'USD', plan_id: 'pro' }, 'amount'],
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: 100, currency: 'XYZ', plan_id: 'pro' }, 'currency'],
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: 100, currency: 'EUR', plan_id: 'pro' }, 'currency'],
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: 100, currency: 'USD', plan_id: 'nope' }, 'plan_id'],
    [`/accounts/${accountId}/payments`, { reference: 'X-1', amount: 100, currency: 'USD' }, 'plan_id'],
  ];
  for (const [path, body, param] of cases) {
    const r = await admin(gw, path, body);
    assert.is(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.is(r.json.error.param, param, r.text);
  }
  for (const [path, body, param] of [
    ['/plans/nope/price', { amount: 100 }, 'plan_id'],
    ['/plans/pro/price', { amount: -1 }, 'amount'],
    ['/plans/pro/price', { amount: 1.5 }, 'amount'],
    ['/plans/pro/price', { amount: 100, currency: 'EURO' }, 'currency'],
  ] as const) {
    const r = await admin(gw, path, body, 'PUT');
    assert.is(r.status, 400, r.text);
    assert.is(r.json.error.param, param);
  }
  for (const code of ['', 'tgc_short', 'x'.repeat(5000), 42]) {
    const r = await call(gw, '/v1/redemptions', { key, body: { code } });
    assert.is(r.status, 400, r.text);
    assert.is(r.json.error.param, 'code');
  }
  assert.is(await eventCount(), before);
});

let planPayment: string;

test('a manual payment is appended with its grant in one append, once', async () => {
  const r = await admin(gw, `/accounts/${accountId}/payments`, { reference: 'INV-2026-001', amount: 2000, currency: 'USD', fee: 0, plan_id: 'pro' });
  assert.is(r.status, 201, r.text);
  planPayment = r.json.id;
  assert.equal([r.json.amount, r.json.display, r.json.item], [2000, '20.00', { kind: 'plan', plan_id: 'pro', tokens: 1000 }]);
  const again = await admin(gw, `/accounts/${accountId}/payments`, { reference: 'INV-2026-001', amount: 2000, currency: 'USD', fee: 0, plan_id: 'pro' });
  assert.is(again.status, 200);
  assert.is(again.json.already_recorded, true);
  const events = await gw.ledger.events.readStream(streams.account(accountId));
  const paid = events.filter((e) => e.type === 'PaymentReceived');
  assert.is(paid.length, 1);
  const grant = events[paid[0].revision + 1];
  assert.is(grant.type, 'SubscriptionStarted');
  assert.is(grant.data.paymentId, planPayment);
  // One append: consecutive positions of the same transaction.
  assert.is(grant.position > paid[0].position, true);
  const sub = { json: await subscriptionOf(gw, key) };
  assert.is(sub.json.quota.total, 1000);
  // The customer sees what was bought and when.
  assert.equal(
    sub.json.purchases.map((p: any) => [p.id, p.processor, p.display, p.reference, p.item.plan_id]),
    [[planPayment, 'manual', '20.00', 'INV-2026-001', 'pro']],
  );
});

test('a partial refund after use withdraws only unused tokens; the used part is refunded revenue', async () => {
  // Use more than half of the plan's 1000 tokens.
  const used = await useMainPlanUntil(gw, key, 600);
  // $10.00 of the $20.00 bought 500 tokens; only 1000 - used are unused.
  const r = await admin(gw, `/accounts/${accountId}/payments/${planPayment}/refunds`, { amount: 1000, refund_id: 're_1' });
  assert.is(r.status, 201, r.text);
  const unused = 1000 - used;
  assert.is(r.json.tokensWithdrawn, unused);
  // 2 cents a token ($20.00 / 1000): the withdrawn tokens' value came back from deferred revenue.
  assert.is(r.json.fromDeferred, 2 * unused);
  assert.is(r.json.refundedRevenue, 1000 - 2 * unused);
  assert.is(r.json.fromDeferred + r.json.refundedRevenue, 1000);
  const sub = { json: await subscriptionOf(gw, key) };
  assert.is(sub.json.quota.total, used);
  assert.is(sub.json.quota.remaining, 0);
  // Replayed: nothing twice. More than what is left: refused.
  assert.is((await admin(gw, `/accounts/${accountId}/payments/${planPayment}/refunds`, { amount: 1000, refund_id: 're_1' })).status, 200);
  const over = await admin(gw, `/accounts/${accountId}/payments/${planPayment}/refunds`, { amount: 1001, refund_id: 're_2' });
  assert.is(over.status, 400);
});

test('a code bought elsewhere pays for a pack, once; wrong and used codes answer alike', async () => {
  const batch = await admin(gw, '/code-batches', { count: 2, pack_id: 'p300', amount: 250 });
  assert.is(batch.status, 201, batch.text);
  const [code, other] = batch.json.codes as string[];
  // Only hashes are stored.
  const minted = (await gw.ledger.events.readStream(streams.codeBatch(batch.json.batch_id)))[0];
  assert.not.ok(JSON.stringify(minted).includes(code));
  const before = (await subscriptionOf(gw, key)).extra_tokens.granted;
  const ok = await call(gw, '/v1/redemptions', { key, body: { code } });
  assert.is(ok.status, 201, ok.text);
  assert.equal([ok.json.payment.processor, ok.json.payment.amount, ok.json.payment.item.tokens], ['code', 250, 300]);
  assert.is((await subscriptionOf(gw, key)).extra_tokens.granted, before + 300);
  const used = await call(gw, '/v1/redemptions', { key, body: { code } });
  const wrong = await call(gw, '/v1/redemptions', { key, body: { code: other.slice(0, -1) + (other.endsWith('a') ? 'b' : 'a') } });
  assert.is(used.status, 400);
  assert.equal(used.json, wrong.json);
  // The receipt, as JSON and as a printable page.
  const receipt = await call(gw, `/v1/payments/${ok.json.payment.id}`, { key });
  assert.is(receipt.json.object, 'receipt');
  assert.is(receipt.json.display, '2.50');
  const page = await call(gw, `/v1/payments/${ok.json.payment.id}?format=html`, { key });
  assert.ok(page.headers.get('content-type')?.startsWith('text/html'));
  assert.ok(page.text.includes('2.50 USD'));
});

test('a code sent 50 times at once (over two gateways on PostgreSQL) is redeemed exactly once', async () => {
  const batch = await admin(gw, '/code-batches', { count: 1, pack_id: 'p300', amount: 300 });
  const [code] = batch.json.codes as string[];
  // A second gateway on the same log needs a database both can share; on PGlite all 50 go to one.
  const other = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema }) : gw;
  // Another account sends the same code too: the code is redeemed once across accounts.
  const rival = process.env.DATABASE_URL
    ? (await admin(gw, '/accounts', { account_id: 'acct_rival', name: 'Rival' }), (await admin(gw, '/accounts/acct_rival/keys', {})).json.key)
    : key;
  const replies = await Promise.all(
    Array.from({ length: 50 }, (_, i) => call(i % 2 ? other : gw, '/v1/redemptions', { key: i % 5 === 0 ? rival : key, body: { code } })),
  );
  if (other !== gw) await other.close();
  assert.is(replies.filter((r) => r.status === 201).length, 1);
  assert.ok(replies.every((r) => r.status === 201 || r.status === 400 || r.status === 429));
  // Exactly one payment for the code in the whole log, whichever account won it.
  const redeemed = [];
  for (const a of [accountId, 'acct_rival'])
    redeemed.push(
      ...(await gw.ledger.events.readStream(streams.account(a))).filter(
        (e) => e.type === 'PaymentReceived' && e.data.processor === 'code' && e.data.amount === 300,
      ),
    );
  assert.is(redeemed.length, 1);
});

test('a dispute suspends the keys until it closes; a lost one is a refund', async () => {
  const pay = await admin(gw, `/accounts/${accountId}/payments`, { reference: 'INV-2026-002', amount: 300, currency: 'USD', fee: 39, pack_id: 'p300' });
  assert.is(pay.status, 201, pay.text);
  const opened = await admin(gw, `/accounts/${accountId}/payments/${pay.json.id}/disputes`, { dispute_id: 'dp_1', amount: 300 });
  assert.is(opened.status, 200, opened.text);
  const refused = await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('hi'), max_tokens: 5 });
  assert.is(refused.status, 403, refused.text);
  assert.is(refused.json.error.code, 'account_suspended');
  const closed = await admin(gw, `/accounts/${accountId}/disputes/dp_1/close`, { outcome: 'lost', fee: 1500 });
  assert.is(closed.status, 200, closed.text);
  const refund = closed.json.events.find((e: any) => e.type === 'PaymentRefunded');
  assert.equal([refund.reason, refund.amount, refund.fromDeferred + refund.refundedRevenue], ['dispute_lost', 300, 300]);
  const allowed = await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('hi'), max_tokens: 5 });
  assert.is(allowed.status, 200, allowed.text);
});

test('the CLI: prices, a manual payment, its refund, a batch of codes', async () => {
  const cli = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/tollgate.js', ...args], {
      env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
    });
    return stdout;
  };
  assert.match(await cli('price', 'list'), /plan pro\t20\.00 USD per period[\s\S]*pack p300\t300 tokens\t3\.00 USD/);
  const paid = JSON.parse(await cli('payment', 'record', accountId, '--reference', 'WIRE-77', '--amount', '1234', '--pack', 'p300', '--json'));
  assert.equal([paid.amount, paid.display, paid.processor, paid.item.tokens], [1234, '12.34', 'manual', 300]);
  assert.match(await cli('payment', 'list', accountId), new RegExp(`${paid.id}\tmanual\t12\\.34 USD\tpack p300`));
  // A third of $12.34 (411 cents) bought round(300 x 411 / 1234) = 100 tokens, none used yet.
  assert.match(
    await cli('payment', 'refund', accountId, paid.id, '--amount', '411', '--id', 'wire-back-1'),
    /refunded 4\.11: 100 unused tokens withdrawn, 0 minor units/,
  );
  const codes = await cli('codes', 'mint', '--count', '3', '--pack', 'p300', '--amount', '250');
  assert.is((codes.match(/tgc_[a-z0-9]{10}_[A-Za-z0-9]{20}/g) ?? []).length, 3);
  const refused = await cli('payment', 'record', accountId, '--reference', 'W', '--amount', '12.5', '--pack', 'p300').catch(
    (e: { code: number; stderr: string }) => e,
  );
  assert.is(typeof refused === 'object' && refused.code, 2);
  assert.match((refused as { stderr: string }).stderr, /whole number of minor units/);
});

test('a rebuild from zero gives the same figures', async () => {
  const subBefore = await subscriptionOf(gw, key);
  const paymentsBefore = (await call(gw, '/v1/payments', { key })).json;
  const rebuild = await admin(gw, '/rebuild', {});
  assert.ok(rebuild.text.includes('"type":"done"'), rebuild.text);
  const subAfter = await subscriptionOf(gw, key);
  assert.equal(subAfter.quota, subBefore.quota);
  assert.equal(subAfter.extra_tokens, subBefore.extra_tokens);
  // The account's payments folded from its events alone (no snapshot) are those the API shows.
  const s = fold(
    accountDecider,
    (await gw.ledger.events.readStream(streams.account(accountId))).map((e) => ({ type: e.type, data: e.data }) as DomainEvent),
  );
  assert.equal(
    paymentsInOrder(s.payments.values()).map((p) => [p.paymentId, p.amount, p.refunded, p.tokensWithdrawn]),
    paymentsBefore.data.map((p: any) => [p.id, p.amount, p.refunded, p.tokens_withdrawn]),
  );
  assert.equal((await call(gw, '/v1/payments', { key })).json, paymentsBefore);
});

test('npm start with no Stripe keys: says Stripe is off, seeds a price for the demo plan and one pack', async () => {
  const started = await spawnGateway({ STRIPE_SECRET_KEY: '', STRIPE_WEBHOOK_SECRET: '' });
  try {
    assert.match(started.output(), /Stripe is off/);
    const prices = await call({ url: started.baseUrl.replace(/\/v1$/, '') }, '/v1/prices', { key: started.key });
    assert.is(prices.status, 200, prices.text);
    assert.equal(
      prices.json.plans.map((p: any) => [p.plan_id, p.display]),
      [['demo', '20.00']],
    );
    assert.equal(
      prices.json.packs.map((p: any) => [p.pack_id, p.tokens, p.display]),
      [['pack-1m', 1_000_000, '5.00']],
    );
  } finally {
    await started.stop();
  }
});

test.run();
