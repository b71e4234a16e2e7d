// Concurrency: 500 simultaneous chat calls on one account whose quota covers exactly 100 of them.
// Each call's cost is exact and known: a fixed prompt, the deterministic simulated upstream and a
// max_tokens the reply always reaches, so a call's hold equals its final charge (prompt +
// max_tokens at multiplier 1). At most 100 may succeed, the rest get 402 in OpenAI's error shape,
// the balance never goes below zero at any event, and the events, the quota read model and a
// fresh rebuild agree to the token. Then the same spread over two gateway processes and a
// projector on one PostgreSQL (PostgreSQL only: processes cannot share embedded PGlite).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import type { TestGateway } from './support/gateway.ts';
import { assertNeverBelowZero } from './support/ledger-checks.ts';
import { startTestGateway, spawnGateway, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { chat, ledgerView, openAccount, userMessage, writeModelsConfig, type Reply } from './support/http.ts';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { countMessageTokens } from '../src/upstream/tokenizer.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const CALLS = 500;
const FIT = 100;
const MODEL = 'alpha-haiku-4.5'; // multiplier 1: a call's charge is its raw token count
const MAX_TOKENS = 8;
const MESSAGES = userMessage('Reliability check: tell me about toll bridges in winter.');
const BODY = { model: MODEL, messages: MESSAGES, max_tokens: MAX_TOKENS };
/** What one call holds and is charged: the prompt plus the max_tokens the reply always fills. */
const COST = countMessageTokens(MESSAGES as never) + MAX_TOKENS;
const QUOTA = FIT * COST;

function assertQuotaError(r: Reply): void {
  assert.is(r.status, 402);
  assert.equal(Object.keys(r.json).sort(), ['error']);
  assert.equal(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type']);
  assert.is(r.json.error.type, 'insufficient_quota');
  assert.is(r.json.error.code, 'insufficient_quota');
  assert.is(r.json.error.param, null);
  assert.match(r.json.error.message, /quota/);
}

function summarise(replies: Reply[]) {
  const ok = replies.filter((r) => r.status === 200);
  const refused = replies.filter((r) => r.status === 402);
  const other = replies.filter((r) => r.status !== 200 && r.status !== 402);
  assert.equal(
    other.map((r) => `${r.status} ${r.text.slice(0, 200)}`),
    [],
    'only 200 and 402',
  );
  for (const r of refused) assertQuotaError(r);
  for (const r of ok) assert.is(Number(r.headers.get('x-tollgate-billed-tokens')), COST, 'every success billed exactly its hold');
  return { ok, refused };
}

let gw: TestGateway;

test.before(async () => {
  gw = await startTestGateway();
});
test.after(async () => {
  await gw?.stop();
});

test('calibration: one call holds and is charged exactly prompt + max_tokens', async () => {
  const acct = await openAccount(gw, { quota: 10 * COST });
  const r = await chat(gw, acct.key, BODY);
  assert.is(r.status, 200, r.text);
  assert.is(r.json.usage.completion_tokens, MAX_TOKENS, 'the reply fills max_tokens');
  assert.is(r.json.usage.prompt_tokens + r.json.usage.completion_tokens, COST);
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.reservations.length, 1);
  assert.is(view.reservations[0].data.amount, COST, 'the hold');
  assert.is(view.billed, COST, 'the charge');
});

test(`${CALLS} simultaneous calls on a quota of exactly ${FIT}: at most ${FIT} succeed, the rest 402, ledger and read models agree`, async () => {
  const acct = await openAccount(gw, { quota: QUOTA, requestsPerMinute: 1_000_000 });
  const started = Date.now();
  const replies = await Promise.all(Array.from({ length: CALLS }, () => chat(gw, acct.key, BODY)));
  const { ok, refused } = summarise(replies);
  console.log(
    `  in-process (${process.env.DATABASE_URL ? 'postgres' : 'pglite'}): ${CALLS} calls in ${Date.now() - started} ms, ${ok.length} succeeded, ${refused.length} got 402; cost ${COST} tokens each, quota ${QUOTA}`,
  );
  assert.ok(ok.length <= FIT, `${ok.length} succeeded`);
  // Nothing is lost either: a refused call is refused only when the quota is really spent.
  assert.is(ok.length, FIT, 'every token of the quota was sold');

  const view = await ledgerView(gw, acct.accountId);
  const charged = view.chatCharges.reduce((sum, e) => sum + Number(e.data.billed), 0);
  assert.is(view.chatCharges.length, ok.length, 'one charge per success');
  assert.is(new Set(view.chatCharges.map((e) => e.data.holdId)).size, ok.length, 'no hold charged twice');
  assert.is(view.reservations.length, ok.length, 'a refused call never held anything');
  assert.is(view.releases.length, 0);
  assert.is(charged, ok.length * COST);
  assert.is(charged, QUOTA - 0, 'events: the whole quota, not a token more');
  assert.is(view.row.quota_used, charged, 'read model = events');
  assert.is(view.row.reserved, 0);
  assert.is(view.row.open_holds, 0);
  assert.is(view.openHoldRows, 0);
  assertNeverBelowZero(view.events);

  // A fresh rebuild from position zero says the same.
  const scratch = `${gw.ledger.rmSchema}_reliability`;
  await replayInto(gw.db, gw.ledger.events, scratch);
  const [rebuilt] = await gw.db.query<Record<string, unknown>>(`SELECT quota_used, reserved, open_holds FROM "${scratch}".accounts WHERE account_id = $1`, [
    acct.accountId,
  ]);
  await gw.db.exec(`DROP SCHEMA IF EXISTS "${scratch}" CASCADE`);
  assert.equal([Number(rebuilt.quota_used), Number(rebuilt.reserved), Number(rebuilt.open_holds)], [charged, 0, 0], 'rebuild = events');
});

// ---------- two gateway processes and a projector on one PostgreSQL ----------

const url = process.env.DATABASE_URL;
if (!url) {
  test('two gateway processes: SKIPPED on PGlite (needs DATABASE_URL: processes cannot share embedded PGlite)', () => {
    console.log('  two-process concurrency: SKIPPED (set DATABASE_URL to run it on PostgreSQL)');
  });
} else {
  const ADMIN = 'tg_admin_reliability_concurrency';
  const schema = uniqueSchema('rc');
  const procs: GatewayProcess[] = [];
  let projector: ChildProcess | undefined;
  let modelsConfig = '';
  const SLOW_MODEL = 'test/slow-haiku';

  const admin = async (g: GatewayProcess, method: string, path: string, body?: unknown): Promise<any> => {
    const r = await fetch(`${g.baseUrl.replace(/\/v1$/, '')}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${text}`);
    return r.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text;
  };

  test(`two gateway processes: ${CALLS} calls spread over both on a quota of exactly ${FIT}`, async () => {
    try {
      projector = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'projector'], {
        cwd: new URL('..', import.meta.url).pathname,
        env: { ...process.env, TOLLGATE_SCHEMA: schema, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`projector did not start: ${out}`)), 60_000);
        projector!.stdout!.on('data', (d) => {
          out += d;
          if (out.includes('projector running')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      // The same simulated model, answering at 40 ms a token: every call holds its tokens for a
      // while, so the holds of both processes are open at the same time and really compete.
      const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
      delete config.$schema;
      config.providers.slow = { type: 'simulated', tokenDelayMs: 40 };
      config.models[SLOW_MODEL] = { provider: 'slow', upstreamModel: MODEL };
      modelsConfig = writeModelsConfig(config);
      const env = {
        TOLLGATE_SCHEMA: schema,
        TOLLGATE_PROJECTIONS: 'off',
        TOLLGATE_ADMIN_TOKEN: ADMIN,
        TOLLGATE_BOOTSTRAP: 'off',
        LOG_LEVEL: 'warn',
        TOLLGATE_MODELS_CONFIG: modelsConfig,
      };
      procs.push(await spawnGateway(env), await spawnGateway(env));
      const [a, b] = procs;
      await admin(a, 'PATCH', `/models/${SLOW_MODEL}`, { multiplier: 1, status: 'ACTIVE' });
      await admin(a, 'POST', '/plans', { plan_id: 'race', name: 'Race', quota: QUOTA, validity_days: 30, requests_per_minute: 1_000_000, models: ['*'] });
      await admin(a, 'POST', '/accounts', { account_id: 'race', name: 'Race' });
      await admin(a, 'POST', '/accounts/race/subscription', { plan_id: 'race' });
      const key = (await admin(a, 'POST', '/accounts/race/keys', { name: 'k' })).key as string;

      // Both processes know the key before the burst, so both really race for the same tokens.
      for (const g of [a, b]) assert.is((await fetch(`${g.baseUrl}/subscription`, { headers: { authorization: `Bearer ${key}` } })).status, 200);

      const started = Date.now();
      const replies = await Promise.all(
        Array.from({ length: CALLS }, (_, i) => chat({ url: (i % 2 ? b : a).baseUrl.replace(/\/v1$/, '') }, key, { ...BODY, model: SLOW_MODEL })),
      );
      const { ok, refused } = summarise(replies);
      const perProcess = [0, 1].map((p) => replies.filter((r, i) => i % 2 === p && r.status === 200).length);
      console.log(
        `  two processes (postgres): ${CALLS} calls in ${Date.now() - started} ms, ${ok.length} succeeded (${perProcess.join(' + ')}), ${refused.length} got 402`,
      );
      assert.ok(ok.length <= FIT, `${ok.length} succeeded`);
      assert.is(ok.length, FIT, 'every token of the quota was sold');

      // The events, as exported for an auditor.
      const events = ((await admin(a, 'GET', '/events')) as string)
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as StoredEvent)
        .filter((e) => e.data.accountId === 'race');
      const charges = events.filter((e) => e.type === 'ChatCharged');
      const charged = charges.reduce((sum, e) => sum + Number(e.data.billed), 0);
      assert.is(charges.length, ok.length);
      assert.is(new Set(charges.map((e) => e.data.holdId)).size, ok.length, 'no hold charged twice');
      assert.is(events.filter((e) => e.type === 'QuotaReserved').length, ok.length, 'a refused call never held anything');
      assert.is(charged, QUOTA);
      assertNeverBelowZero(events);

      // The read model the projector keeps, seen from the other process, once it has caught up.
      let row: any;
      for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 200))) {
        row = await admin(b, 'GET', '/accounts/race');
        if (Number(row.quota_used) === charged && Number(row.reserved) === 0) break;
      }
      assert.equal([Number(row.quota_used), Number(row.reserved), Number(row.open_holds)], [charged, 0, 0], 'read model = events');
      // A fresh rebuild compared with the live read models: no difference anywhere.
      const verify = await admin(a, 'POST', '/verify');
      assert.equal(verify.readModelDifferences, [], 'rebuild = read models');
      assert.equal(verify.chainProblems, []);
      assert.ok(verify.ok);
    } finally {
      await Promise.all(procs.map((p) => p.stop()));
      projector?.kill('SIGTERM');
      await dropSchemas(url, schema);
      if (modelsConfig) rmSync(dirname(modelsConfig), { recursive: true, force: true });
    }
  });
}

test.run();
