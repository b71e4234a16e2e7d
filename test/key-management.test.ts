// The key-management API over real HTTP: a management key (issued by the operator here, by a member
// in /app) creates, lists, updates, rotates and revokes its account's keys at /v1/keys, each change
// an event whose actor is the management key; the keys it makes work at once on another gateway
// (PostgreSQL: a second gateway on the same log; PGlite: the same one). It calls no model: the
// official OpenAI and Anthropic clients get a 401 in their own dialect. An API key cannot manage
// keys (403), another account's key is unknown to it (404), bad input is a 400, and in each of
// those refusals nothing is written; a revoked management key stops at once.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { modelsStatus, refusedOnOther } from './support/key-checks.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';
import { streams } from '../src/ledger/events.ts';

const ADMIN = 'key-management-test-admin-token-0123456789abcdef';
let gw: TestGateway;
let other: TestGateway;
let acme: TestAccount;
let rival: TestAccount;
let manager = '';
let managerId = '';

const admin = (path: string, body?: unknown) =>
  call(gw, `/admin/v1${path}`, { body, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': 'ops' } });
/** Through the other gateway, as the customer's software calls it. */
const manage = (path: string, body?: unknown, method?: string, key = manager) => call(other, `/v1/keys${path}`, { key, body, method });
const eventsOf = async (keyId: string) => gw.ledger.events.readStream(streams.key(keyId));
const accountEvents = async (accountId: string) => (await gw.ledger.events.readStream(streams.account(accountId))).length;
const modelsWith = (key: string) => modelsStatus(other.url, key);
const stoppedOnOther = (key: string) => refusedOnOther(other.url, key);

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN });
  other = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema }) : gw;
  acme = await openAccount(gw, { quota: 1_000_000 });
  rival = await openAccount(gw, { quota: 1_000_000 });
});
test.after(async () => {
  if (other && other !== gw) await other.close();
  await gw?.stop();
});

test('the operator issues a management key: shown once, listed masked', async () => {
  const r = await admin(`/accounts/${acme.accountId}/management-keys`, { name: 'provisioning' });
  assert.is(r.status, 201, r.text);
  assert.match(r.json.key, /^sk_mgmt_[0-9a-f]+_[A-Za-z0-9]{43}$/);
  manager = r.json.key;
  managerId = r.json.key_id;
  const listed = await admin(`/accounts/${acme.accountId}/management-keys`);
  assert.is(listed.json.data.length, 1);
  assert.is(listed.json.data[0].name, 'provisioning');
  assert.not.ok(listed.text.includes(manager), 'the secret is shown once');
});

