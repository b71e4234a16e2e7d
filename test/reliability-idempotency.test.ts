// Idempotency under a burst: one Idempotency-Key sent 50 times at once yields exactly one upstream
// call (counted at the upstream double), one hold and one charge, and 50 identical responses:
// the same status, body and billing headers. The first is the original; the other 49 wait for it
// and replay it with `idempotent-replayed: true` (docs/billing.md: "the same key and body within 24 hours
// returns the first response"). For chat (plain and streamed), images and Anthropic Messages; a
// duplicate with another body during the burst is a 409.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startUpstreamDouble, type UpstreamDouble } from './support/upstream-double.ts';
import { call, ledgerView, openAccount, startGatewayWithRoutes, userMessage, type Reply, type TestAccount } from './support/http.ts';
import type { TestGateway } from './support/gateway.ts';
import Koa from 'koa';
import { ensureIdempotencyTable } from '../src/eventstore/idempotency-store.ts';
import { idempotency } from '../src/http/idempotency.ts';
import { keyCaller } from '../src/http/caller.ts';
import { openTestPglite } from './support/db.ts';

const BURST = 50;
const CHAT_MODEL = 'test/slow-double-chat';
const IMAGE_MODEL = 'test/slow-double-image';

let gw: TestGateway;
let double: UpstreamDouble;

test.before(async () => {
  // Slow enough that every duplicate arrives while the first is still running.
  double = await startUpstreamDouble({ reply: 'alpha beta gamma delta epsilon zeta eta theta', responseDelayMs: 400, chunkDelayMs: 20 });
  gw = await startGatewayWithRoutes(
    { double: { type: 'openai-compatible', baseURL: double.url, timeoutMs: 30_000 } },
    {
      [CHAT_MODEL]: { provider: 'double', upstreamModel: 'double-model', multiplierMilli: 1250 },
      [IMAGE_MODEL]: { provider: 'double', upstreamModel: 'double-image', multiplierMilli: 1000 },
    },
  );
});

test.after(async () => {
  await gw?.stop();
  await double?.close();
});

const upstreamCalls = (suffix: string) => double.requests.filter((r) => r.path.endsWith(suffix)).length;

async function burst(acct: TestAccount, path: string, body: unknown, key: string): Promise<Reply[]> {
  return Promise.all(Array.from({ length: BURST }, () => call(gw, path, { key: acct.key, body, headers: { 'idempotency-key': key } })));
}

function assertIdentical(replies: Reply[], label: string): void {
  const first = replies[0];
  for (const r of replies) {
    assert.is(r.status, first.status, `${label}: status`);
    assert.is(r.text, first.text, `${label}: body`);
    for (const h of ['content-type', 'x-tollgate-billed-tokens', 'x-tollgate-remaining-tokens'])
      assert.is(r.headers.get(h), first.headers.get(h), `${label}: ${h}`);
  }
  const replayed = replies.filter((r) => r.headers.get('idempotent-replayed') === 'true').length;
  assert.is(replayed, BURST - 1, `${label}: one original, ${BURST - 1} replays`);
  console.log(
    `  ${label}: ${BURST} concurrent requests, 1 original + ${replayed} replays, all ${first.status}, ${new Set(replies.map((r) => r.text)).size} distinct body`,
  );
}

async function assertChargedOnce(acct: TestAccount, kind: 'chat' | 'image'): Promise<number> {
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.reservations.length, 1, 'one hold');
  assert.is((kind === 'chat' ? view.chatCharges : view.imageCharges).length, 1, 'one charge');
  assert.is(view.releases.length, 0);
  assert.is(view.row.quota_used, view.billed);
  assert.is(view.row.reserved, 0);
  return view.billed;
}

test(`chat: ${BURST} at once with one key -> one upstream call, one charge, identical responses`, async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = upstreamCalls('/chat/completions');
  const replies = await burst(acct, '/v1/chat/completions', { model: CHAT_MODEL, messages: userMessage('Once only, please.') }, 'burst-chat-1');
  assertIdentical(replies, 'chat');
  assert.is(replies[0].status, 200);
  assert.is(upstreamCalls('/chat/completions') - before, 1, 'one upstream call');
  const billed = await assertChargedOnce(acct, 'chat');
  assert.is(Number(replies[0].headers.get('x-tollgate-billed-tokens')), billed);
});

