// Per-key controls and what every reply says it cost. A key's spend limit (per UTC period), model
// list and expiry are decided with the hold on the account's stream: exact numbers in the decider
// with a fake `now` (the limit reached at exactly the limit, the period rolling over UTC day, week
// and month boundaries, open holds counted, a charge capped at the limit, expiry to the
// millisecond), then over HTTP: the 402 key_limit_exceeded naming the limit and its reset, the 403
// for a model outside the key's list, the 401 for an expired key, rotation with a grace period
// and the automatic revocation, every change an event with its actor, bad input writing nothing,
// the CLI, usage per key and as CSV, billed_tokens in every endpoint's usage (streamed and not,
// translated and pass-through), and 500 concurrent calls over two gateways on PostgreSQL that
// never pass a key's limit by a token.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { type AccountState } from '../src/accounts/account-state.ts';
import { keyStanding } from '../src/accounts/key-limits.ts';
import { fold } from '../src/ledger/decider.ts';
import { DomainError } from '../src/ledger/errors.ts';
import type { DomainEvent, KeyControls } from '../src/ledger/events.ts';
import { periodOf, spentInPeriod } from '../src/accounts/balance.ts';
import { requireApiKey } from '../src/keys/auth-middleware.ts';
import type { KeyDirectory, KeyRecord } from '../src/keys/key-directory.ts';
import { ApiError } from '../src/http/errors.ts';
import { countMessageTokens } from '../src/upstream/tokenizer.ts';
import { revokeRotatedKeys } from '../src/keys/key-rotation.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import { startTestGateway, dropSchemas, type TestGateway } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { call, openAccount, startGatewayWithRoutes, userMessage, writeModelsConfig, type Reply, type TestAccount } from './support/http.ts';
import { assertMatches } from './support/openapi.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { ANTHROPIC_DEFAULT_REPLY, startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';
import Anthropic from '@anthropic-ai/sdk';
import { accountState } from '../src/accounts/index.ts';
import { priceModel } from '../src/catalogue/index.ts';
import { issueKey, revokeKey } from '../src/keys/index.ts';

const run = promisify(execFile);

// ---------------------------------------------------------------- the decider, with a fake now

const T0 = new Date('2026-11-18T23:59:00.000Z'); // a Wednesday
const plan = { planId: 'pro', name: 'Pro', quota: 1_000_000, validityDays: 365, requestsPerMinute: 1_000_000, models: ['cx/gen-6-terra', 'alpha-haiku-4.5'] };
const controls = (c: Partial<KeyControls> = {}): KeyControls => ({ name: 'ci', spendLimit: null, models: null, expiresAt: null, ...c });

function apply(state: AccountState, c: AccountCommand): { events: DomainEvent[]; state: AccountState } {
  const events = accountDecider.decide(c, state);
  return { events, state: fold(accountDecider, events, state) };
}

function account(): AccountState {
  let s = apply(accountDecider.initialState(), { type: 'Open', accountId: 'acme', name: 'Acme' }).state;
  s = apply(s, { type: 'Subscribe', accountId: 'acme', plan, now: new Date('2026-11-01T00:00:00Z') }).state;
  return s;
}

const reserve = (holdId: string, amount: number, now: Date, keyId = 'k1', model = 'cx/gen-6-terra', kind: 'chat' | 'image' = 'chat'): AccountCommand => ({
  type: 'Reserve',
  holdId,
  requestId: `r-${holdId}`,
  keyId,
  model,
  kind,
  amount,
  now,
  ttlMs: 60_000,
});
// Multiplier 1 and no completion: a charge of exactly `tokens`.
const settle = (holdId: string, tokens: number): AccountCommand => ({
  type: 'SettleChat',
  holdId,
  multiplierMilli: 1000,
  promptTokens: tokens,
  completionTokens: 0,
  reasoningEffort: null,
  api: 'chat.completions',
  streamed: false,
  aborted: false,
});
const limitOf = (tokens: number, period: 'none' | 'daily' | 'weekly' | 'monthly') => ({
  type: 'SetKeyControls' as const,
  keyId: 'k1',
  controls: controls({ spendLimit: { tokens, period } }),
  now: T0,
});

function refusal(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, DomainError);
    return err as DomainError;
  }
  assert.unreachable('expected a refusal');
  throw new Error('unreachable');
}

test('decider: a daily limit is reached at exactly the limit, open holds count, and the refusal names the limit and its reset', () => {
  let s = apply(account(), limitOf(100, 'daily')).state;
  s = apply(s, reserve('h1', 60, T0)).state;
  // 60 held: 40 left, not 41.
  const over = refusal(() => apply(s, reserve('h2', 41, T0)));
  assert.is(over.code, 'key_limit_exceeded');
  assert.equal(
    { ...over.facts },
    { keyId: 'k1', limit: 100, period: 'daily', spent: 0, reserved: 60, available: 40, needed: 41, resetsAt: '2026-11-19T00:00:00.000Z' },
  );
  s = apply(s, reserve('h2', 40, T0)).state;
  s = apply(s, settle('h1', 60)).state;
  s = apply(s, settle('h2', 40)).state;
  assert.equal(keyStanding(s, 'k1', T0), {
    limit: { tokens: 100, period: 'daily' },
    spent: 100,
    reserved: 0,
    available: 0,
    periodStart: '2026-11-18T00:00:00.000Z',
    resetsAt: '2026-11-19T00:00:00.000Z',
  });
  assert.is(refusal(() => apply(s, reserve('h3', 1, T0))).code, 'key_limit_exceeded', 'exactly at the limit: not one token more');
  // Another key of the same account is not limited by it.
  apply(s, reserve('h3', 1000, T0, 'k2'));
});

