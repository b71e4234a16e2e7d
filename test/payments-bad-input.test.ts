// Bad input on every payment endpoint, one table: the operator's (prices, packs, manual payments,
// refunds, disputes, code batches), the customer's on /v1 (key) and /app/api (session and CSRF), and
// Stripe's webhook. Each row against an `npm start` process, as a user runs it: the status, an error
// in the OpenAI dialect that says what is wrong (its param or code), and the whole log unchanged,
// read back through the auditor's export. Then no Stripe secret in the process's log or /metrics,
// and a second start with another settlement currency refused.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Stripe from 'stripe';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dropSchemas, spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { call, type Reply } from './support/http.ts';
import { startStripeDouble, type StripeDouble } from './support/stripe-double.ts';

const ADMIN = 'tg_admin_bad_payment_input_token_0123456789';
const METRICS = 'tg_metrics_bad_payment_input_token_012345678';
const accountId = 'acct_bad_input';
const email = 'owner@bad-input.test';

// Set once, in `before`: the double, the process, its origin, the customer's key, session and first payment.
let stripe: StripeDouble, proc: GatewayProcess, gw: { url: string }, key: string, paymentId: string;
let session: { cookie: string; csrf: string };

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

/** Every event in the log, as the auditor's export has it. */
async function eventCount(): Promise<number> {
  const r = await admin('/events');
  assert.is(r.status, 200, r.text);
  return r.text.split('\n').filter((l) => l.trim()).length;
}

/** A webhook body signed with the endpoint's secret by the official library's test helper. */
const signature = (payload: string, secret = stripe.webhookSecret) => new Stripe(stripe.secretKey).webhooks.generateTestHeaderString({ payload, secret });