test(`streamed chat: ${BURST} at once -> one upstream stream, one charge, identical event streams`, async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = upstreamCalls('/chat/completions');
  const body = { model: CHAT_MODEL, stream: true, stream_options: { include_usage: true }, messages: userMessage('Stream it once.') };
  const replies = await burst(acct, '/v1/chat/completions', body, 'burst-stream-1');
  assertIdentical(replies, 'streamed chat');
  assert.match(replies[0].text, /data: \[DONE\]/);
  assert.is(upstreamCalls('/chat/completions') - before, 1, 'one upstream call');
  const billed = await assertChargedOnce(acct, 'chat');
  const usage = replies[0].text
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)))
    .find((c) => c.usage)?.usage;
  assert.ok(usage && billed === Math.ceil(((usage.prompt_tokens + usage.completion_tokens) * 1250) / 1000), 'the stream states what was charged');
});

test(`images: ${BURST} at once -> one upstream image, one charge of 45000 tokens, identical images`, async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = upstreamCalls('/images/generations');
  const replies = await burst(acct, '/v1/images/generations', { model: IMAGE_MODEL, prompt: 'a single lighthouse' }, 'burst-image-1');
  assertIdentical(replies, 'images');
  assert.is(replies[0].status, 200);
  assert.is(upstreamCalls('/images/generations') - before, 1, 'one upstream call');
  assert.is(await assertChargedOnce(acct, 'image'), 45_000);
});

test(`Anthropic Messages: ${BURST} at once -> one upstream call, one charge, identical messages`, async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = upstreamCalls('/chat/completions');
  const replies = await burst(
    acct,
    '/v1/messages',
    { model: CHAT_MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'Once, in Anthropic.' }] },
    'burst-messages-1',
  );
  assertIdentical(replies, 'messages');
  assert.is(replies[0].json.type, 'message');
  assert.is(upstreamCalls('/chat/completions') - before, 1);
  await assertChargedOnce(acct, 'chat');
});