test('a management key calls no model: 401 in the OpenAI and the Anthropic dialect', async () => {
  const openai = new OpenAI({ apiKey: manager, baseURL: `${other.url}/v1`, maxRetries: 0 });
  const err = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.instance(err, OpenAI.AuthenticationError);
  assert.match(err.message, /management key calls no model/);
  assert.is(await modelsWith(manager), 401);
  const anthropic = new Anthropic({ apiKey: manager, baseURL: other.url, maxRetries: 0 });
  const aerr = await anthropic.messages.create({ model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.instance(aerr, Anthropic.AuthenticationError);
  assert.is(aerr.error?.type, 'error', 'the Anthropic error shape');
  assert.is(aerr.error?.error?.type, 'authentication_error');
});

test('it creates, lists, updates, rotates and revokes keys; each works or stops at once on another gateway; each event names it', async () => {
  const created = await manage('', { name: 'user-42', spend_limit: { tokens: 2000, period: 'monthly' }, expires_at: '2031-01-01T00:00:00Z' });
  assert.is(created.status, 201, created.text);
  assert.match(created.json.key, /^sk_svc_/);
  const keyId = created.json.key_id;
  assert.is(await modelsWith(created.json.key), 200, 'the new key works at once');

  const listed = await manage('');
  assert.is(listed.status, 200, listed.text);
  const mine = listed.json.data.find((k: { key_id: string }) => k.key_id === keyId);
  assert.equal(mine.spend_limit, { tokens: 2000, period: 'monthly' });
  assert.is(mine.spend.remaining, 2000);
  assert.not.ok(listed.text.includes(created.json.key), 'the secret is shown once');

  const patched = await manage(`/${keyId}`, { spend_limit: { tokens: 500, period: 'daily' }, name: 'user-42 (trial)' }, 'PATCH');
  assert.is(patched.status, 200, patched.text);
  const one = await manage(`/${keyId}`);
  assert.equal(one.json.spend_limit, { tokens: 500, period: 'daily' });
  assert.is(one.json.name, 'user-42 (trial)');

  const rotated = await manage(`/${keyId}/rotate`, { grace_seconds: 0 });
  assert.is(rotated.status, 201, rotated.text);
  assert.is(await stoppedOnOther(created.json.key), 401, 'the old key stopped (once the other gateway heard)');
  assert.is(await modelsWith(rotated.json.key), 200);

  const revoked = await manage(`/${rotated.json.key_id}`, undefined, 'DELETE');
  assert.is(revoked.status, 200, revoked.text);
  assert.is(await stoppedOnOther(rotated.json.key), 401, 'the revoked key stopped (once the other gateway heard)');

  const actor = `management-key:${managerId}`;
  // Key controls are decided on the account's stream (its plan bounds them); issue, rotation and revocation on the key's.
  const accountSide = (await gw.ledger.events.readStream(streams.account(acme.accountId))).filter((e) => (e.data as { keyId?: string }).keyId === keyId);
  const first = [...(await eventsOf(keyId)), ...accountSide];
  for (const type of ['KeyIssued', 'KeyControlsSet', 'KeyRotated']) {
    const e = first.filter((x) => x.type === type);
    assert.ok(e.length > 0, type);
    assert.ok(
      e.every((x) => x.metadata.actor === actor),
      `${type} by ${e.map((x) => x.metadata.actor)}`,
    );
  }
  const second = await eventsOf(rotated.json.key_id);
  assert.ok(second.some((x) => x.type === 'KeyRevoked' && x.metadata.actor === actor));
});

test('refused with nothing written: an API key (403), a bad body (400), another account’s key (404), no or a wrong key (401)', async () => {
  const before = [await accountEvents(acme.accountId), await accountEvents(rival.accountId)];
  const byApiKey = await manage('', { name: 'nope' }, 'POST', acme.key);
  assert.is(byApiKey.status, 403, byApiKey.text);
  assert.is(byApiKey.json.error.code, 'management_key_required');
  const bad = await manage('', { name: 'x', spend_limit: { tokens: -1, period: 'monthly' } });
  assert.is(bad.status, 400, bad.text);
  assert.is(bad.json.error.param, 'spend_limit.tokens');
  const unknownField = await manage('', { name: 'x', colour: 'red' });
  assert.is(unknownField.status, 400, unknownField.text);
  const theirs = await manage(`/${rival.keyId}`, undefined, 'DELETE');
  assert.is(theirs.status, 404, theirs.text);
  assert.is((await manage(`/${rival.keyId}`, { name: 'mine now' }, 'PATCH')).status, 404);
  assert.is(await modelsWith(rival.key), 200, 'their key still works');
  assert.is((await call(other, '/v1/keys')).status, 401);
  assert.is((await manage('', undefined, 'GET', manager.slice(0, -1) + (manager.endsWith('a') ? 'b' : 'a'))).status, 401);
  assert.equal([await accountEvents(acme.accountId), await accountEvents(rival.accountId)], before);
});

test('a revoked management key stops at once on the other gateway', async () => {
  assert.is((await manage('')).status, 200);
  const r = await admin(`/accounts/${acme.accountId}/management-keys/${managerId}/revoke`, {});
  assert.is(r.status, 200, r.text);
  const after = await manage('');
  assert.is(after.status, 401, after.text);
  const events = await gw.ledger.events.readStream(streams.managementKeys(acme.accountId));
  assert.equal(
    events.map((e) => [e.type, e.metadata.actor]),
    [
      ['ManagementKeyIssued', 'admin:ops'],
      ['ManagementKeyRevoked', 'admin:ops'],
    ],
  );
});

test.run();
