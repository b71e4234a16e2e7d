// Buying through the session API of /app, over real HTTP: members signed in by a link mailed
// through a real SMTP server on loopback, the official `stripe` client (inside the gateway) talking
// to the local Stripe double, notices signed with the library's own test helper. An owner buys a
// pack through Checkout and comes back to /app/billing, the notice arrives and the tokens appear; a
// billing member redeems a code; payments with receipts, statements and the usage CSV; a developer
// gets a 403 with nothing written. Runs on PGlite, and on PostgreSQL with DATABASE_URL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { StripeDouble } from './support/stripe-double.ts';
import { startBillingSetup, type BillingSetup } from './support/billing.ts';
import { asPerson, signInByLink, type Person } from './support/sessions.ts';
import { call, chat, userMessage, type TestAccount } from './support/http.ts';
import type { TestGateway } from './support/gateway.ts';
import { streams } from '../src/ledger/events.ts';

const ADMIN = 'customers-billing-admin-token-0123456789abcdef';
let setup: BillingSetup;
let stripe: StripeDouble;
let gw: TestGateway;
let acme: TestAccount;
let owner: Person;
let biller: Person;
let dev: Person;

const admin = (path: string, body?: unknown, method?: string) => setup.admin(path, body, method);
const inAcme = (p: Person, path: string, body?: unknown, method?: string) => asPerson(gw, p, `/accounts/${acme.accountId}${path}`, body, method);
const accountRevision = async () => (await gw.ledger.events.readStream(streams.account(acme.accountId))).length;
const extraGranted = async (p: Person) => (await inAcme(p, '/subscription')).json.extra_tokens.granted as number;

