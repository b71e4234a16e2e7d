// Security, issue #30 items 2 and 5: free requests stay cheap, and idempotency is per API key.
// - a key with zero quota on a 5-calls-a-minute plan floods invalid requests (messages: []), each
//   with its own Idempotency-Key: past the per-key limit for invalid requests they get 429s, and
//   not one idempotency record is stored;
// - the records of decided requests expire and the sweeper purges them: the table stays bounded;
// - a sibling key of the same account never replays (nor is blocked by) another key's answer.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, eventually, openAccount, userMessage } from './support/http.ts';
import { issueKey } from '../src/keys/index.ts';

const INVALID_PER_MINUTE = 40;
let gw: TestGateway;

test.before(async () => {
  // Records live 10 s here (TOLLGATE_IDEMPOTENCY_TTL_HOURS), swept every 500 ms.
  gw = await startTestGateway({ bootstrap: false, invalidRequestsPerMinute: INVALID_PER_MINUTE, idempotencyTtlHours: 10 / 3600, sweepIntervalMs: 500 });
});
test.after(async () => {
  await gw?.stop();
});

const records = async (keyId?: string) =>
  (
    await gw.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${gw.ledger.schema}".idempotency${keyId ? ' WHERE key_id = $1' : ''}`,
      keyId ? [keyId] : [],
    )
  )[0].n;

test('a flood of invalid requests from a zero-quota key is throttled and stores no idempotency record', async () => {
  const broke = await openAccount(gw, { quota: 0, requestsPerMinute: 5 });
  const statuses = new Map<number, number>();
  for (let round = 0; round < 10; round++) {
    const replies = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(gw, '/v1/chat/completions', {
          key: broke.key,
          body: { model: 'cx/gen-6-luna', messages: [] },
          headers: { 'idempotency-key': `flood-${round}-${i}` },
        }),
      ),
    );
    for (const r of replies) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  }
  assert.is(statuses.get(400), INVALID_PER_MINUTE, JSON.stringify([...statuses]));
  assert.is(statuses.get(429), 300 - INVALID_PER_MINUTE, JSON.stringify([...statuses]));
  assert.is(await records(broke.keyId), 0, 'no record for a request that was not decided');
  const refused = await call(gw, '/v1/chat/completions', { key: broke.key, body: { model: 'cx/gen-6-luna', messages: [] } });
  assert.is(refused.json.error.code, 'too_many_failures');
  assert.ok(Number(refused.headers.get('retry-after')) >= 1);
  // Another key is not affected: the count is per key.
  const other = await openAccount(gw, { quota: 0, requestsPerMinute: 5 });
  assert.is((await call(gw, '/v1/chat/completions', { key: other.key, body: { model: 'cx/gen-6-luna', messages: [] } })).status, 400);
});

test('records of decided requests expire and are purged by the sweeper: the table stays bounded', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const replies = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      call(gw, '/v1/chat/completions', {
        key: acct.key,
        body: { model: 'cx/gen-6-luna', messages: userMessage(`record ${i}`), max_tokens: 5 },
        headers: { 'idempotency-key': `kept-${i}` },
      }),
    ),
  );
  assert.ok(
    replies.every((r) => r.status === 200),
    replies.map((r) => r.status).join(','),
  );
  const stored = await records(acct.keyId);
  assert.ok(stored > 0 && stored <= 40, `${stored} records`);
  const left = await eventually(
    () => records(),
    (n) => n === 0,
    40_000,
  );
  assert.is(left, 0, 'every record older than the TTL was purged');
});

test('idempotency is per key: a sibling key of the account runs its own request', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const sibling = await issueKey(gw.ledger, acct.accountId, 'sibling', 'admin:test');
  await gw.ledger.caughtUp();
  const body = { model: 'cx/gen-6-luna', messages: userMessage('one answer per key'), max_tokens: 5 };
  const first = await call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'shared-1' } });
  assert.is(first.status, 200);
  const again = await call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'shared-1' } });
  assert.is(again.headers.get('idempotent-replayed'), 'true', 'the same key replays');
  const other = await call(gw, '/v1/chat/completions', { key: sibling.secret, body, headers: { 'idempotency-key': 'shared-1' } });
  assert.is(other.status, 200);
  assert.is(other.headers.get('idempotent-replayed'), null, "the sibling key's request ran, it did not replay");
  assert.is.not(other.json.id, first.json.id);
});

test.run();