test('decider: periods roll over on UTC boundaries (day at 00:00, week on Monday 00:00, month on the 1st)', () => {
  const dayEnd = new Date('2026-11-18T23:59:59.999Z');
  const nextDay = new Date('2026-11-19T00:00:00.000Z');
  let s = apply(account(), limitOf(100, 'daily')).state;
  s = apply(apply(s, reserve('h1', 100, T0)).state, settle('h1', 100)).state;
  assert.is(refusal(() => apply(s, reserve('h2', 1, dayEnd))).code, 'key_limit_exceeded', 'the last millisecond of the day');
  const next = apply(s, reserve('h2', 100, nextDay)).state;
  assert.equal(keyStanding(next, 'k1', nextDay).spent, 0, 'a new day spends from zero');
  assert.is(keyStanding(next, 'k1', nextDay).available, 0, 'its hold counts');

  // Weekly: 2026-11-22 is a Sunday, 2026-11-23 a Monday.
  assert.equal(periodOf('weekly', new Date('2026-11-22T23:59:59.999Z')), { start: new Date('2026-11-16T00:00:00Z'), end: new Date('2026-11-23T00:00:00Z') });
  assert.equal(periodOf('weekly', new Date('2026-11-23T00:00:00.000Z')).start, new Date('2026-11-23T00:00:00Z'));
  let w = apply(account(), limitOf(100, 'weekly')).state;
  w = apply(apply(w, reserve('h1', 70, new Date('2026-11-16T00:00:00Z'))).state, settle('h1', 70)).state; // Monday
  w = apply(apply(w, reserve('h2', 30, new Date('2026-11-22T23:00:00Z'))).state, settle('h2', 30)).state; // Sunday
  const sundayNight = refusal(() => apply(w, reserve('h3', 1, new Date('2026-11-22T23:59:59.999Z'))));
  assert.is(sundayNight.facts.resetsAt, '2026-11-23T00:00:00.000Z', 'resets on Monday 00:00 UTC');
  apply(w, reserve('h3', 100, new Date('2026-11-23T00:00:00.000Z')));

  // Monthly, across a month of 30 days and a year's end.
  assert.equal(periodOf('monthly', new Date('2026-11-30T23:59:59.999Z')).end, new Date('2026-12-01T00:00:00Z'));
  assert.equal(periodOf('monthly', new Date('2026-12-31T12:00:00Z')).end, new Date('2027-01-01T00:00:00Z'));
  let m = apply(account(), limitOf(50, 'monthly')).state;
  m = apply(apply(m, reserve('h1', 50, new Date('2026-11-01T00:00:00Z'))).state, settle('h1', 50)).state;
  assert.is(refusal(() => apply(m, reserve('h2', 1, new Date('2026-11-30T23:59:59.999Z')))).facts.resetsAt, '2026-12-01T00:00:00.000Z');
  apply(m, reserve('h2', 50, new Date('2026-12-01T00:00:00.000Z')));

  // 'none' never resets.
  let n = apply(account(), limitOf(10, 'none')).state;
  n = apply(apply(n, reserve('h1', 10, T0)).state, settle('h1', 10)).state;
  const never = refusal(() => apply(n, reserve('h2', 1, new Date('2027-06-01T00:00:00Z'))));
  assert.is(never.facts.resetsAt, null);
});

test('decider: a charge is counted in the period of its hold and capped at what the limit covers', () => {
  let s = apply(account(), limitOf(100, 'daily')).state;
  s = apply(s, reserve('h1', 30, T0)).state;
  s = apply(s, reserve('h2', 50, T0)).state;
  // The upstream counted more than h1's hold: it may take what the limit leaves besides h2's 50, no more.
  const charged = apply(s, settle('h1', 500));
  assert.is((charged.events[0].data as { billed: number }).billed, 50);
  s = apply(charged.state, settle('h2', 50)).state;
  assert.is(keyStanding(s, 'k1', T0).spent, 100);
  // A hold taken a second before midnight and settled after it counts for its own day.
  let t = apply(account(), limitOf(100, 'daily')).state;
  t = apply(t, reserve('late', 80, new Date('2026-11-18T23:59:59.000Z'))).state;
  t = apply(t, settle('late', 80)).state;
  const spend = t.keySpend.get('k1')!;
  assert.equal([spentInPeriod(spend, 'daily', T0), spentInPeriod(spend, 'daily', new Date('2026-11-19T00:00:01Z'))], [80, 0]);
});

test('decider: model list, expiry to the millisecond, rotation sharing the spend, and invalid controls', () => {
  const expiresAt = '2026-11-19T00:00:00.000Z';
  let s = apply(account(), { type: 'SetKeyControls', keyId: 'k1', controls: controls({ models: ['alpha-haiku-4.5'], expiresAt }), now: T0 }).state;
  assert.is(refusal(() => apply(s, reserve('h1', 10, T0, 'k1', 'cx/gen-6-terra'))).code, 'model_not_enabled');
  s = apply(s, reserve('h1', 10, new Date(Date.parse(expiresAt) - 1), 'k1', 'alpha-haiku-4.5')).state;
  const expired = refusal(() => apply(s, reserve('h2', 10, new Date(expiresAt), 'k1', 'alpha-haiku-4.5')));
  assert.equal([expired.code, expired.facts.expiresAt], ['key_expired', expiresAt]);

  // A key rotated from k1 counts its spend with k1's.
  let r = apply(account(), limitOf(100, 'daily')).state;
  r = apply(apply(r, reserve('h1', 60, T0)).state, settle('h1', 60)).state;
  r = apply(r, {
    type: 'SetKeyControls',
    keyId: 'k1b',
    controls: controls({ spendLimit: { tokens: 100, period: 'daily' } }),
    now: T0,
    rotatedFrom: 'k1',
  }).state;
  assert.is(keyStanding(r, 'k1b', T0).spent, 60);
  assert.is(refusal(() => apply(r, reserve('h2', 41, T0, 'k1b'))).code, 'key_limit_exceeded');
  r = apply(r, reserve('h2', 40, T0, 'k1b')).state;
  assert.is(refusal(() => apply(r, reserve('h3', 1, T0, 'k1'))).code, 'key_limit_exceeded', "the old key sees the new key's hold");

  const base = account();
  const bad: Array<[Partial<KeyControls>, Date?]> = [
    [{ spendLimit: { tokens: -1, period: 'daily' } }],
    [{ spendLimit: { tokens: 1.5, period: 'daily' } }],
    [{ spendLimit: { tokens: 2e15, period: 'daily' } }],
    [{ spendLimit: { tokens: 10, period: 'hourly' as never } }],
    [{ models: ['gpt-9'] }],
    [{ models: [] }],
    [{ expiresAt: '2026-11-18T23:58:59.999Z' }],
    [{ name: '' }],
  ];
  for (const [c] of bad)
    assert.is(refusal(() => apply(base, { type: 'SetKeyControls', keyId: 'k1', controls: controls(c), now: T0 })).code, 'invalid', JSON.stringify(c));
  // The same controls again: nothing to record.
  const once = apply(base, limitOf(100, 'daily')).state;
  assert.equal(apply(once, limitOf(100, 'daily')).events, []);
  assert.equal((apply(once, limitOf(200, 'daily')).events[0].data as { changed: string[] }).changed, ['spend_limit']);
});

test('auth refuses a rotated key exactly at its deadline and an expired key exactly at its expiry, before any later event', async () => {
  const deadline = Date.parse('2026-11-19T10:00:00.000Z');
  const rec: KeyRecord = {
    keyId: 'k1',
    accountId: 'acme',
    status: 'active',
    expiresAt: null,
    rotationDeadline: new Date(deadline).toISOString(),
    revokedAt: null,
  };
  const noticed: string[] = [];
  const directory = {
    lookup: async () => rec,
    noticeRotationDue: (r: KeyRecord) => {
      noticed.push(r.keyId);
    },
  } as unknown as KeyDirectory;
  const auth = requireApiKey(directory);
  const attempt = async (at: number) => {
    const ctx = { get: (h: string) => (h === 'authorization' ? `Bearer sk_svc_${'a'.repeat(43)}` : ''), state: {} } as never;
    const realNow = Date.now;
    Date.now = () => at;
    try {
      await auth(ctx, async () => undefined);
      return 'ok';
    } catch (err) {
      return `${(err as ApiError).status} ${(err as ApiError).code}`;
    } finally {
      Date.now = realNow;
    }
  };
  assert.is(await attempt(deadline - 1), 'ok');
  assert.equal(noticed, []);
  assert.is(await attempt(deadline), '401 invalid_api_key');
  assert.equal(noticed, ['k1'], 'the first refusal asks for the KeyRevoked');
  rec.rotationDeadline = null;
  rec.expiresAt = new Date(deadline).toISOString();
  assert.is(await attempt(deadline - 1), 'ok');
  assert.is(await attempt(deadline), '401 key_expired');
});

