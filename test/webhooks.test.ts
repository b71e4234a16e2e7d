// Notifications by webhook, end to end: registration rules (bad input writes nothing), signed
// deliveries with stable ids, quota thresholds crossed by real metered calls on the simulated
// upstream, key revocation, corrections, plan expiry on a fake clock, a receiver that fails and
// goes away, a gateway restart in the middle, replays, giving up after the retry window, the CLI,
// no secret in the logs, and (on PostgreSQL) one dispatcher at a time across gateways.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { settingsFromEnv, type Settings } from '../src/config.ts';
import { startGateway, type RunningGateway } from '../src/server.ts';
import { accountDecider } from '../src/accounts/account-decider.ts';
import { type AccountState } from '../src/accounts/account-state.ts';
import { belongsTo, type DomainEvent, type StreamEvents } from '../src/ledger/events.ts';
import { crossedThresholds, mergeNotices, NOTIFICATION_KINDS, type Notice } from '../src/webhooks/kinds.ts';
import { checkEndpoint, parseEndpoint } from '../src/webhooks/endpoint.ts';
import { masterKey, signatureHeader, verifySignature } from '../src/webhooks/signing.ts';
import { webhooksOf, type WebhookService } from '../src/webhooks/service.ts';
import { dropSchemas } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';

const run = promisify(execFile);
const ADMIN = 'tg_admin_webhooks_test_0123456789';
const onPostgres = !!process.env.DATABASE_URL;
const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-webhooks-'));
const schema = uniqueSchema('wh');
const startedAt = new Date();

// ---- the receiver: verifies every signature as the snippet in docs/operating.md does, de-duplicates by id ------

/** docs/operating.md, "Webhooks": the receiver's check, written out independently of src/webhooks. */
function verify(secret: string, header: string, rawBody: string, toleranceSeconds = 300): boolean {
  const fields = Object.fromEntries(header.split(',').map((kv) => kv.split('=')));
  const expected = createHmac('sha256', secret).update(`${fields.t}.${rawBody}`).digest('hex');
  const fresh = Math.abs(Date.now() / 1000 - Number(fields.t)) <= toleranceSeconds;
  return fresh && typeof fields.v1 === 'string' && fields.v1.length === expected.length && timingSafeEqual(Buffer.from(fields.v1), Buffer.from(expected));
}

interface Received {
  webhookId: string;
  deliveryId: string;
  attempt: number;
  body: Record<string, any>;
  raw: string;
  signature: string;
}