test('an invalid request leaves no record: every repeat gets the same refusal, and a different body with the key is a 409', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = double.requests.length;
  const table = `"${gw.ledger.schema}".idempotency`;
  const refusedAlike = (replies: Reply[], label: string) => {
    for (const r of replies) {
      assert.is(r.status, 400, label);
      assert.equal(r.json.error, replies[0].json.error, `${label}: error`);
      assert.is(r.headers.get('idempotent-replayed'), null, `${label}: refused again, not replayed`);
    }
  };
  const bad = await burst(acct, '/v1/chat/completions', { model: CHAT_MODEL, messages: userMessage('n is two'), n: 2 }, 'burst-bad-1');
  refusedAlike(bad, 'refused');
  assert.is(bad[0].json.error.param, 'n');

  // On /v1/messages the refusal keeps Anthropic's error shape. Another key: invalid requests
  // are limited per key (TOLLGATE_INVALID_REQUESTS_PER_MINUTE, 60), and the burst above used 50.
  const second = await openAccount(gw, { quota: 1_000_000 });
  const badMessages = await burst(second, '/v1/messages', { model: CHAT_MODEL, messages: [{ role: 'user', content: 'no max_tokens' }] }, 'burst-bad-2');
  refusedAlike(badMessages, 'refused (Anthropic)');
  for (const r of badMessages) assert.equal([r.json.type, r.json.error.type], ['error', 'invalid_request_error']);
  const [stored] = await gw.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE key_id = ANY($1)`, [[acct.keyId, second.keyId]]);
  assert.is(stored.n, 0, 'no record for an undecided request');

  // While the first with a key is still running, the same key with another body is refused at once.
  const slow = call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: CHAT_MODEL, messages: userMessage('first body') },
    headers: { 'idempotency-key': 'burst-mixed-1' },
  });
  await new Promise((r) => setTimeout(r, 100));
  const other = await call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: CHAT_MODEL, messages: userMessage('another body') },
    headers: { 'idempotency-key': 'burst-mixed-1' },
  });
  assert.is(other.status, 409);
  assert.is(other.json.error.code, 'idempotency_key_reused');
  assert.is((await slow).status, 200);
  assert.is(double.requests.length - before, 1, 'only the first body reached the upstream');
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
});

test('a claim whose gateway died (no heartbeat) is answered at once as interrupted, never run again', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: CHAT_MODEL, messages: userMessage('cut by a crash') };
  // What a gateway killed mid-request leaves behind: a claim with no response and a stale heartbeat.
  const table = `"${gw.ledger.schema}".idempotency`;
  await gw.db.query(
    `INSERT INTO ${table} (key_id, key, body_hash, created_at, heartbeat_at) VALUES ($1, 'orphan-1', 'x', now() - interval '2 minutes', now() - interval '2 minutes')`,
    [acct.keyId],
  );
  // The body hash must match for the claim to be this request's: take it from a live claim.
  const before = upstreamCalls('/chat/completions');
  const first = await call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'orphan-probe' } });
  assert.is(first.status, 200);
  const [{ body_hash: hash }] = await gw.db.query<{ body_hash: string }>(`SELECT body_hash FROM ${table} WHERE key_id = $1 AND key = 'orphan-probe'`, [
    acct.keyId,
  ]);
  await gw.db.query(`UPDATE ${table} SET body_hash = $2 WHERE key_id = $1 AND key = 'orphan-1'`, [acct.keyId, hash]);
  const started = Date.now();
  const retry = await call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'orphan-1' } });
  assert.is(retry.status, 409);
  assert.is(retry.json.error.code, 'idempotency_interrupted');
  assert.ok(Date.now() - started < 5_000, 'answered at once, not after the in-progress wait');
  assert.is(upstreamCalls('/chat/completions'), before + 1, 'the interrupted request was not run again');
});

test('a claim whose heartbeat is fresh is still running: a repeat waits for its response and replays it', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const table = `"${gw.ledger.schema}".idempotency`;
  const body = { model: CHAT_MODEL, messages: userMessage('long-running') };
  const probe = await call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'alive-probe' } });
  assert.is(probe.status, 200);
  const [{ body_hash: hash }] = await gw.db.query<{ body_hash: string }>(`SELECT body_hash FROM ${table} WHERE key_id = $1 AND key = 'alive-probe'`, [
    acct.keyId,
  ]);
  // Claimed a minute ago by a gateway that is still working on it (its heartbeat is fresh).
  await gw.db.query(`INSERT INTO ${table} (key_id, key, body_hash, created_at, heartbeat_at) VALUES ($1, 'alive-1', $2, now() - interval '1 minute', now())`, [
    acct.keyId,
    hash,
  ]);
  const waiting = call(gw, '/v1/chat/completions', { key: acct.key, body, headers: { 'idempotency-key': 'alive-1' } });
  await new Promise((r) => setTimeout(r, 500));
  await gw.db.query(
    `UPDATE ${table} SET status = 200, headers = '{"content-type":"application/json"}', body = '{"recorded":true}' WHERE key_id = $1 AND key = 'alive-1'`,
    [acct.keyId],
  );
  const r = await waiting;
  assert.is(r.status, 200);
  assert.equal(r.json, { recorded: true });
  assert.is(r.headers.get('idempotent-replayed'), 'true');
});

test('while a request runs its claim is renewed; once it is answered the renewals stop', async () => {
  const tdb = await openTestPglite();
  try {
    await tdb.db.exec(`CREATE SCHEMA IF NOT EXISTS "${tdb.schema}"`);
    await ensureIdempotencyTable(tdb.db, tdb.schema);
    const app = new Koa();
    app.use(async (ctx, next) => {
      ctx.state.caller = keyCaller({ accountId: 'acct_hb', keyId: 'key_hb' }, 'req_hb');
      ctx.request.body = { n: 1 };
      await next();
    });
    app.use(idempotency(tdb.db, tdb.schema, { heartbeatMs: 100 }));
    app.use(async (ctx) => {
      await new Promise((r) => setTimeout(r, 1200));
      ctx.body = { done: true };
    });
    const server = app.listen(0);
    try {
      const port = (server.address() as { port: number }).port;
      const beat = () =>
        tdb.db.query<{ b: string; c: string }>(`SELECT heartbeat_at::text AS b, created_at::text AS c FROM "${tdb.schema}".idempotency WHERE key = 'hb-1'`);
      const reply = fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'idempotency-key': 'hb-1' } });
      await new Promise((r) => setTimeout(r, 700));
      const [during] = await beat();
      assert.ok(during.b > during.c, `renewed while running: heartbeat ${during.b}, claimed ${during.c}`);
      assert.is((await reply).status, 200);
      const [after] = await beat();
      await new Promise((r) => setTimeout(r, 400));
      const [later] = await beat();
      assert.is(later.b, after.b, 'no renewal after the response was recorded');
    } finally {
      server.close();
    }
  } finally {
    await tdb.cleanup();
  }
});

test.run();