// ---------------------------------------------------------------- over HTTP

const ADMIN = 'tg_admin_key_controls_test_01234567';
const MODEL = 'alpha-haiku-4.5'; // simulated, multiplier 1: a call costs its raw tokens
const MAX_TOKENS = 8;
const MESSAGES = userMessage('Key controls check: tell me about toll bridges in winter.');
const BODY = { model: MODEL, messages: MESSAGES, max_tokens: MAX_TOKENS };
/** A call's hold and charge: the prompt plus the max_tokens the simulated reply always fills. */
const COST = countMessageTokens(MESSAGES as never) + MAX_TOKENS;

let gw: TestGateway;

async function admin(method: string, path: string, body?: unknown, actor = 'alice'): Promise<Reply> {
  return call(gw, `/admin/v1${path}`, { method, body, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': actor } });
}
const chatCall = (key: string, body: Record<string, unknown> = BODY) => call(gw, '/v1/chat/completions', { key, body });
const eventsOf = async (g: { ledger: TestGateway['ledger'] } = gw): Promise<StoredEvent[]> => g.ledger.events.readAll(0, 1_000_000);
const keyEvents = async (keyId: string) => (await eventsOf()).filter((e) => e.data.keyId === keyId && e.type.startsWith('Key'));

// The sweeper stays out of the way: the tests look at a rotated key before anything revokes it.
test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false, sweepIntervalMs: 3_600_000 });
});
test.after(async () => {
  await gw?.stop();
});

test('spend limit over HTTP: two calls fit exactly, the third is a 402 key_limit_exceeded naming the limit and its reset; the listing shows the spend', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  const set = await admin('PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 2 * COST, period: 'daily' } });
  assert.is(set.status, 200, set.text);
  assert.equal([set.json.spend_limit, set.json.changed], [{ tokens: 2 * COST, period: 'daily' }, ['spend_limit']]);
  const [controlsEvent] = (await keyEvents(acct.keyId)).filter((e) => e.type === 'KeyControlsSet');
  assert.is(controlsEvent.stream, `account-${acct.accountId}`, 'decided on the account stream');
  assert.is(controlsEvent.metadata.actor, 'admin:alice');

  for (let i = 0; i < 2; i++) {
    const r = await chatCall(acct.key);
    assert.is(r.status, 200, r.text);
    assert.is(r.json.usage.billed_tokens, COST);
  }
  const refused = await chatCall(acct.key);
  assert.is(refused.status, 402);
  assert.is(refused.json.error.code, 'key_limit_exceeded');
  assert.is(refused.json.error.type, 'insufficient_quota');
  const midnight = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1)).toISOString();
  assert.ok(refused.json.error.message.includes(`spend limit of ${2 * COST} billed tokens per day (UTC)`), refused.json.error.message);
  assert.ok(refused.json.error.message.includes(`resets at ${midnight}`), refused.json.error.message);
  // An image (a fixed, larger hold) is refused the same way; the account itself still has tokens.
  const image = await call(gw, '/v1/images/generations', { key: acct.key, body: { model: MODEL, prompt: 'a bridge' } });
  assert.equal([image.status, image.json.error.code], [402, 'key_limit_exceeded']);
  const other = await issueKey(gw.ledger, acct.accountId, 'other', 'admin:test');
  assert.is((await chatCall(other.secret)).status, 200, 'another key of the account is not limited');

  const list = await admin('GET', `/accounts/${acct.accountId}/keys`);
  const row = list.json.data.find((k: { key_id: string }) => k.key_id === acct.keyId);
  assert.equal(row.spend, {
    period: 'daily',
    period_start: new Date(Date.parse(midnight) - 86_400_000).toISOString(),
    resets_at: midnight,
    spent: 2 * COST,
    reserved: 0,
    remaining: 0,
  });
  assert.equal([row.spend_limit, row.models, row.expires_at, row.status], [{ tokens: 2 * COST, period: 'daily' }, null, null, 'active']);
  const charges = (await eventsOf()).filter((e) => e.type === 'ChatCharged' && e.data.keyId === acct.keyId);
  assert.is(
    charges.reduce((n, e) => n + Number(e.data.billed), 0),
    2 * COST,
    'the events: the limit, not a token more',
  );

  // Raising the limit lets the key go on; removing it lifts it.
  assert.is((await admin('PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 3 * COST, period: 'daily' } })).status, 200);
  assert.is((await chatCall(acct.key)).status, 200);
  assert.is((await chatCall(acct.key)).status, 402);
  assert.is((await admin('PATCH', `/keys/${acct.keyId}`, { spend_limit: null })).json.spend_limit, null);
  assert.is((await chatCall(acct.key)).status, 200);
});

test("model list: a model outside the key's list is a 403 model_not_found like one outside the plan; /v1/models lists the key's", async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  // An alias is stored as its model id.
  const set = await admin('PATCH', `/accounts/${acct.accountId}/keys/${acct.keyId}`, { models: [MODEL] });
  assert.is(set.status, 200, set.text);
  assert.equal(set.json.models, [MODEL]);
  const refused = await chatCall(acct.key, { ...BODY, model: 'cx/gen-6-terra' });
  assert.is(refused.status, 403);
  assert.equal({ ...refused.json.error, message: undefined }, { message: undefined, type: 'invalid_request_error', param: 'model', code: 'model_not_found' });
  const outsidePlan = await chatCall(acct.key, { ...BODY, model: 'cx/gen-6-luna' });
  assert.is(
    outsidePlan.json.error.message.replace('cx/gen-6-luna', 'X'),
    refused.json.error.message.replace('cx/gen-6-terra', 'X'),
    'the same words as the plan check',
  );
  assert.is((await chatCall(acct.key)).status, 200);
  const models = await call(gw, '/v1/models', { key: acct.key });
  assert.equal(
    models.json.data.map((m: { id: string }) => m.id),
    [MODEL],
  );
  // The Messages dialect says it in Anthropic's shape, with the same status.
  const messages = await call(gw, '/v1/messages', {
    key: acct.key,
    body: { model: 'cx/gen-6-terra', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] },
  });
  assert.equal([messages.status, messages.json.error.type], [403, 'permission_error']);
});

test('expiry: the key works until expires_at, then a 401 key_expired that says so', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const expiresAt = new Date(Date.now() + 1500).toISOString();
  const set = await admin('PATCH', `/keys/${acct.keyId}`, { expires_at: expiresAt, name: 'short-lived' });
  assert.is(set.status, 200, set.text);
  assert.equal(set.json.changed, ['name', 'expires_at']);
  assert.is((await chatCall(acct.key)).status, 200);
  await new Promise((r) => setTimeout(r, Date.parse(expiresAt) - Date.now() + 20));
  const refused = await chatCall(acct.key);
  assert.is(refused.status, 401);
  assert.is(refused.json.error.code, 'key_expired');
  assert.is(refused.json.error.message, `This API key expired at ${expiresAt}. Ask the account's operator for a new key.`);
  const list = await admin('GET', `/accounts/${acct.accountId}/keys`);
  assert.equal(
    list.json.data.map((k: Record<string, unknown>) => [k.name, k.expires_at, k.expired]),
    [['short-lived', expiresAt, true]],
  );
});