class Receiver {
  readonly secrets = new Map<string, string>();
  mode: 'ok' | 'fail' = 'ok';
  server: Server | null = null;
  port = 0;
  /** Every accepted request, repeats included. */
  readonly requests: Received[] = [];
  /** The first receipt of each (webhook, notification id). */
  readonly first = new Map<string, Received>();
  duplicates = 0;
  badSignatures = 0;
  failedRequests = 0;

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (d) => {
        raw += d;
      });
      req.on('end', () => {
        if (req.url === '/hooks/broken' || this.mode === 'fail') {
          this.failedRequests++;
          res.statusCode = 500;
          res.end('unavailable');
          return;
        }
        const webhookId = String(req.headers['tollgate-webhook-id']);
        const secret = this.secrets.get(webhookId);
        const signature = String(req.headers['tollgate-signature'] ?? '');
        if (!secret || !verify(secret, signature, raw)) {
          this.badSignatures++;
          res.statusCode = 400;
          res.end('bad signature');
          return;
        }
        const r: Received = {
          webhookId,
          deliveryId: String(req.headers['tollgate-delivery-id']),
          attempt: Number(req.headers['tollgate-attempt']),
          body: JSON.parse(raw),
          raw,
          signature,
        };
        this.requests.push(r);
        const key = `${webhookId}|${r.body.id}`;
        if (this.first.has(key)) this.duplicates++;
        else this.first.set(key, r);
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', () => resolve()));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }

  url(path = '/hooks/main') {
    return `http://127.0.0.1:${this.port}${path}`;
  }
  /** Notifications the webhook received, each once, in the order they first arrived. */
  of(webhookId: string, type?: string): Received[] {
    return [...this.first.values()].filter((r) => r.webhookId === webhookId && (!type || r.body.type === type));
  }
}

// ---- gateways on one data directory and schema, their logs captured ----------------------------

let logs = '';
const logSink = {
  write(line: string) {
    logs += line;
  },
};
const receiver = new Receiver();
let gw: RunningGateway;

function settingsFor(overrides: Partial<Settings> = {}): Settings {
  const base = settingsFromEnv({});
  return {
    ...base,
    port: 0,
    dataDir,
    schema,
    databaseUrl: process.env.DATABASE_URL || undefined,
    logLevel: 'debug',
    adminToken: ADMIN,
    bootstrap: false,
    webhooks: { ...base.webhooks, allowHosts: ['127.0.0.1'], retryBaseMs: 100, retryMaxMs: 400, checkIntervalMs: 3_600_000, timeoutMs: 3000 },
    ...overrides,
  };
}

const startGw = (overrides: Partial<Settings> = {}) => startGateway(settingsFor(overrides), pino({ level: 'debug' }, logSink));

function service(g: RunningGateway = gw): WebhookService {
  const h = webhooksOf(g.deps);
  if ('disabled' in h) throw new Error(h.disabled);
  return h.service;
}

async function admin(method: string, path: string, body?: unknown, g: RunningGateway = gw) {
  const res = await fetch(`${g.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-tollgate-actor': 'alice' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* ndjson */
  }
  return { status: res.status, json, text };
}

async function chat(key: string, model: string) {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Name three rivers and one bridge over each.' }], max_tokens: 40 }),
  });
  await res.text();
  return res.status;
}

async function until<T>(what: string, fn: () => T | Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)?.slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const head = async () => (await admin('GET', '/events')).text.trim().split('\n').filter(Boolean).length;
const events = async () =>
  (await admin('GET', '/events')).text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
const deliveriesOf = async (webhookId: string, query = '') =>
  (await admin('GET', `/webhooks/${webhookId}/deliveries${query}`)).json.data as Array<Record<string, any>>;
const quotaOf = async (accountId: string) => {
  const a = (await admin('GET', `/accounts/${accountId}`)).json;
  return { used: Number(a.quota_used), total: Number(a.quota_total) };
};

const secretsShown: string[] = [];
async function register(accountId: string, body: Record<string, unknown>) {
  const r = await admin('POST', `/accounts/${accountId}/webhooks`, body);
  assert.is(r.status, 201, r.text);
  receiver.secrets.set(r.json.webhook_id, r.json.secret);
  secretsShown.push(r.json.secret);
  return r.json as { webhook_id: string; secret: string; events: string[]; thresholds: number[] };
}

let W1 = '';
let W2 = '';
let key = '';

test.before(async () => {
  await receiver.start();
  gw = await startGw();
  await until('the dispatcher to lead', () => service().leading, Boolean);
  assert.is(
    (await admin('POST', '/plans', { plan_id: 'wh_small', name: 'Small', quota: 1000, validity_days: 30, requests_per_minute: 10_000, models: ['*'] })).status,
    201,
  );
  assert.is(
    (await admin('POST', '/plans', { plan_id: 'wh_big', name: 'Big', quota: 1_000_000, validity_days: 30, requests_per_minute: 10_000, models: ['*'] })).status,
    201,
  );
  for (const [id, plan] of [
    ['acme', 'wh_small'],
    ['globex', 'wh_big'],
  ]) {
    assert.is((await admin('POST', '/accounts', { account_id: id, name: id })).status, 201);
    assert.is((await admin('POST', `/accounts/${id}/subscription`, { plan_id: plan })).status, 200);
  }
  key = (await admin('POST', '/accounts/acme/keys', { name: 'metered' })).json.key;
});

test.after(async () => {
  await gw?.close();
  await receiver.stop();
  if (process.env.DATABASE_URL) await dropSchemas(process.env.DATABASE_URL, schema);
  rmSync(dataDir, { recursive: true, force: true });
});

// ---- the pure parts -------------------------------------------------------------------------

const fold = (events: StreamEvents['account'][], from: AccountState = accountDecider.initialState()) => events.reduce(accountDecider.evolve, from);
const terms = (quota: number, startsAt: string, expiresAt: string) => ({
  accountId: 'a',
  planId: 'p',
  planName: 'P',
  quota,
  requestsPerMinute: 10,
  models: ['*'],
  startsAt,
  expiresAt,
});
const charge = (holdId: string, fromQuota: number, fromExtra = 0): StreamEvents['account'][] => [
  {
    type: 'QuotaReserved',
    data: {
      accountId: 'a',
      holdId,
      requestId: holdId,
      keyId: 'k',
      model: 'm',
      kind: 'chat',
      amount: fromQuota + fromExtra,
      expiresAt: '2099-01-01T00:00:00.000Z',
    },
  },
  {
    type: 'ChatCharged',
    data: {
      accountId: 'a',
      holdId,
      requestId: holdId,
      keyId: 'k',
      model: 'm',
      multiplierMilli: 1000,
      reserved: fromQuota + fromExtra,
      billed: fromQuota + fromExtra,
      fromQuota,
      fromExtra,
      promptTokens: fromQuota + fromExtra,
      completionTokens: 0,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
    },
  },
];

/** Every notice the kinds give for these events, folded one by one from `from`. */
function noticesFor(
  events: DomainEvent[],
  from: AccountState,
  options = { thresholds: [80, 90, 100], expiringDays: 7, registeredAt: '2026-01-01T00:00:00.000Z' },
  at = '2026-01-10T00:00:00.000Z',
): Notice[] {
  const out: Notice[] = [];
  let state = from;
  events.forEach((event, i) => {
    // What is not of the account's stream (a key's revocation) leaves its state as it is.
    const after = belongsTo('account', event) ? accountDecider.evolve(state, event) : state;
    for (const k of NOTIFICATION_KINDS) out.push(...(k.onEvent?.({ before: state, logged: { id: `e${i}`, timestamp: at, event }, after }, options) ?? []));
    state = after;
  });
  return out;
}

test('kinds: thresholds are crossed once each, by the money rule, and a renewal starts over', () => {
  assert.equal(crossedThresholds([80, 90, 100], 1000, 790, 1000), [80, 90, 100]);
  assert.equal(crossedThresholds([80, 90, 100], 1000, 800, 899), []);
  assert.equal(crossedThresholds([80], 0, 0, 10), [], 'no plan, no percentage');
  const opened = fold([
    { type: 'AccountOpened', data: { accountId: 'a', name: 'A' } },
    { type: 'SubscriptionStarted', data: terms(1000, '2026-01-01T00:00:00.000Z', '2026-01-31T00:00:00.000Z') },
  ]);
  const found = noticesFor([...charge('h1', 700), ...charge('h2', 150), ...charge('h3', 150, 40), ...charge('h4', 0, 10)], opened);
  assert.equal(
    found.map((n) => n.data.threshold),
    [80, 90, 100],
  );
  assert.ok(found.every((n) => n.type === 'quota.threshold' && n.data.quota === 1000));
  assert.is(found[2].data.quota_used, 1000);
  // The same period again (a refund, then usage back over 80 %): the same keys, so the outbox keeps one.
  const again = noticesFor(
    [
      {
        type: 'ChargeAdjusted',
        data: {
          accountId: 'a',
          correctionId: 'c',
          chargeEventId: 'x',
          requestId: 'h1',
          model: 'm',
          chargedAt: '2026-01-02T00:00:00.000Z',
          billedBefore: 700,
          billedCorrected: 400,
          multiplierMilliBefore: 1000,
          multiplierMilliCorrected: 500,
          delta: -300,
          quotaDelta: -300,
          extraDelta: 0,
        },
      },
      ...charge('h5', 300),
    ],
    fold([...charge('h1', 700), ...charge('h2', 150), ...charge('h3', 150)], opened),
  );
  const thresholdKeys = new Set(found.map((n) => n.key));
  assert.ok(
    again.filter((n) => n.type === 'quota.threshold').every((n) => thresholdKeys.has(n.key)),
    'no new crossing in the same period',
  );
  const renewed = noticesFor(
    [{ type: 'SubscriptionRenewed', data: terms(1000, '2026-01-20T00:00:00.000Z', '2026-02-19T00:00:00.000Z') }, ...charge('h6', 850)],
    fold([...charge('h1', 1000)], opened),
  );
  const r80 = renewed.find((n) => n.type === 'quota.threshold')!;
  assert.is(r80.data.threshold, 80);
  assert.not.ok(thresholdKeys.has(r80.key), 'a new period is a new notification');
});

test('kinds: plan expiry on the clock and on a late renewal; corrections merge; ids are stable', () => {
  const state = fold([
    { type: 'AccountOpened', data: { accountId: 'a', name: 'A' } },
    { type: 'SubscriptionStarted', data: terms(1000, '2026-01-01T00:00:00.000Z', '2026-01-31T00:00:00.000Z') },
  ]);
  const options = { thresholds: [80], expiringDays: 7, registeredAt: '2026-01-02T00:00:00.000Z' };
  const expiring = NOTIFICATION_KINDS.find((k) => k.type === 'plan.expiring')!;
  const expired = NOTIFICATION_KINDS.find((k) => k.type === 'plan.expired')!;
  assert.is(expiring.onTime!(state, new Date('2026-01-23T00:00:00.000Z'), options).length, 0, '8 days before');
  const warn = expiring.onTime!(state, new Date('2026-01-25T00:00:00.000Z'), options);
  assert.is(warn.length, 1);
  assert.is(warn[0].data.days_left, 6);
  assert.is(warn[0].key, expiring.onTime!(state, new Date('2026-01-26T00:00:00.000Z'), options)[0].key, 'the same warning, whenever found');
  assert.is(expiring.onTime!(state, new Date('2026-01-31T00:00:00.000Z'), options).length, 0, 'expired: no warning');
  assert.is(expired.onTime!(state, new Date('2026-01-30T23:59:59.000Z'), options).length, 0);
  assert.is(expired.onTime!(state, new Date('2026-01-31T00:00:00.000Z'), options).length, 1);
  assert.is(
    expired.onTime!(state, new Date('2026-02-01T00:00:00.000Z'), { ...options, registeredAt: '2026-01-31T12:00:00.000Z' }).length,
    0,
    'expired before the webhook existed',
  );
  const late = noticesFor(
    [{ type: 'SubscriptionRenewed', data: terms(1000, '2026-02-03T00:00:00.000Z', '2026-03-05T00:00:00.000Z') }],
    state,
    options,
    '2026-02-03T00:00:00.000Z',
  );
  assert.equal(
    late.map((n) => n.type),
    ['plan.expired'],
  );
  assert.is(
    late[0].key,
    expired.onTime!(state, new Date('2026-02-01T00:00:00.000Z'), options)[0].key,
    'found by the clock or by the renewal: one notification',
  );
  const adj = (i: number, delta: number): StreamEvents['account'] => ({
    type: 'ChargeAdjusted',
    data: {
      accountId: 'a',
      correctionId: 'c1',
      chargeEventId: `x${i}`,
      requestId: `r${i}`,
      model: 'm',
      chargedAt: '2026-01-02T00:00:00.000Z',
      billedBefore: 100,
      billedCorrected: 100 + delta,
      multiplierMilliBefore: 1000,
      multiplierMilliCorrected: 1500,
      delta,
      quotaDelta: delta,
      extraDelta: 0,
    },
  });
  const merged = mergeNotices(noticesFor([...charge('h1', 300), adj(1, 50), adj(2, 70)], state, options));
  assert.is(merged.length, 1);
  assert.equal(
    { ...merged[0].data, quota_used: undefined, quota_remaining: undefined, extra_remaining: undefined, quota: undefined },
    {
      correction_id: 'c1',
      adjustments: 2,
      delta: 120,
      quota_delta: 120,
      extra_delta: 0,
      request_ids: ['r1', 'r2'],
      quota_used: undefined,
      quota_remaining: undefined,
      extra_remaining: undefined,
      quota: undefined,
    },
  );
});

test('kinds: key.revoked for every revocation but the new key of a failed rotation, whose secret no one saw', () => {
  const state = fold([
    { type: 'AccountOpened', data: { accountId: 'a', name: 'A' } },
    { type: 'SubscriptionStarted', data: terms(1000, '2026-01-01T00:00:00.000Z', '2026-01-31T00:00:00.000Z') },
  ]);
  const revoked = (keyId: string, reason: string): DomainEvent => ({ type: 'KeyRevoked', data: { keyId, accountId: 'a', reason } });
  const found = noticesFor([revoked('k_new', 'rotation_failed'), revoked('k_old', 'rotated'), revoked('k_lost', 'laptop lost')], state);
  assert.equal(
    found.filter((n) => n.type === 'key.revoked').map((n) => [n.data.key_id, n.data.reason]),
    [
      ['k_old', 'rotated'],
      ['k_lost', 'laptop lost'],
    ],
  );
});

test('signing: derived per webhook, verifiable, time-bound; endpoints follow the image-URL rules', async () => {
  const m = masterKey('m'.repeat(48));
  assert.is.not(m.secretFor('wh_a'), m.secretFor('wh_b'));
  assert.is(m.secretFor('wh_a'), masterKey('m'.repeat(48)).secretFor('wh_a'));
  assert.not.ok(JSON.stringify(m).includes('mmmm'), 'the master secret is not a property');
  assert.throws(() => masterKey('short'), /at least 32/);
  const now = Date.now() / 1000;
  const header = signatureHeader(m.secretFor('wh_a'), '{"a":1}', now);
  assert.ok(verifySignature(m.secretFor('wh_a'), header, '{"a":1}', now));
  assert.ok(verify(m.secretFor('wh_a'), header, '{"a":1}'), 'the documented check agrees');
  assert.not.ok(verifySignature(m.secretFor('wh_b'), header, '{"a":1}', now));
  assert.not.ok(verifySignature(m.secretFor('wh_a'), header, '{"a":2}', now));
  assert.not.ok(verifySignature(m.secretFor('wh_a'), header, '{"a":1}', now + 3600), 'too old');
  const policy = { allowHosts: ['hooks.internal', '10.9.9.9'] };
  assert.is(parseEndpoint('https://hooks.example.com/x#frag', policy).href, 'https://hooks.example.com/x');
  assert.is(parseEndpoint('http://hooks.internal:8080/in', policy).href, 'http://hooks.internal:8080/in');
  assert.is(parseEndpoint('https://10.9.9.9/in', policy).hostname, '10.9.9.9');
  for (const bad of [
    'http://hooks.example.com/x',
    'https://10.0.0.1/',
    'https://169.254.169.254/latest',
    'https://[::1]/',
    'https://[::ffff:127.0.0.1]/',
    'ftp://hooks.internal/',
    'nope',
    'https://u:p@hooks.example.com/',
  ]) {
    assert.throws(() => parseEndpoint(bad, policy), undefined, bad);
  }
  // DNS: a name that resolves to a private address is refused, unless the name is allow-listed.
  const lookup = ((_h: string, _o: unknown, cb: (e: null, a: Array<{ address: string; family: number }>) => void) =>
    cb(null, [
      { address: '93.184.216.34', family: 4 },
      { address: '10.1.1.1', family: 4 },
    ])) as never;
  await checkEndpoint('https://rebind.example.com/', { allowHosts: [], lookup }).then(
    () => assert.unreachable('private address accepted'),
    (e: Error) => assert.match(e.message, /private/),
  );
  assert.is((await checkEndpoint('https://rebind.example.com/', { allowHosts: ['rebind.example.com'], lookup })).hostname, 'rebind.example.com');
});

// ---- through a running gateway -------------------------------------------------------------

test('bad registrations are a clear 400 or 404 and write nothing', async () => {
  const before = await head();
  const good = receiver.url();
  const cases: Array<[string, unknown, number, RegExp]> = [
    ['acme', { url: 'http://hooks.example.com/x' }, 400, /https/],
    ['acme', { url: 'https://10.1.2.3/hook' }, 400, /private/],
    ['acme', { url: 'https://192.168.0.10/hook' }, 400, /private/],
    ['acme', { url: 'https://[::1]/hook' }, 400, /private/],
    ['acme', { url: 'https://169.254.169.254/latest/meta-data' }, 400, /private/],
    ['acme', { url: 'not a url' }, 400, /not a valid URL/],
    ['acme', { url: 42 }, 400, /url/],
    ['acme', {}, 400, /url/],
    ['acme', { url: 'ftp://127.0.0.1/x' }, 400, /https/],
    ['acme', { url: `http://user:pw@127.0.0.1:${receiver.port}/` }, 400, /password/],
    ['acme', { url: good, events: ['quota.threshold', 'quota.exploded'] }, 400, /Unknown event 'quota.exploded'/],
    ['acme', { url: good, events: [] }, 400, /events/],
    ['acme', { url: good, thresholds: [0] }, 400, /1 to 100/],
    ['acme', { url: good, thresholds: [80, 101] }, 400, /1 to 100/],
    ['acme', { url: good, thresholds: [50.5] }, 400, /1 to 100/],
    ['acme', { url: good, thresholds: 'all' }, 400, /thresholds/],
    ['acme', { url: good, expiring_days: 0 }, 400, /expiring_days/],
    ['acme', { url: good, colour: 'red' }, 400, /Unknown field 'colour'/],
    ['ghost', { url: good }, 404, /account ghost not found/],
  ];
  for (const [account, body, status, message] of cases) {
    const r = await admin('POST', `/accounts/${account}/webhooks`, body);
    assert.is(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    assert.match(r.json.error?.message ?? '', message, JSON.stringify(body));
  }
  assert.is((await admin('POST', '/accounts/acme/webhooks', [1, 2])).status, 400);
  assert.is((await admin('DELETE', '/accounts/acme/webhooks/wh_00000000000000aa')).status, 404);
  assert.is((await admin('GET', '/accounts/ghost/webhooks')).status, 404);
  assert.is((await admin('GET', '/webhooks/wh_00000000000000aa/deliveries')).status, 404);
  assert.is((await admin('GET', '/webhooks/nonsense/deliveries')).status, 404);
  assert.is(await head(), before, 'nothing written');
  assert.equal((await admin('GET', '/accounts/acme/webhooks')).json.data, []);
});

test('registration shows the secret once; deliveries are signed and carry stable ids', async () => {
  const w1 = await register('acme', { url: receiver.url() });
  W1 = w1.webhook_id;
  assert.match(w1.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  assert.equal(w1.thresholds, [80, 90, 100]);
  assert.equal(w1.events, [
    'quota.threshold',
    'key_limit.threshold',
    'plan.expiring',
    'plan.expired',
    'key.revoked',
    'key.expired',
    'extra_tokens.granted',
    'correction.applied',
    'auto_top_up.succeeded',
    'auto_top_up.failed',
    'balance.alert',
  ]);
  const w2 = await register('acme', { url: receiver.url('/hooks/half'), events: ['quota.threshold'], thresholds: [50] });
  W2 = w2.webhook_id;
  const listed = await admin('GET', '/accounts/acme/webhooks');
  assert.equal(
    listed.json.data.map((w: { webhook_id: string }) => w.webhook_id),
    [W1, W2],
  );
  assert.not.ok(listed.text.includes(w1.secret) || listed.text.includes('secret'), 'never shown again');
  const registered = (await events()).filter((e) => e.type === 'WebhookRegistered');
  assert.is(registered.length, 2);
  assert.ok(registered.every((e) => e.metadata.actor === 'admin:alice' && e.stream === 'webhooks-acme'));
  assert.not.ok(JSON.stringify(registered).includes(w1.secret), 'the secret is not in the event');

  assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount: 100_000, reason: 'top-up' })).status, 200);
  const [got] = await until(
    'extra_tokens.granted',
    () => receiver.of(W1, 'extra_tokens.granted'),
    (l) => l.length === 1,
  );
  assert.equal(Object.keys(got.body), ['id', 'type', 'account_id', 'created_at', 'data']);
  assert.is(got.body.account_id, 'acme');
  assert.is(got.body.data.amount, 100_000);
  assert.is(got.body.data.extra_remaining, 100_000);
  assert.match(got.body.id, /^ntf_[a-f0-9]{32}$/);
  assert.match(got.signature, /^t=\d+,v1=[a-f0-9]{64}$/);
  assert.is(got.attempt, 1);
  assert.is(receiver.of(W2).length, 0, 'W2 takes quota.threshold only');
  const [d] = await until(
    'the delivery log',
    () => deliveriesOf(W1),
    (l) => l[0]?.status === 'delivered',
  );
  assert.is(d.delivery_id, got.deliveryId);
  assert.is(d.notification_id, got.body.id);
  assert.is(d.response_status, 200);
  assert.equal(d.notification, got.body);
});

