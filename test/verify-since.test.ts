// Verify from the last checkpoint on (issue 42, item 4), over HTTP against a gateway: the first
// verification is full and records a checkpoint; the next reads only the events after it, and its
// running digest of each read model equals a fresh rebuild's; an edit of a new event, or of a
// live row a new event changes, fails it (and the one after is full again); an edit of older
// history is for the full verification; an interrupted one resumes; two gateways take turns.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { compareRebuilt, type KeptCopy } from '../src/audit/verify.ts';
import { dropReadModels, replayInto } from '../projections/runner/rebuild.ts';

const ADMIN = 'tg_admin_test_token_verify_since_0123';
let gw: TestGateway;
let key = '';

async function admin(method: string, path: string, body?: unknown, on = gw) {
  const res = await fetch(`${on.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as Record<string, any> };
}

const verify = async (full = false, on = gw) => {
  const r = await admin('POST', '/verify', full ? { full: true } : {}, on);
  assert.is(r.status, 200, JSON.stringify(r.json).slice(0, 500));
  return r.json;
};

async function chats(n: number) {
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'cx/gen-6-terra', messages: [{ role: 'user', content: `toll ${i}` }] }),
    });
    assert.is(res.status, 200);
    await res.text();
  }
}

const head = () => gw.ledger.events.headPosition();
const eventsAfter = async (position: number) => (await gw.ledger.events.readAll(position, 1_000_000)).length;
const table = () => `"${gw.ledger.schema}".events`;

/** Runs `edit` on the events table with its append-only trigger off (an attacker with database rights). */
async function behindTheLedger(sql: string, params: unknown[]) {
  await gw.db.exec(`ALTER TABLE ${table()} DISABLE TRIGGER events_append_only`);
  try {
    await gw.db.query(sql, params);
  } finally {
    await gw.db.exec(`ALTER TABLE ${table()} ENABLE TRIGGER events_append_only`);
  }
}

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  const plan = { plan_id: 'pro', name: 'Pro', quota: 1_000_000, validity_days: 30, requests_per_minute: 6000, models: ['cx/gen-6-terra'] };
  assert.is((await admin('POST', '/plans', plan)).status, 201);
  assert.is((await admin('POST', '/accounts', { account_id: 'acme', name: 'Acme' })).status, 201);
  assert.is((await admin('POST', '/accounts/acme/subscription', { plan_id: 'pro' })).json.event, 'SubscriptionStarted');
  key = (await admin('POST', '/accounts/acme/keys', { name: 'k' })).json.key;
  assert.ok(key.startsWith('sk_svc_'));
});
test.after(async () => {
  await gw.stop();
});

test('the first verification is full and records its checkpoint at the head', async () => {
  await chats(3);
  const v = await verify();
  assert.is(v.ok, true, JSON.stringify(v).slice(0, 2000));
  assert.is(v.mode, 'full');
  assert.is(v.since, null);
  assert.is(v.checkpoint.position, await head());
  assert.is(v.checkpoint.events, v.events);
  assert.is(v.checkpoint.events, await eventsAfter(0));
  assert.ok(v.checkpoint.digests.accounts.rows >= 1, JSON.stringify(v.checkpoint.digests));
});

test('the next reads only the events after it; its digests equal a fresh rebuild', async () => {
  const before = await verify();
  await chats(5);
  assert.is((await admin('POST', '/accounts/acme/extra-tokens', { amount: 70, reason: 'promo' })).status, 200);
  const added = await eventsAfter(before.checkpoint.position);
  assert.ok(added >= 6, `${added} new events`);
  const v = await verify();
  assert.is(v.ok, true, JSON.stringify(v).slice(0, 2000));
  assert.is(v.mode, 'since_checkpoint');
  assert.is(v.checkedEvents, added);
  assert.is(v.events, before.events + added);
  assert.equal(v.since, { position: before.checkpoint.position, verifiedAt: before.checkpoint.verifiedAt });
  assert.is(v.checkpoint.position, await head());
  assert.is(v.checkpoint.fullAt, before.checkpoint.fullAt, 'the chain of checkpoints began with the same full verification');
  // Nothing was appended since: a full verification's rebuild is at the same position, and each
  // table's digest (rows and the sum of their hashes) came out the same by the other road.
  const full = await verify(true);
  assert.is(full.ok, true);
  assert.is(full.mode, 'full');
  assert.is(full.events, v.events);
  assert.equal(full.checkpoint.digests, v.checkpoint.digests);
  const idle = await verify();
  assert.equal([idle.ok, idle.mode, idle.checkedEvents, idle.events], [true, 'since_checkpoint', 0, v.events]);
});

test('an event edited after the checkpoint fails the next verification; the one after is full', async () => {
  await verify();
  await chats(2);
  await gw.ledger.caughtUp(); // the edit comes after the read models took the event in
  const [victim] = await gw.db.query<{ position: number; data: unknown }>(
    `SELECT position, data FROM ${table()} WHERE type = 'ChatCharged' ORDER BY position DESC LIMIT 1`,
  );
  await behindTheLedger(`UPDATE ${table()} SET data = jsonb_set(data, '{billed}', '1') WHERE position = $1`, [victim.position]);
  const bad = await verify();
  assert.is(bad.ok, false);
  assert.is(bad.mode, 'since_checkpoint');
  assert.is(bad.checkpoint, null, 'nothing recorded');
  assert.ok(bad.chainProblems.some((p: { position: number; problem: string }) => p.position === victim.position && /hash/.test(p.problem)));
  const next = await verify();
  assert.is(next.mode, 'full', 'a failed verification leaves no checkpoint to start from');
  assert.is(next.ok, false);
  await behindTheLedger(`UPDATE ${table()} SET data = $2 WHERE position = $1`, [victim.position, JSON.stringify(victim.data)]);
  const mended = await verify();
  assert.equal([mended.ok, mended.mode], [true, 'full'], JSON.stringify(mended).slice(0, 1500));
});

test('a live read-model row edited behind the projector is found once a new event changes it', async () => {
  await verify();
  const rm = `"${gw.ledger.rmSchema}"`;
  await gw.db.query(`UPDATE ${rm}.accounts SET quota_used = quota_used + 1000 WHERE key = 'acme'`);
  await chats(1);
  const bad = await verify();
  assert.is(bad.ok, false);
  assert.is(bad.mode, 'since_checkpoint');
  const diff = bad.readModelDifferences.find((d: { table: string; key: string }) => d.table === 'accounts' && d.key === 'acme');
  assert.ok(diff, JSON.stringify(bad.readModelDifferences).slice(0, 1000));
  assert.is(Number(diff.live.quota_used) - Number(diff.rebuilt.quota_used), 1000);
});

test('a row no new event changed is for the full verification', async () => {
  // Mend the live read models (the rebuild swaps in new tables: the next verification is full).
  const rebuilt = await fetch(`${gw.url}/admin/v1/rebuild`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
  const lines = (await rebuilt.text()).trim().split('\n');
  assert.is(JSON.parse(lines.at(-1)!).type, 'done', lines.at(-1));
  const fresh = await verify();
  assert.equal([fresh.ok, fresh.mode], [true, 'full'], JSON.stringify(fresh).slice(0, 1000));
  const rm = `"${gw.ledger.rmSchema}"`;
  await gw.db.query(`UPDATE ${rm}.plans SET name = 'Edited' WHERE key = 'pro'`);
  await chats(1);
  const since = await verify();
  assert.equal([since.ok, since.mode, since.readModelDifferences], [true, 'since_checkpoint', []]);
  const full = await verify(true);
  assert.is(full.ok, false);
  assert.ok(full.readModelDifferences.some((d: { table: string; key: string }) => d.table === 'plans' && d.key === 'pro'));
  await gw.db.query(`UPDATE ${rm}.plans SET name = 'Pro' WHERE key = 'pro'`);
  assert.is((await verify()).ok, true);
});

test('a verification that stops midway records nothing; the next resumes from the same checkpoint', async () => {
  const before = await verify();
  await chats(3);
  const store = gw.ledger.events as { readAll: (after: number, limit: number) => Promise<unknown[]> };
  const readAll = store.readAll;
  let reads = 0;
  store.readAll = async (after, limit) => {
    // The verification's own pages (the projector's feed reads the log too, in pages of another size).
    if (limit === 5_000 && ++reads === 2) throw new Error('the database went away (test)');
    return readAll.call(gw.ledger.events, after, limit);
  };
  let failed: Awaited<ReturnType<typeof admin>>;
  try {
    failed = await admin('POST', '/verify', {});
  } finally {
    store.readAll = readAll;
  }
  assert.is(failed.status, 500, JSON.stringify(failed.json).slice(0, 500));
  assert.not.match(JSON.stringify(failed.json), /went away/);
  const v = await verify();
  assert.equal([v.ok, v.mode], [true, 'since_checkpoint'], JSON.stringify(v).slice(0, 1000));
  assert.is(v.since.position, before.checkpoint.position);
  const full = await verify(true);
  assert.equal(full.checkpoint.digests, v.checkpoint.digests);
});

test("a full verification's rebuild that live calls passed is brought on to them: equal at one position, digests as a fresh rebuild's; a row no later event changed still differs", async () => {
  const db = gw.ledger.readModels.db;
  const rm = `"${gw.ledger.rmSchema}"`;
  const scratch = `${gw.ledger.rmSchema}_verify_passed`;
  await gw.ledger.caughtUp();
  let position = await replayInto(db, gw.ledger.events, scratch, { scratch: true, indexed: true });
  try {
    // Charges move the account, the daily usage, the upstream cost series and the books (folded a
    // page at a time: no event names their rows) past the rebuild.
    await chats(3);
    await gw.ledger.caughtUp();
    assert.ok((await head()) > position);
    let kept: KeptCopy | null = null;
    const passed = await compareRebuilt(gw.ledger, scratch, position, (c) => (kept = c));
    assert.equal(passed.differences, []);
    assert.ok(passed.kept && kept);
    const copy = kept as KeptCopy;
    assert.is(copy.position, await head(), 'brought on to the live read models');
    const full = await verify(true);
    assert.is(full.ok, true);
    assert.equal(Object.fromEntries([...copy.digests].map(([t, d]) => [t, { rows: Number(d.rows), sum: String(d.sum) }])), full.checkpoint.digests);
    await dropReadModels(db, scratch);

    position = await replayInto(db, gw.ledger.events, scratch, { scratch: true });
    await db.query(`UPDATE ${rm}.plans SET name = 'Edited' WHERE key = 'pro'`);
    await chats(2);
    await gw.ledger.caughtUp();
    const failed = await compareRebuilt(gw.ledger, scratch, position);
    assert.equal(
      failed.differences.map((d) => [d.table, d.key]),
      [['plans', 'pro']],
    );
    assert.is(failed.kept, false);
  } finally {
    await db.query(`UPDATE ${rm}.plans SET name = 'Pro' WHERE key = 'pro'`);
    await dropReadModels(db, scratch);
  }
});

test('bad input: full must be true or false', async () => {
  const r = await admin('POST', '/verify', { full: 'yes' });
  assert.is(r.status, 400);
  assert.is(r.json.error.param, 'full');
});

if (process.env.DATABASE_URL) {
  test('two gateways on one database take turns; each verification starts where the last ended', async () => {
    const other = await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema });
    try {
      await verify();
      const traffic = chats(20);
      const [a, b] = await Promise.all([verify(false, gw), verify(false, other)]);
      await traffic;
      for (const v of [a, b]) assert.equal([v.ok, v.mode], [true, 'since_checkpoint'], JSON.stringify(v).slice(0, 1000));
      // One went first; the other began at the checkpoint the first recorded (by where each began:
      // with no event between them both record the same position).
      const [first, second] = a.since.position <= b.since.position ? [a, b] : [b, a];
      assert.is(second.since.position, first.checkpoint.position);
      const last = await verify(false, other);
      const full = await verify(true);
      assert.is(full.events, last.events);
      assert.equal(full.checkpoint.digests, last.checkpoint.digests);
    } finally {
      await other.close();
    }
  });
}

test.run();