test('rotation: a new key with the same controls and spend; the old one works during the grace, then is refused and revoked by itself', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  await admin('PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 5 * COST, period: 'weekly' }, models: [MODEL], name: 'deploy' });
  assert.is((await chatCall(acct.key)).status, 200);
  const rotated = await admin('POST', `/keys/${acct.keyId}/rotate`, { grace_seconds: 1 });
  assert.is(rotated.status, 201, rotated.text);
  const fresh = rotated.json;
  assert.match(fresh.key, /^sk_svc_/);
  assert.equal([fresh.name, fresh.spend_limit, fresh.models, fresh.replaces.key_id], ['deploy', { tokens: 5 * COST, period: 'weekly' }, [MODEL], acct.keyId]);
  // Both work during the grace period, against one budget.
  assert.is((await chatCall(fresh.key)).status, 200);
  assert.is((await chatCall(acct.key)).status, 200);
  assert.is((await chatCall(fresh.key, { ...BODY, model: 'cx/gen-6-terra' })).status, 403, 'the same model list');
  const list = await admin('GET', `/accounts/${acct.accountId}/keys`);
  const byId = new Map(list.json.data.map((k: { key_id: string }) => [k.key_id, k]));
  assert.is((byId.get(fresh.key_id) as { spend: { spent: number } }).spend.spent, 3 * COST, "the new key counts the old one's spend");
  assert.equal((byId.get(acct.keyId) as { rotation: unknown }).rotation, { replaced_by: fresh.key_id, revoke_at: fresh.replaces.revoke_at });
  // A key rotated once cannot be rotated again.
  assert.is((await admin('POST', `/keys/${acct.keyId}/rotate`, { grace_seconds: 5 })).status, 409);

  await new Promise((r) => setTimeout(r, Date.parse(fresh.replaces.revoke_at) - Date.now() + 20));
  assert.equal(
    (await keyEvents(acct.keyId)).map((e) => e.type),
    ['KeyIssued', 'KeyControlsSet', 'KeyRotated'],
    'no KeyRevoked yet',
  );
  const refused = await chatCall(acct.key);
  assert.is(refused.status, 401, 'refused at the deadline, before any KeyRevoked');
  assert.match(refused.json.error.message, /rotated and stopped working at/);
  assert.is((await chatCall(fresh.key)).status, 200);
  // The process that refused it appends the KeyRevoked.
  let revoked: StoredEvent | undefined;
  for (const until = Date.now() + 5000; !revoked && Date.now() < until; await new Promise((r) => setTimeout(r, 25)))
    revoked = (await keyEvents(acct.keyId)).find((e) => e.type === 'KeyRevoked');
  assert.equal([revoked?.data.reason, revoked?.metadata.actor], ['rotated', 'system:rotation']);
  // Every later refusal says the same: rotated, and when it stopped working.
  for (let i = 0; i < 3; i++) {
    const again = await chatCall(acct.key);
    assert.is(again.status, 401);
    assert.is(again.json.error.message, refused.json.error.message, 'the same refusal once KeyRevoked is recorded');
  }
  assert.ok(refused.json.error.message.includes(fresh.replaces.revoke_at), refused.json.error.message);
  const rotatedEvent = (await keyEvents(acct.keyId)).find((e) => e.type === 'KeyRotated')!;
  assert.is(rotatedEvent.metadata.actor, 'admin:alice');
  const copied = (await keyEvents(fresh.key_id)).find((e) => e.type === 'KeyControlsSet')!;
  assert.equal([copied.data.rotatedFrom, copied.metadata.actor], [acct.keyId, 'admin:alice']);

  // The sweeper's way: nobody uses the old key after its deadline.
  const other = await openAccount(gw, { quota: 1_000_000 });
  const second = await admin('POST', `/keys/${other.keyId}/rotate`, { grace_seconds: 1 });
  await new Promise((r) => setTimeout(r, Date.parse(second.json.replaces.revoke_at) - Date.now() + 20));
  await gw.ledger.caughtUp();
  assert.is(await revokeRotatedKeys(gw.ledger), 1);
  assert.equal(
    (await keyEvents(other.keyId)).map((e) => e.type),
    ['KeyIssued', 'KeyRotated', 'KeyRevoked'],
  );
  // No grace: the old key is revoked at once.
  const third = await openAccount(gw, { quota: 1_000_000 });
  assert.is((await admin('POST', `/keys/${third.keyId}/rotate`, {})).status, 201);
  const thirdRefused = await chatCall(third.key);
  assert.is(thirdRefused.status, 401);
  assert.match(thirdRefused.json.error.message, /rotated and stopped working at \d{4}-/);
  assert.equal((await keyEvents(third.keyId)).map((e) => e.type).at(-1), 'KeyRevoked');
  // A key revoked by an operator says so, and when.
  const fourth = await openAccount(gw, { quota: 1_000_000 });
  assert.is((await admin('POST', `/keys/${fourth.keyId}/revoke`, { reason: 'leaked' })).status, 200);
  const revokedAt = (await keyEvents(fourth.keyId)).find((e) => e.type === 'KeyRevoked')!.timestamp;
  for (let i = 0; i < 2; i++) {
    const r = await chatCall(fourth.key);
    assert.is(r.status, 401);
    assert.is(r.json.error.message, `This API key was revoked at ${revokedAt}: use another key of the account.`);
  }
});