test('quota thresholds from metered calls: 80, 90 and 100 % once each, in order; a renewal starts over', async () => {
  let q = await quotaOf('acme');
  for (let i = 0; i < 200 && q.used < q.total; i++) {
    assert.is(await chat(key, 'cx/gen-6-terra'), 200);
    q = await quotaOf('acme');
  }
  assert.is(q.used, q.total, 'the main plan is used up (the rest went to extra tokens)');
  const thresholds = await until(
    'three thresholds',
    () => receiver.of(W1, 'quota.threshold'),
    (l) => l.length === 3,
  );
  assert.equal(
    thresholds.map((r) => r.body.data.threshold),
    [80, 90, 100],
  );
  assert.is(thresholds[2].body.data.quota_used, 1000);
  assert.is(thresholds[2].body.data.quota_remaining, 0);
  const [half] = await until(
    'W2 at 50 %',
    () => receiver.of(W2),
    (l) => l.length === 1,
  );
  assert.is(half.body.data.threshold, 50);
  // More calls, from extra tokens: no threshold again in this period.
  assert.is(await chat(key, 'cx/gen-6-terra'), 200);
  await service().caughtUp();
  await new Promise((r) => setTimeout(r, 300));
  assert.is(receiver.of(W1, 'quota.threshold').length, 3);

  assert.is((await admin('POST', '/accounts/acme/subscription', { plan_id: 'wh_small' })).json.event, 'SubscriptionRenewed');
  q = await quotaOf('acme');
  for (let i = 0; i < 100 && q.used * 2 < q.total; i++) {
    assert.is(await chat(key, 'cx/gen-6-terra'), 200);
    q = await quotaOf('acme');
  }
  const halves = await until(
    'W2 at 50 % of the new period',
    () => receiver.of(W2),
    (l) => l.length === 2,
  );
  assert.is.not(halves[1].body.id, halves[0].body.id);
  assert.is.not(halves[1].body.data.period_start, halves[0].body.data.period_start);
  assert.is(receiver.of(W1, 'quota.threshold').length, 3, 'W1 (80 %) not reached again yet');
  assert.is(receiver.badSignatures, 0);
});