async function deliver(event: Record<string, unknown>) {
  const { body, signature } = stripe.signed(event);
  return call(gw, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
}

test.before(async () => {
  setup = await startBillingSetup(ADMIN, [
    ['owner@acme.test', 'owner'],
    ['books@acme.test', 'billing'],
    ['dev@acme.test', 'developer'],
  ]);
  ({ stripe, gw, acme } = setup);
  owner = await signInByLink(gw, setup.smtp, 'owner@acme.test');
  biller = await signInByLink(gw, setup.smtp, 'books@acme.test');
  dev = await signInByLink(gw, setup.smtp, 'dev@acme.test');
});
test.after(() => setup?.stop());

test('the price list shows the plan and the pack with their amounts', async () => {
  const r = await inAcme(biller, '/prices');
  assert.is(r.status, 200, r.text);
  assert.is(r.json.currency, 'USD');
  assert.equal(
    r.json.packs.map((p: { pack_id: string; tokens: number; display: string }) => [p.pack_id, p.tokens, p.display]),
    [['p300', 300, '3.00']],
  );
  assert.ok(r.json.plans.some((p: { plan_id: string; display: string }) => p.plan_id === acme.planId && p.display === '20.00'));
});

let packPayment = '';

test('an owner buys a pack through Checkout: back to /app/billing, the notice arrives, the tokens appear', async () => {
  const before = await extraGranted(owner);
  const session = await inAcme(owner, '/checkout', { pack_id: 'p300' });
  assert.is(session.status, 201, session.text);
  assert.is(session.json.object, 'checkout.session');
  assert.equal([session.json.amount, session.json.currency], [300, 'USD']);
  assert.ok(String(session.json.url).startsWith('https://'), session.json.url);
  const onStripe = stripe.sessions.get(session.json.id)!;
  assert.is(onStripe.successUrl, `${gw.url}/app/billing?checkout=paid`, 'Checkout sends the member back to the billing page');
  assert.is(onStripe.cancelUrl, `${gw.url}/app/billing?checkout=cancelled`);
  assert.is(onStripe.metadata.account_id, acme.accountId);
  // Nothing is granted until Stripe says it was paid.
  assert.is(await extraGranted(owner), before);

  const paid = stripe.pay(session.json.id);
  const notice = await deliver(stripe.event('checkout.session.completed', paid));
  assert.is(notice.status, 200, notice.text);
  assert.is(notice.json.outcome, 'recorded');
  assert.is(await extraGranted(owner), before + 300);

  const list = await inAcme(owner, '/payments');
  assert.is(list.status, 200, list.text);
  const payment = list.json.data.find((p: { processor: string }) => p.processor === 'stripe');
  assert.equal([payment.amount, payment.display, payment.fee, payment.item], [300, '3.00', 39, { kind: 'pack', pack_id: 'p300', tokens: 300 }]);
  packPayment = payment.id;
});

test('a billing member redeems a code: the tokens appear; a wrong code is refused with nothing written', async () => {
  const batch = await admin('/code-batches', { count: 1, pack_id: 'p300', amount: 250 });
  assert.is(batch.status, 201, batch.text);
  const [code] = batch.json.codes as string[];
  const before = await extraGranted(biller);
  const revision = await accountRevision();
  const wrong = await inAcme(biller, '/redemptions', { code: code.slice(0, -1) + (code.endsWith('a') ? 'b' : 'a') });
  assert.is(wrong.status, 400, wrong.text);
  assert.is(wrong.json.error.code, 'invalid_code');
  assert.is(await accountRevision(), revision);

  const ok = await inAcme(biller, '/redemptions', { code });
  assert.is(ok.status, 201, ok.text);
  assert.equal([ok.json.payment.processor, ok.json.payment.amount, ok.json.payment.item.tokens], ['code', 250, 300]);
  assert.is(await extraGranted(biller), before + 300);
  const redeemed = (await gw.ledger.events.readStream(streams.account(acme.accountId))).filter((e) => e.type === 'PaymentReceived').at(-1)!;
  assert.match(String(redeemed.metadata.actor), /^member:mem_\w+:books@acme\.test$/, 'the member is the actor');
  const again = await inAcme(biller, '/redemptions', { code });
  assert.is(again.status, 400, 'a code works once');
});

test('receipts as JSON and as a printable page; an unknown payment is a 404', async () => {
  const receipt = await inAcme(biller, `/payments/${packPayment}`);
  assert.is(receipt.status, 200, receipt.text);
  assert.equal([receipt.json.object, receipt.json.id, receipt.json.display], ['receipt', packPayment, '3.00']);
  const page = await inAcme(biller, `/payments/${packPayment}?format=html`);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.ok(page.text.includes(packPayment) && page.text.includes('3.00 USD'), page.text);
  assert.is((await inAcme(biller, `/payments/pay_${'0'.repeat(24)}`)).status, 404);
});

test('statements (JSON and CSV) and the usage CSV hold the account’s calls', async () => {
  const r = await chat(gw, acme.key, { model: 'cx/gen-6-luna', messages: userMessage('a line for the statement'), max_tokens: 20 });
  assert.is(r.status, 200, r.text);
  const billed = Number(r.headers.get('x-tollgate-billed-tokens'));
  assert.ok(billed > 0);
  await gw.ledger.caughtUp();

  const s = await inAcme(owner, '/statement');
  assert.is(s.status, 200, s.text);
  assert.is(s.json.account_id, acme.accountId);
  const line = s.json.lines.find((l: { request_id: string }) => l.request_id === r.headers.get('x-request-id'));
  assert.ok(line, `the call's line in ${JSON.stringify(s.json.lines)}`);
  assert.is(line.billed, billed);
  assert.is(s.json.totals.billed, billed);

  const csv = await inAcme(owner, '/statement?format=csv');
  assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
  assert.match(csv.headers.get('content-disposition') ?? '', new RegExp(`filename="statement-${acme.accountId}\\.csv"`));
  assert.ok(
    csv.text.split('\n').some((l) => l.includes(line.request_id)),
    csv.text,
  );
  assert.is((await inAcme(owner, '/statement?from=yesterday')).status, 400);

  const usage = await inAcme(biller, '/billing/usage?group_by=key&format=csv&range=7d');
  assert.is(usage.status, 200, usage.text);
  const [header, ...rows] = usage.text.trim().split(/\r?\n/);
  assert.match(header, /^date,key_id,key_name,requests,/);
  const columns = header.split(',');
  const mine = rows.map((row) => Object.fromEntries(row.split(',').map((c, i) => [columns[i], c]))).filter((row) => row.key_id === acme.keyId);
  assert.is(mine.length, 1, usage.text);
  assert.is(Number(mine[0].billed_tokens), billed);
});

test('a developer gets a 403 on every billing route, with nothing written and nothing asked of Stripe', async () => {
  const revision = await accountRevision();
  const toStripe = stripe.requests.length;
  for (const [method, path, body] of [
    ['GET', '/prices', undefined],
    ['GET', '/subscription', undefined],
    ['POST', '/checkout', { pack_id: 'p300' }],
    ['POST', '/redemptions', { code: 'tgc_aaaaaaaaaa_bbbbbbbbbbbbbbbbbbbb' }],
    ['GET', '/payments', undefined],
    ['GET', `/payments/${packPayment}`, undefined],
    ['GET', `/payments/${packPayment}?format=html`, undefined],
    ['GET', '/statement?format=csv', undefined],
    ['GET', '/billing/usage?format=csv', undefined],
    ['GET', '/balance-alerts', undefined],
    ['PUT', '/balance-alerts', { thresholds_tokens: [100] }],
    ['GET', '/auto-top-up', undefined],
    ['PUT', '/auto-top-up', { threshold_tokens: 100, pack_id: 'p300' }],
    ['DELETE', '/auto-top-up', undefined],
    ['POST', '/auto-top-up/card', {}],
  ] as const) {
    const r = await inAcme(dev, path, body, method);
    assert.is(r.status, 403, `${method} ${path}: ${r.text}`);
    assert.is(r.json.error.type, 'permission_error', r.text);
    assert.not.ok(r.text.includes(packPayment), 'nothing of the payment leaks');
  }
  assert.is(await accountRevision(), revision);
  assert.is(stripe.requests.length, toStripe);
  // The same developer still has what their role gives.
  assert.is((await inAcme(dev, '/usage')).status, 200);
});

test('checkout for an unknown pack or with a bad body: 400 in the API’s shape, nothing asked of Stripe', async () => {
  const toStripe = stripe.requests.length;
  for (const body of [{ pack_id: 'nope' }, { plan_id: acme.planId, recurring: 'yes' }, ['p300']]) {
    const r = await inAcme(owner, '/checkout', body);
    assert.is(r.status, 400, r.text);
    assert.ok(r.json.error.message);
  }
  assert.is(stripe.requests.length, toStripe);
});

test.run();