test('bad input is a clear 400 or 404 and writes nothing', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: [MODEL] });
  const stranger = await openAccount(gw, { quota: 1_000_000 });
  const cases: Array<[string, string, unknown, number, string]> = [
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: -1, period: 'daily' } }, 400, 'spend_limit.tokens'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 1_000_000_000_000_001, period: 'daily' } }, 400, 'spend_limit.tokens'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 10.5, period: 'daily' } }, 400, 'spend_limit.tokens'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 10, period: 'hourly' } }, 400, 'spend_limit.period'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: { tokens: 10 } }, 400, 'spend_limit.period'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limit: 10 }, 400, 'spend_limit'],
    ['PATCH', `/keys/${acct.keyId}`, { models: ['no-such-model'] }, 400, 'models'],
    ['PATCH', `/keys/${acct.keyId}`, { models: ['cx/gen-6-terra'] }, 400, 'models'], // priced, not in this plan
    ['PATCH', `/keys/${acct.keyId}`, { models: [] }, 400, 'models'],
    ['PATCH', `/keys/${acct.keyId}`, { expires_at: new Date(Date.now() - 1000).toISOString() }, 400, 'expires_at'],
    ['PATCH', `/keys/${acct.keyId}`, { expires_at: 'tomorrow' }, 400, 'expires_at'],
    ['PATCH', `/keys/${acct.keyId}`, { name: '' }, 400, 'name'],
    ['PATCH', `/keys/${acct.keyId}`, { spend_limt: { tokens: 1, period: 'daily' } }, 400, 'spend_limt'],
    ['PATCH', `/keys/${acct.keyId}`, [1, 2], 400, ''],
    ['PATCH', '/keys/key_doesnotexist', { name: 'x' }, 404, 'key_id'],
    ['PATCH', `/accounts/${stranger.accountId}/keys/${acct.keyId}`, { name: 'x' }, 404, 'key_id'],
    ['POST', `/keys/${acct.keyId}/rotate`, { grace_seconds: -1 }, 400, 'grace_seconds'],
    ['POST', `/keys/${acct.keyId}/rotate`, { grace_seconds: 90 * 86_400 + 1 }, 400, 'grace_seconds'],
    ['POST', `/keys/${acct.keyId}/rotate`, { grace: 10 }, 400, 'grace'],
    ['POST', '/keys/key_doesnotexist/rotate', { grace_seconds: 10 }, 404, 'key_id'],
  ];
  await gw.ledger.caughtUp();
  const before = await gw.ledger.events.headPosition();
  for (const [method, path, body, status, param] of cases) {
    const r = await admin(method, path, body);
    assert.is(r.status, status, `${method} ${path} ${JSON.stringify(body)}: ${r.text}`);
    if (param) assert.is(r.json.error.param, param, `${JSON.stringify(body)}: ${r.text}`);
    assert.ok(r.json.error.message.length > 10);
  }
  assert.is(await gw.ledger.events.headPosition(), before, 'nothing was written');
  // A revoked key's controls cannot change.
  await revokeKey(gw.ledger, acct.keyId, 'test', 'admin:test');
  assert.is((await admin('PATCH', `/keys/${acct.keyId}`, { name: 'x' })).status, 409);
});

test('CLI: tollgate key set and key rotate', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  const cli = async (args: string[]) => {
    try {
      const { stdout } = await run(process.execPath, ['bin/tollgate.js', ...args, '--actor', 'bob'], {
        env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
      });
      return { code: 0, out: stdout };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, out: e.stdout + e.stderr };
    }
  };
  const expires = new Date(Date.now() + 86_400_000).toISOString();
  const set = await cli([
    'key',
    'set',
    acct.keyId,
    '--limit',
    '5000',
    '--period',
    'daily',
    '--models',
    `${MODEL},cx/gen-6-terra`,
    '--expires',
    expires,
    '--name',
    'N',
  ]);
  assert.is(set.code, 0, set.out);
  assert.match(set.out, /changed name, spend_limit, models, expires_at/);
  assert.match(set.out, /spend limit: 5000 billed tokens daily \(UTC\)/);
  const [e] = (await keyEvents(acct.keyId)).filter((x) => x.type === 'KeyControlsSet');
  assert.equal(
    [e.data.spendLimit, e.data.models, e.data.expiresAt, e.data.name, e.metadata.actor],
    [{ tokens: 5000, period: 'daily' }, [MODEL, 'cx/gen-6-terra'], expires, 'N', 'admin:bob'],
  );
  const bad = await cli(['key', 'set', acct.keyId, '--limit', '5000']);
  assert.is(bad.code, 2);
  assert.match(bad.out, /--period/);
  const refused = await cli(['key', 'set', acct.keyId, '--limit', '10', '--period', 'fortnightly']);
  assert.is(refused.code, 1);
  assert.match(refused.out, /400: 'spend_limit.period' must be one of none, daily, weekly, monthly/);
  const rotated = await cli(['key', 'rotate', acct.keyId, '--grace', '3600']);
  assert.is(rotated.code, 0, rotated.out);
  assert.match(rotated.out, new RegExp(`replaces ${acct.keyId}, which works until`));
  const secret = /(sk_svc_[A-Za-z0-9]+)/.exec(rotated.out)![1];
  assert.is((await chatCall(secret)).status, 200);
  assert.is((await chatCall(acct.key)).status, 200, 'the old key works during the grace period');
});

test('GET /v1/usage?group_by=key and ?format=csv', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const second = await issueKey(gw.ledger, acct.accountId, 'batch, "nightly"', 'admin:test');
  for (const key of [acct.key, acct.key, second.secret]) assert.is((await chatCall(key)).status, 200);
  await gw.ledger.caughtUp();
  const r = await call(gw, '/v1/usage?group_by=key&range=7d&daily=true', { key: acct.key });
  assert.is(r.status, 200, r.text);
  assert.is(r.json.group_by, 'key');
  assert.equal(
    r.json.keys.map((k: Record<string, unknown>) => [k.key_id, k.name, k.requests, k.tokens, k.billed]),
    [
      [acct.keyId, 'test key', 2, 2 * COST, 2 * COST],
      [second.keyId, 'batch, "nightly"', 1, COST, COST],
    ],
  );
  assert.is(r.json.totals.billed, 3 * COST);
  const today = r.json.daily.at(-1);
  assert.equal(
    today.keys.map((k: Record<string, unknown>) => [k.key_id, k.requests]),
    [
      [acct.keyId, 2],
      [second.keyId, 1],
    ],
  );
  // A renamed key shows its new name.
  await admin('PATCH', `/keys/${second.keyId}`, { name: '=cmd' });
  const renamed = await call(gw, '/v1/usage?group_by=key', { key: acct.key });
  assert.is(renamed.json.keys[1].name, '=cmd');

  const csv = await call(gw, '/v1/usage?format=csv&group_by=key&range=7d', { key: acct.key });
  assert.is(csv.status, 200);
  assert.match(csv.headers.get('content-type')!, /^text\/csv/);
  assert.match(csv.headers.get('content-disposition')!, /attachment; filename="usage-/);
  const day = new Date().toISOString().slice(0, 10);
  assert.equal(csv.text.split('\r\n'), [
    'date,key_id,key_name,requests,prompt_tokens,completion_tokens,images,billed_tokens,adjustment_tokens,corrected_billed_tokens',
    `${day},${acct.keyId},test key,2,${2 * (COST - MAX_TOKENS)},${2 * MAX_TOKENS},0,${2 * COST},0,${2 * COST}`,
    `${day},${second.keyId},'=cmd,1,${COST - MAX_TOKENS},${MAX_TOKENS},0,${COST},0,${COST}`,
    '',
  ]);
  const byModel = await call(gw, '/v1/usage?format=csv', { key: acct.key });
  assert.equal(byModel.text.split('\r\n'), [
    'date,model,requests,prompt_tokens,completion_tokens,cached_tokens,cache_write_tokens,reasoning_tokens,images,billed_tokens,adjustment_tokens,corrected_billed_tokens',
    `${day},${MODEL},3,${3 * (COST - MAX_TOKENS)},${3 * MAX_TOKENS},0,0,0,0,${3 * COST},0,${3 * COST}`,
    '',
  ]);
  for (const q of ['group_by=day', 'format=xml', 'group_by=']) assert.is((await call(gw, `/v1/usage?${q}`, { key: acct.key })).status, 400, q);

  // A correction's adjustments count for the key of the charge they adjust.
  await new Promise((r) => setTimeout(r, 5));
  const corrected = await admin('POST', '/corrections', {
    model: MODEL,
    from: new Date(Date.now() - 3_600_000).toISOString(),
    to: new Date().toISOString(),
    multiplier: 2,
    reason: 'test',
  });
  assert.is(corrected.status, 200, corrected.text);
  const adjustments = (await eventsOf()).filter((e) => e.type === 'ChargeAdjusted' && e.data.accountId === acct.accountId);
  assert.equal(adjustments.map((e) => e.data.keyId).sort(), [acct.keyId, acct.keyId, second.keyId].sort());
  const net = await call(gw, '/v1/usage?group_by=key&view=corrected', { key: acct.key });
  assert.equal(
    net.json.keys.map((k: Record<string, unknown>) => [k.key_id, k.billed_tokens, k.adjustment_tokens, k.billed]),
    [
      [acct.keyId, 2 * COST, 2 * COST, 4 * COST],
      [second.keyId, COST, COST, 2 * COST],
    ],
  );
});