test('key.revoked; correction.applied, one per correction; plan.expiring and plan.expired on a fake clock', async () => {
  const keyId = (await admin('GET', '/accounts/acme/keys')).json.data[0].key_id;
  assert.is((await admin('POST', `/keys/${keyId}/revoke`, { reason: 'leaked' })).status, 200);
  const [revoked] = await until(
    'key.revoked',
    () => receiver.of(W1, 'key.revoked'),
    (l) => l.length === 1,
  );
  assert.equal([revoked.body.data.key_id, revoked.body.data.reason], [keyId, 'leaked']);

  // globex: its own webhook and model, so the correction touches nobody else.
  const w4 = await register('globex', { url: receiver.url('/hooks/globex'), events: ['correction.applied'] });
  const globexKey = (await admin('POST', '/accounts/globex/keys', {})).json.key;
  for (let i = 0; i < 3; i++) assert.is(await chat(globexKey, 'alpha-haiku-4.5'), 200);
  const haiku = (await admin('GET', '/models')).json.data.find((m: { model_id: string }) => m.model_id === 'alpha-haiku-4.5');
  const corrected = await admin('POST', '/corrections', {
    model: 'alpha-haiku-4.5',
    from: new Date(startedAt.getTime() - 60_000).toISOString(),
    to: new Date(Date.now() - 1).toISOString(),
    multiplier: Number(haiku.multiplier_milli) / 1000 + 0.5,
    reason: 'test',
  });
  assert.is(corrected.status, 200, corrected.text);
  const adjustments = (await events()).filter((e) => e.type === 'ChargeAdjusted' && e.data.accountId === 'globex');
  assert.is(adjustments.length, 3);
  const notes = await until(
    'correction.applied',
    () => receiver.of(w4.webhook_id),
    (l) => l.reduce((n, r) => n + r.body.data.adjustments, 0) === 3,
  );
  assert.ok(notes.every((r) => r.body.type === 'correction.applied' && r.body.data.correction_id === adjustments[0].data.correctionId));
  assert.is(
    notes.reduce((n, r) => n + r.body.data.delta, 0),
    adjustments.reduce((n, e) => n + e.data.delta, 0),
  );

  // The plan of acme's current period, as the last threshold notification named it.
  const expiresAt = Date.parse(receiver.of(W2).at(-1)!.body.data.expires_at);
  assert.is(await service().checkTime(expiresAt - 8 * 86_400_000), 0, 'not yet');
  assert.is(await service().checkTime(expiresAt - 6 * 86_400_000), 1);
  assert.is(await service().checkTime(expiresAt - 5 * 86_400_000), 0, 'once');
  const [expiring] = await until(
    'plan.expiring',
    () => receiver.of(W1, 'plan.expiring'),
    (l) => l.length === 1,
  );
  assert.equal([expiring.body.data.days_before, expiring.body.data.days_left, Date.parse(expiring.body.data.expires_at)], [7, 6, expiresAt]);
  assert.is(await service().checkTime(expiresAt + 60_000), 1);
  assert.is(await service().checkTime(expiresAt + 120_000), 0, 'once');
  const [expired] = await until(
    'plan.expired',
    () => receiver.of(W1, 'plan.expired'),
    (l) => l.length === 1,
  );
  assert.is(expired.body.data.plan_id, 'wh_small');
  assert.is(receiver.of(W2).length, 2, 'W2 takes quota.threshold only');
});

