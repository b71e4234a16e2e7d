// Every admin update compares values, not their serialisation: the same values sent again (in
// another field order, a model list in another order, an expiry in another notation) change
// nothing, append no event and say so. Over HTTP against a gateway, counting the log's events.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { settingsFromEnv } from '../src/config.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';

const ADMIN = 'tg_admin_updates_test_0123456789abcdef';
let gw: TestGateway;
let acct: TestAccount;

const admin = (method: string, path: string, body?: unknown) => call(gw, `/admin/v1${path}`, { method, body, headers: { authorization: `Bearer ${ADMIN}` } });
const eventCount = async () => (await gw.ledger.events.readAll(0, 1_000_000)).length;

/** Sends `first`, then each of `again` (the same values): only the first appends. */
async function onlyFirstAppends(method: string, path: string, first: unknown, again: unknown[]) {
  const r1 = await admin(method, path, first);
  assert.ok(r1.status < 300, `${path}: ${r1.status} ${r1.text}`);
  const before = await eventCount();
  const replies = [];
  for (const body of again) {
    const r = await admin(method, path, body);
    assert.ok(r.status < 300, `${path} again: ${r.status} ${r.text}`);
    replies.push(r.json);
  }
  assert.is(await eventCount(), before, `${path}: the same values again appended ${(await eventCount()) - before} events`);
  return { first: r1.json, again: replies };
}

test.before(async () => {
  gw = await startTestGateway({
    adminToken: ADMIN,
    bootstrap: false,
    webhooks: { ...settingsFromEnv({}).webhooks, masterSecret: 'admin-updates-test-master-secret-0123456789', allowHosts: ['127.0.0.1'] },
  });
  acct = await openAccount(gw, { quota: 1_000_000 });
});
test.after(() => gw?.stop());

test('PATCH a key: the same spend limit, models and expiry again say changed [] and append nothing', async () => {
  const expiry = new Date(Date.now() + 30 * 86_400_000);
  expiry.setUTCMilliseconds(0);
  const { first, again } = await onlyFirstAppends(
    'PATCH',
    `/keys/${acct.keyId}`,
    { name: 'ci', spend_limit: { tokens: 5000, period: 'daily' }, models: ['alpha-haiku-4.5', 'cx/gen-6-luna'], expires_at: expiry.toISOString() },
    [
      { spend_limit: { tokens: 5000, period: 'daily' } },
      { spend_limit: { period: 'daily', tokens: 5000 } },
      { models: ['cx/gen-6-luna', 'alpha-haiku-4.5'] },
      { expires_at: expiry.toISOString().replace('.000Z', '+00:00') },
      { name: 'ci', spend_limit: { tokens: 5000, period: 'daily' }, models: ['alpha-haiku-4.5', 'cx/gen-6-luna'], expires_at: expiry.toISOString() },
    ],
  );
  assert.equal([...first.changed].sort(), ['expires_at', 'models', 'name', 'spend_limit']);
  for (const r of again) assert.equal(r.changed, [], JSON.stringify(r));
  // A real change still counts.
  const r = await admin('PATCH', `/keys/${acct.keyId}`, { spend_limit: { period: 'daily', tokens: 6000 } });
  assert.equal(r.json.changed, ['spend_limit']);
});

test('PUT a plan: the same terms again (models in another order) append nothing', async () => {
  const terms = { name: 'Team', quota: 500_000, validity_days: 30, requests_per_minute: 60, models: ['alpha-haiku-4.5', 'cx/gen-6-luna'] };
  assert.is((await admin('POST', '/plans', { plan_id: 'team', ...terms })).status, 201);
  const { first, again } = await onlyFirstAppends('PUT', '/plans/team', { ...terms, quota: 600_000 }, [
    { ...terms, quota: 600_000 },
    { models: ['cx/gen-6-luna', 'alpha-haiku-4.5'], requests_per_minute: 60, validity_days: 30, quota: 600_000, name: 'Team' },
  ]);
  assert.is(first.changed, true);
  for (const r of again) assert.is(r.changed, false);
});

test('PATCH a model price: the same multiplier, alias and cache weights again append nothing', async () => {
  const { first, again } = await onlyFirstAppends('PATCH', '/models/alpha-haiku-4.5', { multiplier: 1.5, cache_read_weight: 0.1 }, [
    { multiplier: 1.5, cache_read_weight: 0.1 },
    { cache_read_weight: 0.1, multiplier: 1.5, status: 'ACTIVE' },
    { multiplier: 1.5 },
  ]);
  assert.is(first.changed, true);
  for (const r of again) {
    assert.is(r.changed, false);
    assert.is(r.multiplierMilli, 1500);
    assert.is(r.cacheReadMilli, 100);
  }
});

test('PATCH a channel: disabling a disabled channel appends nothing', async () => {
  const channel = (await admin('GET', '/channels')).json.data[0].id as string;
  const { first, again } = await onlyFirstAppends('PATCH', `/channels/${channel}`, { enabled: false, reason: 'maintenance' }, [
    { enabled: false, reason: 'maintenance' },
    { reason: 'maintenance', enabled: false },
  ]);
  assert.is(first.changed, true);
  for (const r of again) assert.is(r.changed, false);
  assert.is((await admin('PATCH', `/channels/${channel}`, { enabled: true })).json.changed, true);
});

test('DELETE a webhook: removing it again is a 404 and appends nothing', async () => {
  const created = await admin('POST', `/accounts/${acct.accountId}/webhooks`, { url: 'http://127.0.0.1:9/hook' });
  assert.is(created.status, 201, created.text);
  const path = `/accounts/${acct.accountId}/webhooks/${created.json.webhook_id}`;
  assert.is((await admin('DELETE', path)).status, 200);
  const before = await eventCount();
  const again = await admin('DELETE', path);
  assert.is(again.status, 404, again.text);
  assert.is(await eventCount(), before);
});

test.run();