/** Every SSE frame of a reply: its event name (if any) and its data, parsed unless [DONE]. */
function frames(text: string): Array<{ event?: string; data: any }> {
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      return { event, data: data === '[DONE]' ? data : JSON.parse(data) };
    });
}

const billedHeader = (r: Reply) => Number(r.headers.get('x-tollgate-billed-tokens'));

/** A stream's headers leave before its charge: what is left then, never a billed figure (the stream says it). */
function assertStreamHeaders(r: Reply): void {
  assert.is(r.status, 200, r.text);
  assert.is(r.headers.get('x-tollgate-billed-tokens'), null, 'no billed header on a stream');
  assert.ok(Number(r.headers.get('x-tollgate-remaining-tokens')) > 0, 'the remaining tokens when it began');
}

async function chargedFor(g: TestGateway, accountId: string): Promise<number[]> {
  await g.ledger.caughtUp();
  return (await g.ledger.events.readAll(0, 1_000_000))
    .filter((e) => (e.type === 'ChatCharged' || e.type === 'ImageCharged') && e.data.accountId === accountId)
    .map((e) => Number(e.data.billed));
}

/**
 * Calls each endpoint streamed and not; returns the billed_tokens each body says, in order. The
 * gateway's own bodies are checked against OpenAI's schemas (`schemas`); an upstream double's
 * pass-through bodies are the double's.
 */