test("key_limit.threshold from metered calls against a key's own limit; key.expired on a fake clock", async () => {
  const w5 = await register('globex', { url: receiver.url('/hooks/keys'), events: ['key_limit.threshold', 'key.expired'] });
  const issued = (await admin('POST', '/accounts/globex/keys', { name: 'limited' })).json;
  const patched = await admin('PATCH', `/keys/${issued.key_id}`, { spend_limit: { tokens: 400, period: 'daily' } });
  assert.is(patched.status, 200, patched.text);
  let refused = 0;
  for (let i = 0; i < 40 && refused === 0; i++) if ((await chat(issued.key, 'cx/gen-6-terra')) !== 200) refused++;
  assert.is(refused, 1, "the key's limit was reached");
  const crossed = await until(
    'three key thresholds',
    () => receiver.of(w5.webhook_id, 'key_limit.threshold'),
    (l) => l.length === 3,
  );
  assert.equal(
    crossed.map((r) => r.body.data.threshold),
    [80, 90, 100],
  );
  assert.ok(crossed.every((r) => r.body.data.key_id === issued.key_id && r.body.data.limit === 400 && r.body.data.period === 'daily'));
  assert.is(crossed[2].body.data.spent, 400);
  assert.match(crossed[2].body.data.resets_at, /T00:00:00.000Z$/);

  const expiresAt = Date.now() + 86_400_000;
  assert.is((await admin('PATCH', `/keys/${issued.key_id}`, { expires_at: new Date(expiresAt).toISOString() })).status, 200);
  await service().caughtUp();
  assert.is(await service().checkTime(expiresAt - 60_000), 0);
  assert.is(await service().checkTime(expiresAt + 60_000), 1);
  assert.is(await service().checkTime(expiresAt + 120_000), 0, 'once');
  const [expired] = await until(
    'key.expired',
    () => receiver.of(w5.webhook_id, 'key.expired'),
    (l) => l.length === 1,
  );
  assert.equal([expired.body.data.key_id, Date.parse(expired.body.data.expires_at)], [issued.key_id, expiresAt]);
});