test.before(async () => {
  stripe = await startStripeDouble();
  proc = await spawnGateway({
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    TOLLGATE_METRICS_TOKEN: METRICS,
    STRIPE_SECRET_KEY: stripe.secretKey,
    STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    STRIPE_API_BASE: stripe.url,
  });
  gw = { url: proc.baseUrl.replace(/\/v1$/, '') };
  assert.is((await admin('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] })).status, 201);
  assert.is((await admin('/plans/pro/price', { amount: 2000 }, 'PUT')).status, 200);
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  assert.is((await admin('/accounts', { account_id: accountId, name: 'Careless customer' })).status, 201);
  key = (await admin(`/accounts/${accountId}/keys`, { name: 'app' })).json.key;
  const paid = await admin(`/accounts/${accountId}/payments`, { reference: 'INV-BASE', amount: 2000, currency: 'USD', plan_id: 'pro' });
  assert.is(paid.status, 201, paid.text);
  paymentId = paid.json.id;
  // The owner signs in to /app with the link the gateway prints (no SMTP set).
  assert.is((await admin(`/accounts/${accountId}/members`, { email, role: 'owner' })).status, 201);
  assert.is((await call(gw, '/app/api/sign-in/email', { body: { email } })).status, 202);
  const link = await waitFor(() => /https?:\/\/[^\s"]+\/app\/sign-in#[^\s"]+/.exec(proc.output())?.[0]);
  const fragment = new URLSearchParams(new URL(link).hash.slice(1));
  const verified = await call(gw, '/app/api/sign-in/email/verify', { body: { email: fragment.get('email'), token: fragment.get('token') } });
  assert.is(verified.status, 200, verified.text);
  const cookie = /tollgate_session=[^;]+/.exec(verified.headers.get('set-cookie') ?? '')![0];
  const s = await call(gw, '/app/api/session', { headers: { cookie } });
  assert.is(s.status, 200, s.text);
  session = { cookie, csrf: s.json.csrf_token };
});
test.after(async () => {
  await proc?.stop();
  await stripe?.close();
});

async function waitFor<T>(find: () => T | undefined): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const found = find();
    if (found !== undefined) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not found in the gateway's output:\n${proc.output()}`);
}

type Caller = 'admin' | 'key' | 'session' | 'stripe';
interface Row {
  what: string;
  as: Caller;
  method?: string;
  path: string;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
  status: number;
  param?: string | null;
  code?: string;
}

const big = 'x'.repeat(600 * 1024);
const app = `/app/api/accounts/${accountId}`;
type Body = Record<string, unknown>;
/** A row per endpoint: what is sent, and the answer's status and param (or, `code:`, its code). */
const adminPut = (what: string, path: string, body: unknown, param?: string, status = 400): Row => ({
  what,
  as: 'admin',
  method: 'PUT',
  path,
  body,
  status,
  param,
});
const adminPost = (what: string, path: string, body: unknown, param?: string, status = 400): Row => ({ what, as: 'admin', path, body, status, param });
const manual = (what: string, body: Body, param?: string, status = 400) =>
  adminPost(what, `/admin/v1/accounts/${accountId}/payments`, { reference: 'INV-BAD', amount: 2000, currency: 'USD', plan_id: 'pro', ...body }, param, status);
const onPayment = (what: string, act: 'refunds' | 'disputes', body: Body, param?: string, payment = paymentId, status = 400) =>
  adminPost(what, `/admin/v1/accounts/${accountId}/payments/${payment}/${act}`, body, param, status);
const closeDispute = (what: string, dispute: string, body: Body, param?: string, status = 400) =>
  adminPost(what, `/admin/v1/accounts/${accountId}/disputes/${dispute}/close`, body, param, status);
const codes = (what: string, body: Body, param: string) =>
  adminPost(what, '/admin/v1/code-batches', { count: 2, pack_id: 'p300', amount: 250, ...body }, param);
const customer = (what: string, as: 'key' | 'session', path: string, body: unknown, param: string | null, status = 400): Row => ({
  what,
  as,
  path,
  body,
  status,
  param,
});
const signed = (raw: string, signedRaw = raw, secret?: string) => ({ raw, headers: { 'stripe-signature': signature(signedRaw, secret) } });
const hook = (what: string, body: { raw: string; headers?: Record<string, string> }, code?: string): Row => ({
  what,
  as: 'stripe',
  path: '/webhooks/stripe',
  ...body,
  status: 400,
  code,
});
const event = (object: Body) => JSON.stringify({ id: 'evt_bad', object: 'event', type: 'checkout.session.completed', data: { object } });
const noObject = '{"id":"evt_1","type":"charge.refunded","data":{}}';

const rows = (): Row[] => [
  adminPut('negative plan price', '/admin/v1/plans/pro/price', { amount: -1 }, 'amount'),
  adminPut('fractional plan price', '/admin/v1/plans/pro/price', { amount: 19.99 }, 'amount'),
  adminPut('plan price as a string', '/admin/v1/plans/pro/price', { amount: '20.00' }, 'amount'),
  adminPut('plan price beyond 2^53', '/admin/v1/plans/pro/price', { amount: 2 ** 60 }, 'amount'),
  adminPut('unknown currency', '/admin/v1/plans/pro/price', { amount: 100, currency: 'XYZ' }, 'currency'),
  adminPut('an unknown currency', '/admin/v1/plans/pro/price', { amount: 100, currency: 'EUX' }, 'currency'),
  adminPut('price for an unknown plan', '/admin/v1/plans/nope/price', { amount: 100 }, 'plan_id'),
  adminPut('price body not an object', '/admin/v1/plans/pro/price', [2000]),
  adminPut('pack of no tokens', '/admin/v1/packs/p9', { name: 'x', tokens: 0, amount: 100 }, 'tokens'),
  adminPut('pack of fractional tokens', '/admin/v1/packs/p9', { name: 'x', tokens: 1.5, amount: 100 }, 'tokens'),
  adminPut('pack at a negative price', '/admin/v1/packs/p9', { name: 'x', tokens: 10, amount: -5 }, 'amount'),
  adminPut('pack without a name', '/admin/v1/packs/p9', { tokens: 10, amount: 5 }, 'name'),
  // Another currency is an offer beside the settlement price, which the pack must have first.
  adminPut('pack offered in another currency before its own', '/admin/v1/packs/p9', { name: 'x', tokens: 10, amount: 5, currency: 'JPY' }, 'currency', 409),
  manual('negative payment', { amount: -5 }, 'amount'),
  manual('fractional payment', { amount: 12.5 }, 'amount'),
  manual('payment in an unknown currency', { currency: 'XYZ' }, 'currency'),
  manual('payment in another currency', { currency: 'EUR' }, 'currency'),
  manual('payment for an unknown plan', { plan_id: 'nope' }, 'plan_id'),
  manual('payment for an unknown pack', { plan_id: undefined, pack_id: 'nope' }, 'pack_id'),
  manual('payment for nothing', { plan_id: undefined }, 'plan_id'),
  manual('payment for a plan and a pack', { pack_id: 'p300' }, 'plan_id'),
  manual('payment without a reference', { reference: '' }, 'reference'),
  manual('negative fee', { fee: -1 }, 'fee'),
  { ...manual('payment to an unknown account', {}, undefined, 404), path: '/admin/v1/accounts/acct_nobody/payments' },
  onPayment('negative refund', 'refunds', { amount: -100 }, 'amount'),
  onPayment('fractional refund', 'refunds', { amount: 0.5 }, 'amount'),
  onPayment('refund beyond the payment', 'refunds', { amount: 2001 }, 'amount'),
  onPayment('refund id with a space', 'refunds', { amount: 100, refund_id: 're 1' }, 'refund_id'),
  onPayment('refund of an unknown payment', 'refunds', { amount: 100 }, undefined, 'pay_nope', 404),
  onPayment('negative dispute', 'disputes', { dispute_id: 'dp_1', amount: -1 }, 'amount'),
  onPayment('dispute amount as a string', 'disputes', { dispute_id: 'dp_1', amount: '100' }, 'amount'),
  onPayment('dispute without an id', 'disputes', { amount: 100 }, 'dispute_id'),
  closeDispute('dispute closed as neither', 'dp_1', { outcome: 'maybe' }, 'outcome'),
  closeDispute('dispute fee as a string', 'dp_1', { outcome: 'lost', fee: '15' }, 'fee'),
  closeDispute('unknown dispute closed', 'dp_nope', { outcome: 'won' }, undefined, 404),
  codes('batch of no codes', { count: 0 }, 'count'),
  codes('batch too large', { count: 100_000 }, 'count'),
  codes('codes sold at a negative price', { amount: -1 }, 'amount'),
  codes('codes sold at a fractional price', { amount: 2.5 }, 'amount'),
  codes('codes in another currency', { currency: 'EUR' }, 'currency'),
  codes('codes for an unknown pack', { pack_id: 'nope' }, 'pack_id'),
  codes('codes for an unknown plan', { pack_id: undefined, plan_id: 'nope' }, 'plan_id'),
  codes('codes expiring at no time', { expires_at: 'tomorrow' }, 'expires_at'),
  codes('codes expired already', { expires_at: '2020-01-01T00:00:00Z' }, 'expires_at'),
  customer('empty code', 'key', '/v1/redemptions', { code: '' }, 'code'),
  customer('code of the wrong shape', 'key', '/v1/redemptions', { code: 'tgc_short' }, 'code'),
  customer('code as a number', 'key', '/v1/redemptions', { code: 42 }, 'code'),
  customer('huge code', 'key', '/v1/redemptions', { code: 'x'.repeat(5000) }, 'code'),
  customer('redemption body not an object', 'key', '/v1/redemptions', ['tgc_x'], 'code'),
  customer('checkout for nothing', 'key', '/v1/checkout/sessions', {}, 'plan_id'),
  customer('checkout for an unknown plan', 'key', '/v1/checkout/sessions', { plan_id: 'nope' }, 'plan_id'),
  customer('checkout for an unknown pack', 'key', '/v1/checkout/sessions', { pack_id: 'nope' }, 'pack_id'),
  customer('checkout for a plan and a pack', 'key', '/v1/checkout/sessions', { plan_id: 'pro', pack_id: 'p300' }, 'plan_id'),
  customer('checkout with a recurring string', 'key', '/v1/checkout/sessions', { plan_id: 'pro', recurring: 'yes' }, 'recurring'),
  customer('receipt of a malformed id', 'key', '/v1/payments/..%2Fadmin', undefined, 'id'),
  customer('receipt of an unknown payment', 'key', '/v1/payments/pay_000000000000000000000000', undefined, 'id', 404),
  customer('/app: code of the wrong shape', 'session', `${app}/redemptions`, { code: 'nope' }, 'code'),
  customer('/app: checkout for an unknown pack', 'session', `${app}/checkout`, { pack_id: 'nope' }, 'pack_id'),
  customer('/app: checkout body not an object', 'session', `${app}/checkout`, ['pro'], 'plan_id'),
  { ...customer('/app: checkout body not JSON', 'session', `${app}/checkout`, undefined, null), raw: '{plan_id: pro', code: 'invalid_json' },
  customer('/app: receipt of a malformed id', 'session', `${app}/payments/nope`, undefined, 'id'),
  hook('webhook without a signature', { raw: event({}) }, 'invalid_signature'),
  hook('webhook signed with another secret', signed(event({}), event({}), 'whsec_not_the_one'), 'invalid_signature'),
  hook('webhook body changed after signing', signed(event({ amount_total: 30000 }), event({ amount_total: 300 })), 'invalid_signature'),
  hook('webhook body too large', signed(big), 'request_too_large'),
  hook('webhook body not JSON, signed', signed('not json')),
  hook('webhook JSON not an event, signed', signed('[1,2]'), 'invalid_event'),
  hook('webhook event without its object, signed', signed(noObject), 'invalid_event'),
];

function send(row: Row): Promise<Reply> {
  const headers: Record<string, string> = { ...(row.headers ?? {}) };
  if (row.as === 'session') Object.assign(headers, { cookie: session.cookie, 'x-csrf-token': session.csrf });
  if (row.as === 'stripe' || row.raw !== undefined) headers['content-type'] = 'application/json';
  const bearer = row.as === 'admin' ? ADMIN : row.as === 'key' ? key : undefined;
  return call(gw, row.path, { key: bearer, body: row.body, raw: row.raw, headers, method: row.method });
}

test('every payment endpoint: bad input is refused in the OpenAI dialect, says what is wrong, and writes nothing', async () => {
  assert.ok((await eventCount()) >= 8, 'the export shows the setup events');
  for (const row of rows()) {
    const before = await eventCount();
    const r = await send(row);
    assert.is(r.status, row.status, `${row.what}: ${r.text}`);
    assert.type(r.json?.error?.message, 'string', `${row.what}: ${r.text}`);
    assert.ok(r.json.error.message.length > 10, `${row.what}: ${r.text}`);
    assert.is(r.json.error.type, 'invalid_request_error', `${row.what}: ${r.text}`);
    if (row.param !== undefined) assert.is(r.json.error.param, row.param, `${row.what}: ${r.text}`);
    if (row.code !== undefined) assert.is(r.json.error.code, row.code, `${row.what}: ${r.text}`);
    assert.not.ok(r.text.includes(stripe.secretKey) || r.text.includes(stripe.webhookSecret), `${row.what}: a secret in the answer`);
    assert.is(await eventCount(), before, `${row.what}: the log changed`);
  }
  // The account is as it was: one payment, nothing refunded, no dispute.
  const payments = await admin(`/accounts/${accountId}/payments`);
  assert.equal(
    payments.json.data.map((p: any) => [p.id, p.amount, p.refunded]),
    [[paymentId, 2000, 0]],
  );
  assert.equal(payments.json.disputes, []);
});

test("no Stripe secret in the process's log or in /metrics", async () => {
  const metrics = await call(gw, '/metrics', { key: METRICS });
  assert.is(metrics.status, 200, metrics.text);
  // The refused requests were counted (by route and status), and nothing else was said of them.
  assert.match(metrics.text, /status="400"/);
  for (const text of [proc.output(), metrics.text]) {
    assert.not.ok(text.includes(stripe.secretKey));
    assert.not.ok(text.includes(stripe.webhookSecret));
  }
  // The log did see the refused notices and the configured Stripe path.
  assert.match(proc.output(), /stripe: on/);
});

test('the settlement currency is set once: a later start with another refuses to run, and the first still starts', async () => {
  const place = { TOLLGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'tollgate-currency-')), TOLLGATE_SCHEMA: uniqueSchema('cur'), TOLLGATE_BOOTSTRAP: 'off' };
  try {
    await (await spawnGateway({ ...place, TOLLGATE_CURRENCY: 'USD' })).stop();
    const refused = await spawnGateway({ ...place, TOLLGATE_CURRENCY: 'EUR' }).then(
      async (p) => {
        await p.stop();
        return null;
      },
      (err: Error) => err.message,
    );
    assert.ok(refused, 'a start with EUR on a USD ledger must not run');
    assert.match(refused!, /the settlement currency is USD and is set once; it cannot become EUR/);
    await (await spawnGateway({ ...place, TOLLGATE_CURRENCY: 'USD' })).stop();
  } finally {
    rmSync(place.TOLLGATE_DATA_DIR, { recursive: true, force: true });
    if (process.env.DATABASE_URL) await dropSchemas(process.env.DATABASE_URL, place.TOLLGATE_SCHEMA);
  }
});

test.run();