async function billedInBodies(
  g: TestGateway,
  acct: TestAccount,
  models: { chat: string; messages: string; responses: string },
  schemas: boolean,
): Promise<number[]> {
  const out: number[] = [];
  const post = (path: string, body: unknown) => call(g, path, { key: acct.key, body });
  const chat = await post('/v1/chat/completions', { model: models.chat, messages: MESSAGES, max_tokens: 30 });
  assert.is(chat.status, 200, chat.text);
  assert.is(chat.json.usage.billed_tokens, billedHeader(chat));
  if (schemas) assertMatches('CreateChatCompletionResponse', chat.json);
  out.push(chat.json.usage.billed_tokens);
  const chatStream = await post('/v1/chat/completions', {
    model: models.chat,
    messages: MESSAGES,
    max_tokens: 30,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = frames(chatStream.text);
  assert.is(chunks.at(-1)!.data, '[DONE]');
  const usageChunk = chunks.filter((c) => c.data !== '[DONE]' && c.data.usage).at(-1)!.data;
  assert.ok(usageChunk.usage.billed_tokens > 0, chatStream.text);
  assertStreamHeaders(chatStream);
  out.push(usageChunk.usage.billed_tokens);
  // Without include_usage: no usage anywhere, a top-level billed_tokens on the final chunk only.
  const bareStream = await post('/v1/chat/completions', { model: models.chat, messages: MESSAGES, max_tokens: 30, stream: true });
  const bare = frames(bareStream.text);
  assert.is(bare.at(-1)!.data, '[DONE]');
  const bareChunks = bare.slice(0, -1).map((c) => c.data);
  assert.not.ok(
    bareChunks.some((c) => 'usage' in c),
    bareStream.text,
  );
  const finals = bareChunks.filter((c) => c.choices.some((choice: { finish_reason: unknown }) => choice.finish_reason != null));
  assert.is(finals.length, 1, bareStream.text);
  assert.is(finals[0], bareChunks.at(-1), 'the chunk with the finish_reason is the last');
  assert.ok(finals[0].billed_tokens > 0, bareStream.text);
  assert.equal(
    bareChunks.filter((c) => 'billed_tokens' in c),
    finals,
    'no other chunk says it',
  );
  if (schemas) for (const c of bareChunks) assertMatches('CreateChatCompletionStreamResponse', c);
  assertStreamHeaders(bareStream);
  out.push(finals[0].billed_tokens);

  const msg = await post('/v1/messages', { model: models.messages, max_tokens: 30, messages: [{ role: 'user', content: 'Tell me about toll bridges.' }] });
  assert.is(msg.status, 200, msg.text);
  assert.is(msg.json.usage.billed_tokens, billedHeader(msg));
  out.push(msg.json.usage.billed_tokens);
  const msgStream = await post('/v1/messages', {
    model: models.messages,
    max_tokens: 30,
    stream: true,
    messages: [{ role: 'user', content: 'Tell me about toll bridges.' }],
  });
  const delta = frames(msgStream.text).find((f) => f.event === 'message_delta')!;
  assert.ok(delta.data.usage.billed_tokens > 0, msgStream.text);
  assertStreamHeaders(msgStream);
  out.push(delta.data.usage.billed_tokens);

  const resp = await post('/v1/responses', { model: models.responses, input: 'Tell me about toll bridges.', max_output_tokens: 30 });
  assert.is(resp.status, 200, resp.text);
  assert.is(resp.json.usage.billed_tokens, billedHeader(resp));
  if (schemas) assertMatches('Response', resp.json);
  out.push(resp.json.usage.billed_tokens);
  const respStream = await post('/v1/responses', { model: models.responses, input: 'Tell me about toll bridges.', max_output_tokens: 30, stream: true });
  const completed = frames(respStream.text).find((f) => f.event === 'response.completed' || f.event === 'response.incomplete')!;
  assert.ok(completed.data.response.usage.billed_tokens > 0, respStream.text);
  assertStreamHeaders(respStream);
  out.push(completed.data.response.usage.billed_tokens);
  return out;
}

test('cost in every body: chat, Messages, Responses (streamed and not) and images, translated from the simulated upstream', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const billed = await billedInBodies(gw, acct, { chat: 'cx/gen-6-terra', messages: 'cx/gen-6-terra', responses: 'cx/gen-6-terra' }, true);
  const image = await call(gw, '/v1/images/generations', { key: acct.key, body: { model: 'cx/gen-6-terra', prompt: 'a toll gate at dawn' } });
  assert.is(image.status, 200);
  assert.is(image.json.billed_tokens, billedHeader(image));
  assert.is(image.json.billed_tokens, 56_250, '45000 tokens at 1.25');
  assert.not.ok('usage' in image.json, 'no usage object it could not fill truthfully');
  assertMatches('ImagesResponse', image.json);
  assert.equal([...billed, image.json.billed_tokens], await chargedFor(gw, acct.accountId), 'each body says what the ledger charged');
});

test('cost in every body: pass-through chat, Responses (OpenAI) and Messages (Anthropic), streamed and not; and translated through them', async () => {
  let openai: OpenAIDouble | undefined;
  let anthropic: AnthropicDouble | undefined;
  let pg: TestGateway | undefined;
  try {
    openai = await startOpenAIDouble();
    anthropic = await startAnthropicDouble();
    const env = { TG_KC_OPENAI_KEY: 'test-openai-key', TG_KC_ANTHROPIC_KEY: 'test-anthropic-key' };
    pg = await startGatewayWithRoutes(
      {
        kcGpt: { type: 'openai', baseURL: `${openai.url}/v1`, apiKeyEnv: 'TG_KC_OPENAI_KEY', timeoutMs: 5000 },
        kcClaude: { type: 'anthropic', baseURL: anthropic.url, apiKeyEnv: 'TG_KC_ANTHROPIC_KEY', timeoutMs: 5000 },
      },
      {
        'kc/gpt': { provider: 'kcGpt', upstreamModel: 'gpt-up-1', multiplierMilli: 1250 },
        'kc/claude': { provider: 'kcClaude', upstreamModel: 'claude-up-1', multiplierMilli: 1500 },
      },
      { env },
    );
    const acct = await openAccount(pg, { quota: 10_000_000 });
    // Pass-through: each dialect to the upstream that speaks it.
    const native = await billedInBodies(pg, acct, { chat: 'kc/gpt', messages: 'kc/claude', responses: 'kc/gpt' }, false);
    // The upstream's bodies are kept but for the added field.
    const raw = await call(pg, '/v1/chat/completions', { key: acct.key, body: { model: 'kc/gpt', messages: MESSAGES, max_tokens: 30 } });
    assert.equal(Object.keys(raw.json.usage).at(-1), 'billed_tokens');
    // Translated: each dialect to the upstream that does not.
    const translated = await billedInBodies(pg, acct, { chat: 'kc/claude', messages: 'kc/gpt', responses: 'kc/claude' }, true);
    const charged = await chargedFor(pg, acct.accountId);
    assert.equal(charged, [...native, raw.json.usage.billed_tokens, ...translated]);
  } finally {
    await pg?.stop();
    await openai?.close();
    await anthropic?.close();
  }
});

test("cost in a pass-through Messages stream whose upstream sends no message_delta: a message_delta of the gateway's carries it, as the official SDK reads it", async () => {
  let anthropic: AnthropicDouble | undefined;
  let g: TestGateway | undefined;
  try {
    anthropic = await startAnthropicDouble({ omitMessageDelta: true });
    g = await startGatewayWithRoutes(
      { kcBare: { type: 'anthropic', baseURL: anthropic.url, apiKeyEnv: 'TG_KC_BARE_KEY', timeoutMs: 5000 } },
      { 'kc/bare': { provider: 'kcBare', upstreamModel: 'claude-up-1', multiplierMilli: 1500 } },
      { env: { TG_KC_BARE_KEY: 'test-anthropic-key' } },
    );
    const acct = await openAccount(g, { quota: 10_000_000 });
    const messages = [{ role: 'user' as const, content: 'Tell me about toll bridges.' }];
    const raw = await call(g, '/v1/messages', { key: acct.key, body: { model: 'kc/bare', max_tokens: 30, stream: true, messages } });
    assertStreamHeaders(raw);
    const events = frames(raw.text);
    for (const f of events) assert.is(f.data.type, f.event, 'the event name is the data type');
    assert.equal(
      events.slice(-2).map((f) => f.event),
      ['message_delta', 'message_stop'],
    );
    const deltas = events.filter((f) => f.event === 'message_delta');
    assert.is(deltas.length, 1, 'one message_delta: the one the gateway added');
    const start = events[0].data.message;
    // Anthropic's usage fields (cumulative, as message_start reported them), then what it cost.
    assert.equal(deltas[0].data.usage, {
      input_tokens: start.usage.input_tokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: start.usage.output_tokens,
      billed_tokens: Math.ceil(((start.usage.input_tokens + start.usage.output_tokens) * 1500) / 1000),
    });

    // @anthropic-ai/sdk's stream parser takes it: the same text, usage and cost.
    const client = new Anthropic({ apiKey: acct.key, baseURL: g.url, maxRetries: 0 });
    const stream = client.messages.stream({ model: 'kc/bare', max_tokens: 30, messages });
    const seen: Record<string, unknown>[] = [];
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_delta') seen.push(structuredClone(e.usage) as unknown as Record<string, unknown>);
    });
    const final = await stream.finalMessage();
    assert.is((final.content[0] as Anthropic.TextBlock).text, ANTHROPIC_DEFAULT_REPLY);
    assert.equal([final.usage.input_tokens, final.usage.output_tokens], [start.usage.input_tokens, start.usage.output_tokens]);
    assert.is(seen.length, 1);
    assert.equal(await chargedFor(g, acct.accountId), [deltas[0].data.usage.billed_tokens, seen[0].billed_tokens], 'each stream says what the ledger charged');
  } finally {
    await g?.stop();
    await anthropic?.close();
  }
});

/** What an SDK call threw (uvu must not see errors thrown inside a catch block). */
async function thrownBy(fn: () => Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await fn();
  } catch (err) {
    return err as InstanceType<typeof Anthropic.APIError>;
  }
  throw new Error('expected the call to fail');
}

test("Messages errors keep Anthropic's shape and carry the gateway's code in error.details.error_code, where @anthropic-ai/sdk reads it", async () => {
  const body = { model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user' as const, content: 'hi' }] };
  // An expiry must be in the future when set: this key's passes while the others are set up.
  const expired = await openAccount(gw, { quota: 1_000_000 });
  const expiresAt = new Date(Date.now() + 1000).toISOString();
  assert.is((await admin('PATCH', `/keys/${expired.keyId}`, { expires_at: expiresAt })).status, 200);
  const limited = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  assert.is((await admin('PATCH', `/keys/${limited.keyId}`, { spend_limit: { tokens: 0, period: 'daily' } })).status, 200);
  const poor = await openAccount(gw, { quota: 1 });
  const narrow = await openAccount(gw, { quota: 1_000_000, models: [MODEL, 'cx/gen-6-terra'] });
  assert.is((await admin('PATCH', `/keys/${narrow.keyId}`, { models: [MODEL] })).status, 200);
  await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(expiresAt) - Date.now() + 20)));

  const cases: [string, Record<string, unknown>, number, string, string][] = [
    [limited.key, body, 402, 'billing_error', 'key_limit_exceeded'],
    [poor.key, body, 402, 'billing_error', 'insufficient_quota'],
    [expired.key, body, 401, 'authentication_error', 'key_expired'],
    [`sk_svc_${'x'.repeat(43)}`, body, 401, 'authentication_error', 'invalid_api_key'],
    [narrow.key, { ...body, model: 'cx/gen-6-terra' }, 403, 'permission_error', 'model_not_found'],
  ];
  for (const [key, b, status, type, code] of cases) {
    const r = await call(gw, '/v1/messages', { key, body: b });
    assert.is(r.status, status, r.text);
    assert.equal(Object.keys(r.json), ['type', 'error', 'request_id']);
    assert.is(r.json.type, 'error');
    assert.equal({ ...r.json.error, message: undefined }, { type, message: undefined, details: { error_code: code } }, code);
    // The same words as the OpenAI shape's error with that code.
    const openai = await call(gw, '/v1/chat/completions', { key, body: { model: b.model, messages: b.messages, max_tokens: MAX_TOKENS } });
    assert.equal([openai.status, openai.json.error.code], [status, code]);
    assert.is(r.json.error.message, openai.json.error.message, code);

    const client = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const err = await thrownBy(() => client.messages.create(b as unknown as Anthropic.MessageCreateParamsNonStreaming));
    assert.instance(err, Anthropic.APIError);
    assert.equal([err.status, err.type, err.errorCode], [status, type, code]);
  }
  assert.instance(
    await thrownBy(() => new Anthropic({ apiKey: limited.key, baseURL: gw.url, maxRetries: 0 }).messages.create(body)),
    Anthropic.PaymentRequiredError,
  );
});