test('receiver outage (500, then down) and recovery: every notification delivered, once each, in order', async () => {
  receiver.mode = 'fail';
  for (let amount = 1; amount <= 5; amount++)
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount, reason: `outage ${amount}` })).status, 200);
  await until(
    'retries of the first',
    () => deliveriesOf(W1, '?status=pending'),
    (l) => l.length === 5 && l.some((d) => d.attempts >= 3),
  );
  const pending = (await deliveriesOf(W1, '?status=pending')).sort((a, b) => a.seq - b.seq);
  assert.ok(pending[0].attempts >= 3 && pending[0].response_status === 500 && pending[0].last_error === 'HTTP 500', JSON.stringify(pending[0]));
  assert.ok(
    pending.slice(1).every((d) => d.attempts === 0),
    'later ones wait for the first: order per account',
  );
  assert.ok(Date.parse(pending[0].next_attempt_at) > Date.parse(pending[0].last_attempt_at), 'backing off');

  await receiver.stop();
  receiver.mode = 'ok';
  for (let amount = 6; amount <= 8; amount++)
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount, reason: `outage ${amount}` })).status, 200);
  await until(
    'connection failures',
    () => deliveriesOf(W1, '?status=pending'),
    (l) => l.length === 8 && /connection failed/.test(l.find((d) => d.attempts > 0 && d.response_status === null)?.last_error ?? ''),
  );
  await receiver.start();
  const got = await until(
    'all eight',
    () => receiver.of(W1, 'extra_tokens.granted').filter((r) => /^outage/.test(r.body.data.reason)),
    (l) => l.length === 8,
  );
  assert.equal(
    got.map((r) => r.body.data.amount),
    [1, 2, 3, 4, 5, 6, 7, 8],
    'in order, none missing',
  );
  await until(
    'the log',
    () => deliveriesOf(W1, '?status=pending'),
    (l) => l.length === 0,
  );
  assert.is(receiver.badSignatures, 0);
});