test('the read models (keys with controls and rotations, usage per key) equal a rebuild from zero', async () => {
  await gw.ledger.caughtUp();
  const r = await admin('POST', '/verify');
  assert.is(r.status, 200, r.text);
  assert.equal([r.json.readModelDifferences, r.json.chainProblems, r.json.ok], [[], [], true]);
});

// ---------------------------------------------------------------- two gateways on PostgreSQL

const CALLS = 500;
const FIT = 100;
const url = process.env.DATABASE_URL;
if (!url) {
  test(`${CALLS} concurrent calls over two gateways against one key's limit: SKIPPED on PGlite (needs DATABASE_URL)`, () => {
    console.log('  two-gateway key limit: SKIPPED (set DATABASE_URL to run it on PostgreSQL)');
  });
} else {
  test(`${CALLS} concurrent calls over two gateways on one schema against one key whose limit covers ${FIT}: never a token past the limit`, async () => {
    const schema = uniqueSchema('kc');
    const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
    delete config.$schema;
    // The same simulated model, answering at 20 ms a token: the holds of both gateways are open at once.
    config.providers.slow = { type: 'simulated', tokenDelayMs: 20 };
    config.models['test/slow-haiku'] = { provider: 'slow', upstreamModel: MODEL };
    const modelsConfig = writeModelsConfig(config);
    const gateways: TestGateway[] = [];
    try {
      gateways.push(await startTestGateway({ schema, modelsConfig, bootstrap: false }));
      gateways.push(await startTestGateway({ schema, modelsConfig, bootstrap: false, projections: false }));
      const [a, b] = gateways;
      await priceModel(a.ledger, { modelId: 'test/slow-haiku', multiplierMilli: 1000, status: 'ACTIVE', alias: null }, 'admin:test');
      await a.ledger.caughtUp();
      await b.deps.catalog.reload();
      // The account could pay for all of them; the key's own limit covers exactly FIT.
      const acct = await openAccount(a, { quota: CALLS * COST * 2, requestsPerMinute: 1_000_000 });
      const { setKeyControls } = await import('../src/keys/key-controls.ts');
      await setKeyControls(a.ledger, a.deps.catalog, acct.keyId, { spendLimit: { tokens: FIT * COST, period: 'monthly' } }, 'admin:test');
      const body = { ...BODY, model: 'test/slow-haiku' };
      for (const g of [a, b]) assert.is((await call(g, '/v1/models', { key: acct.key })).status, 200);

      const started = Date.now();
      // As the SDKs do: a retryable 503 (the other gateway kept winning the account's stream) is
      // sent again after its Retry-After; it charged nothing, so the limit is still sold exactly.
      let contended = 0;
      const callAsClient = async (g: TestGateway): Promise<Reply> => {
        for (let attempt = 0; ; attempt++) {
          const r = await call(g, '/v1/chat/completions', { key: acct.key, body });
          if (r.status !== 503 || r.json?.error?.code !== 'ledger_contended' || attempt === 2) return r;
          contended++;
          await new Promise((done) => setTimeout(done, Number(r.headers.get('retry-after')) * 1000));
        }
      };
      const replies = await Promise.all(Array.from({ length: CALLS }, (_, i) => callAsClient(i % 2 ? b : a)));
      const ok = replies.filter((r) => r.status === 200);
      const refused = replies.filter((r) => r.status === 402);
      assert.equal(
        replies.filter((r) => r.status !== 200 && r.status !== 402).map((r) => `${r.status} ${r.text.slice(0, 200)}`),
        [],
      );
      for (const r of refused) assert.is(r.json.error.code, 'key_limit_exceeded', r.text);
      for (const r of ok) assert.is(r.json.usage.billed_tokens, COST);
      const perGateway = [0, 1].map((p) => replies.filter((r, i) => i % 2 === p && r.status === 200).length);
      console.log(
        `  two gateways (postgres): ${CALLS} calls in ${Date.now() - started} ms, ${ok.length} succeeded (${perGateway.join(' + ')}), ${refused.length} got 402 key_limit_exceeded, ${contended} retried after 503 ledger_contended; limit ${FIT * COST} = ${FIT} calls of ${COST}`,
      );
      // Each gateway got CALLS / 2 calls, more than FIT: a gateway blind to the other's holds would
      // sell FIT of its own, so a total of exactly FIT shows the limit is shared. How the FIT split
      // between them is a race (one gateway's holds may all land first), so it is only logged.
      assert.is(ok.length, FIT, 'every token of the limit was sold, not one more');

      // The events: the key's charges never pass the limit at any point, and end exactly at it.
      const events = (await a.ledger.events.readAll(0, 1_000_000)).filter((e) => e.data.accountId === acct.accountId);
      let spent = 0;
      let held = 0;
      const holds = new Map<string, number>();
      for (const e of events) {
        if (e.type === 'QuotaReserved') {
          holds.set(String(e.data.holdId), Number(e.data.amount));
          held += Number(e.data.amount);
        }
        if (e.type === 'ChatCharged' || e.type === 'ReservationReleased') {
          held -= holds.get(String(e.data.holdId)) ?? 0;
          holds.delete(String(e.data.holdId));
        }
        if (e.type === 'ChatCharged') spent += Number(e.data.billed);
        assert.ok(spent + held <= FIT * COST, `spent ${spent} + held ${held} past the limit at position ${e.position}`);
      }
      assert.is(spent, FIT * COST);
      assert.is(held, 0);
      const charges = events.filter((e) => e.type === 'ChatCharged');
      assert.is(new Set(charges.map((e) => e.data.holdId)).size, FIT, 'no hold charged twice');
      assert.equal(keyStanding(await accountState(a.ledger, acct.accountId), acct.keyId, new Date()).spent, FIT * COST);
    } finally {
      for (const g of gateways.reverse()) await g.close();
      await dropSchemas(url, schema);
      rmSync(dirname(modelsConfig), { recursive: true, force: true });
    }
  });
}

test.run();