test('a gateway restart in the middle: delivery continues from the checkpoint, none lost', async () => {
  await receiver.stop();
  for (let amount = 101; amount <= 103; amount++)
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount, reason: `restart ${amount}` })).status, 200);
  await until(
    'queued before the restart',
    () => deliveriesOf(W1, '?status=pending'),
    (l) => l.length === 3,
  );
  await gw.close();
  // A gateway without webhooks: events are appended while no dispatcher reads the log.
  gw = await startGw({ webhooks: { ...settingsFor().webhooks, enabled: false } });
  const off = await admin('GET', `/webhooks/${W1}/deliveries`);
  assert.equal([off.status, off.json.error?.code], [503, 'webhooks_disabled']);
  for (let amount = 104; amount <= 105; amount++)
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount, reason: `restart ${amount}` })).status, 200);
  await gw.close();
  gw = await startGw();
  await until('the new dispatcher to lead', () => service().leading, Boolean, 20_000);
  await receiver.start();
  assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount: 106, reason: 'restart 106' })).status, 200);
  const got = await until(
    'all six',
    () => receiver.of(W1, 'extra_tokens.granted').filter((r) => /^restart/.test(r.body.data.reason)),
    (l) => l.length === 6,
    20_000,
  );
  assert.equal(
    got.map((r) => r.body.data.amount),
    [101, 102, 103, 104, 105, 106],
    'in order, none lost',
  );
  assert.is(receiver.badSignatures, 0, 'the same secrets after the restart');
  // Nothing queued twice: one delivery per notification in the log.
  const log = await deliveriesOf(W1, '?limit=1000');
  assert.is(new Set(log.map((d) => d.notification_id)).size, log.length);
  const ids = [...receiver.first.keys()].filter((k) => k.startsWith(W1));
  assert.is(ids.length, log.length, 'every notification in the log reached the receiver');
});

test('replay sends a delivery again with the same ids; bad replays are 404 or 409', async () => {
  const [delivered] = await deliveriesOf(W1, '?status=delivered&limit=1');
  const repeatsBefore = receiver.duplicates;
  const r = await admin('POST', `/webhooks/${W1}/deliveries/${delivered.delivery_id}/replay`);
  assert.is(r.status, 202, r.text);
  assert.is(r.json.status, 'pending');
  assert.is(r.json.replays, 1);
  await until(
    'the repeat',
    () => receiver.duplicates,
    (n) => n === repeatsBefore + 1,
  );
  const repeat = receiver.requests.at(-1)!;
  assert.equal([repeat.deliveryId, repeat.body.id], [delivered.delivery_id, delivered.notification_id]);
  const [after] = await until(
    'delivered again',
    () => deliveriesOf(W1, '?limit=1'),
    (l) => l[0]?.status === 'delivered' && l[0].delivery_id === delivered.delivery_id,
  );
  assert.ok(after.seq > delivered.seq, 'queued behind what was there');
  assert.is((await admin('POST', `/webhooks/${W1}/deliveries/dlv_${'0'.repeat(32)}/replay`)).status, 404);
  assert.is((await admin('POST', `/webhooks/${W2}/deliveries/${delivered.delivery_id}/replay`)).status, 404, "another webhook's delivery");
});

test('after the retry window a delivery is marked failed and the next one goes out; removal cancels', async () => {
  const w3 = await register('globex', { url: receiver.url('/hooks/broken'), events: ['extra_tokens.granted'] });
  assert.is((await admin('POST', '/accounts/globex/extra-tokens', { amount: 7, reason: 'doomed' })).status, 200);
  await until(
    'retries',
    () => deliveriesOf(w3.webhook_id),
    (l) => l[0]?.attempts >= 2,
  );
  // A day and an hour later.
  service().setClock(() => Date.now() + 25 * 3_600_000);
  try {
    const [failed] = await until(
      'given up',
      () => deliveriesOf(w3.webhook_id),
      (l) => l[0]?.status === 'failed',
    );
    assert.equal([failed.last_error, failed.response_status, failed.next_attempt_at], ['HTTP 500', 500, null]);
  } finally {
    service().setClock(null);
  }
  assert.is((await admin('POST', '/accounts/globex/extra-tokens', { amount: 8, reason: 'next' })).status, 200);
  await until(
    'the next one tried',
    () => deliveriesOf(w3.webhook_id),
    (l) => l.length === 2 && l[0].attempts >= 1,
  );
  const removed = await admin('DELETE', `/accounts/globex/webhooks/${w3.webhook_id}?reason=broken`);
  assert.is(removed.status, 200, removed.text);
  assert.is((await events()).find((e) => e.type === 'WebhookRemoved' && e.data.webhookId === w3.webhook_id)?.data.reason, 'broken');
  const log = await until(
    'cancelled',
    () => deliveriesOf(w3.webhook_id),
    (l) => l[0]?.status === 'cancelled',
  );
  assert.equal(
    log.map((d) => d.status),
    ['cancelled', 'failed'],
  );
  const tries = receiver.failedRequests;
  await new Promise((r) => setTimeout(r, 600));
  assert.is(receiver.failedRequests, tries, 'nothing sent to a removed webhook');
  assert.is((await admin('DELETE', `/accounts/globex/webhooks/${w3.webhook_id}`)).status, 404);
  assert.is((await admin('POST', `/webhooks/${w3.webhook_id}/deliveries/${log[1].delivery_id}/replay`)).status, 409, 'removed');
  assert.ok(!(await admin('GET', '/accounts/globex/webhooks')).json.data.some((w: { webhook_id: string }) => w.webhook_id === w3.webhook_id));
});

test('the CLI: webhook add, list, deliveries, replay, remove', async () => {
  const cli = async (args: string[]) => {
    try {
      const { stdout, stderr } = await run(process.execPath, ['bin/tollgate.js', ...args], {
        env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const added = await cli([
    'webhook',
    'add',
    'globex',
    receiver.url('/hooks/cli'),
    '--events',
    'extra_tokens.granted,key.revoked',
    '--thresholds',
    '70,95',
    '--expiring-days',
    '3',
    '--json',
  ]);
  assert.is(added.code, 0, added.stderr);
  const w = JSON.parse(added.stdout);
  receiver.secrets.set(w.webhook_id, w.secret);
  secretsShown.push(w.secret);
  assert.equal([w.events, w.thresholds, w.expiring_days], [['key.revoked', 'extra_tokens.granted'], [70, 95], 3]);
  const human = await cli(['webhook', 'add', 'globex', receiver.url('/hooks/cli2'), '--events', 'plan.expired']);
  assert.is(human.code, 0, human.stderr);
  assert.match(human.stdout, /shown once[\s\S]*whsec_/);
  secretsShown.push(/whsec_\S+/.exec(human.stdout)![0]);
  const listed = await cli(['webhook', 'list', 'globex']);
  assert.ok(listed.stdout.includes(w.webhook_id) && !listed.stdout.includes(w.secret));
  assert.is((await cli(['grant', 'globex', '--amount', '11'])).code, 0);
  await until(
    'the CLI webhook',
    () => receiver.of(w.webhook_id),
    (l) => l.length === 1,
  );
  const log = await until(
    'delivered',
    async () => cli(['webhook', 'deliveries', w.webhook_id, '--status', 'delivered']),
    (r) => r.stdout.includes('delivered'),
  );
  const deliveryId = /dlv_[a-f0-9]{32}/.exec(log.stdout)![0];
  const replayed = await cli(['webhook', 'replay', w.webhook_id, deliveryId]);
  assert.is(replayed.code, 0, replayed.stderr);
  assert.match(replayed.stdout, /queued again/);
  assert.is((await cli(['webhook', 'remove', 'globex', w.webhook_id, '--reason', 'done'])).code, 0);
  const removal = (await events()).find((e) => e.type === 'WebhookRemoved' && e.data.webhookId === w.webhook_id);
  assert.equal([removal?.data.reason, removal?.metadata.actor], ['done', 'admin:operator']);
  const bad = await cli(['webhook', 'add', 'globex', 'https://10.0.0.1/x']);
  assert.ok(bad.code !== 0);
  assert.match(bad.stderr, /400: 'url' points to a private/);
  const badThresholds = await cli(['webhook', 'add', 'globex', receiver.url(), '--thresholds', 'eighty']);
  assert.is(badThresholds.code, 2);
});

test('no secret in the logs; the master secret file is 0600', async () => {
  const masterFile = join(dataDir, 'webhook-secret');
  assert.is(statSync(masterFile).mode & 0o777, 0o600);
  const master = readFileSync(masterFile, 'utf8').trim();
  assert.ok(logs.includes('webhook registered') && logs.includes('webhook delivery failed'), 'the webhook log lines were captured');
  assert.ok(secretsShown.length >= 5);
  for (const secret of [master, ...secretsShown]) assert.not.ok(logs.includes(secret), 'a secret in the logs');
  for (const r of receiver.requests) assert.not.ok(logs.includes(r.signature.split('v1=')[1]), 'a signature in the logs');
});

test('PostgreSQL: one dispatcher at a time across gateways; the other takes over', async () => {
  if (!onPostgres) {
    console.log('  (skipped: needs DATABASE_URL)');
    return;
  }
  const otherDir = mkdtempSync(join(tmpdir(), 'tollgate-webhooks-2-'));
  const second = await startGw({
    dataDir: otherDir,
    webhooks: { ...settingsFor().webhooks, masterSecret: readFileSync(join(dataDir, 'webhook-secret'), 'utf8').trim() },
  });
  const first = gw;
  let firstOpen = true;
  try {
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(service().leading, 'the first still leads');
    assert.not.ok(service(second).leading, 'the second waits');
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount: 201, reason: 'two gateways' }, second)).status, 200);
    await until(
      'delivered by the leader',
      () => receiver.of(W1, 'extra_tokens.granted').filter((r) => r.body.data.amount === 201),
      (l) => l.length === 1,
    );
    await first.close();
    firstOpen = false;
    await until('the second to take over', () => service(second).leading, Boolean, 10_000);
    assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount: 202, reason: 'two gateways' }, second)).status, 200);
    await until(
      'delivered by the new leader',
      () => receiver.of(W1, 'extra_tokens.granted').filter((r) => r.body.data.amount === 202),
      (l) => l.length === 1,
    );
    assert.is(receiver.badSignatures, 0);
  } finally {
    if (firstOpen) await first.close();
    gw = second;
    rmSync(otherDir, { recursive: true, force: true });
  }
});

test.run();
