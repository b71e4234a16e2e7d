// Corrections that compose, end to end through the admin API and the CLI: two overlapping
// corrections (the overlap priced by the later one), the chain in the reconciliation report, the
// undo back to the original balances, idempotent re-application, one act that also sets the price
// from now on, images and cache weights, bad input, and corrections applied at the same time
// (in one gateway, and on PostgreSQL from two gateways on one schema). `verify` after each step.
import { streams } from '../src/ledger/events.ts';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { metadataFor } from '../src/ledger/ledger.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { reviveAccountState } from '../src/accounts/account-state.ts';
import { fold } from '../src/ledger/decider.ts';
import type { DomainEvent } from '../src/ledger/events.ts';
import type { DomainError } from '../src/ledger/errors.ts';
import { accountCommand, accountState } from '../src/accounts/index.ts';

const run = promisify(execFile);
const ADMIN = 'tg_admin_corrections_test_0123456789';
let gw: TestGateway;
const keys: Record<string, string> = {};

type Json = Record<string, any>;

async function admin(method: string, path: string, body?: unknown, g: TestGateway = gw) {
  const res = await fetch(`${g.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-tollgate-actor': 'ops' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* csv */
  }
  return { status: res.status, json, text };
}

async function ok(method: string, path: string, body?: unknown, g: TestGateway = gw): Promise<Json> {
  const r = await admin(method, path, body, g);
  assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
  return r.json;
}

async function cli(args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/tollgate.js', ...args], {
      env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function verify(g: TestGateway = gw): Promise<void> {
  const r = await ok('POST', '/verify', undefined, g);
  assert.is(r.ok, true, JSON.stringify(r).slice(0, 3000));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A moment strictly between what was charged before and what is charged after. */
async function tick(): Promise<Date> {
  await sleep(4);
  const t = new Date();
  await sleep(4);
  return t;
}

async function setupAccount(id: string, g: TestGateway = gw): Promise<void> {
  await ok('POST', '/accounts', { account_id: id, name: id }, g);
  await ok('POST', `/accounts/${id}/subscription`, { plan_id: 'corr' }, g);
  keys[id] = (await ok('POST', `/accounts/${id}/keys`, { name: 'k' }, g)).key;
}

/** A chat charge made by the ledger's own commands (a hold, then its settlement), with exact counts. */
async function charge(
  accountId: string,
  model: string,
  multiplierMilli: number,
  promptTokens: number,
  completionTokens: number,
  extra: { cachedTokens?: number; cacheWriteTokens?: number; cacheReadMilli?: number; cacheWriteMilli?: number } = {},
  g: TestGateway = gw,
): Promise<{ id: string; billed: number }> {
  const holdId = randomUUID();
  const md = metadataFor('test');
  await accountCommand(
    g.ledger,
    accountId,
    { type: 'Reserve', holdId, requestId: `req_${holdId.slice(0, 8)}`, keyId: 'key_test', model, kind: 'chat', amount: 20_000, now: new Date(), ttlMs: 60_000 },
    md,
  );
  const r = await accountCommand(
    g.ledger,
    accountId,
    {
      type: 'SettleChat',
      holdId,
      multiplierMilli,
      promptTokens,
      completionTokens,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
      ...extra,
    },
    md,
  );
  return { id: r.events[0].id, billed: (r.events[0].data as { billed: number }).billed };
}

async function allEvents(g: TestGateway = gw): Promise<StoredEvent[]> {
  return g.ledger.events.readAll(0, 1_000_000);
}

/** What is billed now for each charge, from the events alone: the charge plus its adjustments. */
async function nets(g: TestGateway = gw): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const e of await allEvents(g)) {
    if (e.type === 'ChatCharged' || e.type === 'ImageCharged') out.set(e.id, (e.data as { billed: number }).billed);
    if (e.type === 'ChargeAdjusted') {
      const d = e.data as { chargeEventId: string; delta: number };
      out.set(d.chargeEventId, out.get(d.chargeEventId)! + d.delta);
    }
  }
  return out;
}

const used = async (id: string, g: TestGateway = gw) => {
  const a = await ok('GET', `/accounts/${id}`, undefined, g);
  return { quota_used: a.quota_used as number, extra_used: a.extra_used as number };
};

const adjustmentsOf = async (correctionId: string, g: TestGateway = gw) =>
  (await allEvents(g)).filter((e) => e.type === 'ChargeAdjusted' && e.data.correctionId === correctionId);

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  await ok('POST', '/plans', { plan_id: 'corr', name: 'Corrections', quota: 1_000_000, validity_days: 30, requests_per_minute: 100_000, models: ['*'] });
  for (const id of ['north', 'south']) await setupAccount(id);
});
test.after(async () => {
  await gw.stop();
});

test('two overlapping corrections: the overlap priced by the later one, the rest by whichever covers it; the chain in the report; undo back to the original balances', async () => {
  const M = 'cx/gen-6-sol';
  // The operator typed 2 where 1.25 was meant.
  await ok('PATCH', `/models/${M}`, { multiplier: 2 });
  const t0 = await tick();
  const A = await charge('north', M, 2000, 800, 200); // 1000 tokens
  const t1 = await tick();
  const B = await charge('north', M, 2000, 300, 100); // 400 tokens
  const t2 = await tick();
  const C = await charge('south', M, 2000, 450, 150); // 600 tokens
  const t3 = await tick();
  assert.equal([A.billed, B.billed, C.billed], [2000, 800, 1200]);
  await gw.ledger.caughtUp();
  const original = { north: await used('north'), south: await used('south') };
  await verify();

  // Correction 1, a wrong fix: 1.5 over [t0, t2), which holds A and B.
  const c1 = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t2.toISOString(), multiplier: 1.5, reason: 'typo, first attempt' });
  assert.is(c1.appended, 2);
  assert.equal(c1.totals, { charges: 2, billedOriginally: 2800, billedNow: 2800, billed: 2800, corrected: 2100, difference: -700 });
  let now = await nets();
  assert.equal([now.get(A.id), now.get(B.id), now.get(C.id)], [1500, 600, 1200]);
  await verify();

  // Correction 2, the right one: 1.25 over [t1, t3), which holds B (again) and C. The dry run
  // shows the chain: billed originally, billed now, corrected, the difference, what was applied.
  const terms2 = { model: M, from: t1.toISOString(), to: t3.toISOString(), multiplier: 1.25, reason: 'typo' };
  const before2 = await gw.ledger.events.headPosition();
  const dry = await ok('POST', '/corrections', { ...terms2, dry_run: true });
  assert.is(await gw.ledger.events.headPosition(), before2, 'a dry run writes nothing');
  const north = dry.accounts.find((a: Json) => a.accountId === 'north');
  const south = dry.accounts.find((a: Json) => a.accountId === 'south');
  const b = north.items[0];
  assert.equal([b.eventId, b.billedOriginally, b.billedNow, b.corrected, b.difference, b.correctedBy], [B.id, 800, 600, 500, -100, dry.correctionId]);
  assert.equal(b.adjustments, [{ correctionId: c1.correctionId, delta: -200 }]);
  assert.equal([north.charges, north.billedOriginally, north.billedNow, north.corrected, north.difference], [1, 800, 600, 500, -100]);
  const c = south.items[0];
  assert.equal([c.eventId, c.billedOriginally, c.billedNow, c.corrected, c.difference, c.adjustments], [C.id, 1200, 1200, 750, -450, []]);
  assert.equal(dry.totals, { charges: 2, billedOriginally: 2000, billedNow: 1800, billed: 1800, corrected: 1250, difference: -550 });

  // Applied through the CLI.
  const viaCli = await cli(['correct', '--model', M, '--from', terms2.from, '--to', terms2.to, '--multiplier', '1.25', '--reason', 'typo']);
  assert.is(viaCli.code, 0, viaCli.stderr);
  assert.match(viaCli.stdout, /^correction [0-9a-f-]{36}: multiplier 1\.25 on cx\/gen-6-sol from /);
  assert.match(viaCli.stdout, /north\tcharges=1\tbilled_originally=800\tbilled_now=600\tcorrected=500\tdifference=-100/);
  assert.match(viaCli.stdout, /total\tcharges=2\tbilled_originally=2000\tbilled_now=1800\tcorrected=1250\tdifference=-550/);
  assert.match(viaCli.stdout, /applied: 2 adjustments appended, 0 already applied/);
  now = await nets();
  assert.equal([now.get(A.id), now.get(B.id), now.get(C.id)], [1500, 500, 750], 'A by correction 1, B (in both) by correction 2, C by correction 2');
  const adj2 = await adjustmentsOf(dry.correctionId);
  assert.equal(
    adj2.map((e) => [
      e.data.chargeEventId,
      e.data.billedBefore,
      e.data.billedCorrected,
      e.data.delta,
      e.data.multiplierMilliBefore,
      e.data.multiplierMilliCorrected,
    ]),
    [
      [B.id, 600, 500, -100, 1500, 1250],
      [C.id, 1200, 750, -450, 2000, 1250],
    ],
  );
  assert.equal((await used('north')).quota_used, original.north.quota_used - 800);
  assert.equal((await used('south')).quota_used, original.south.quota_used - 450);
  await verify();

  // Statements list every adjustment with its correction; usage shows the net.
  const from = new Date(t0.getTime() - 60_000).toISOString();
  const to = new Date(Date.now() + 60_000).toISOString();
  const s = await ok('GET', `/accounts/north/statement?from=${from}&to=${to}`);
  const lines = s.lines.filter((l: Json) => l.model === M && l.kind === 'adjustment');
  assert.equal(
    lines.map((l: Json) => [l.charge_event_id, l.correction_id, l.billed]),
    [
      [A.id, c1.correctionId, -500],
      [B.id, c1.correctionId, -200],
      [B.id, dry.correctionId, -100],
    ],
  );
  assert.equal(
    s.corrections.filter((x: Json) => [c1.correctionId, dry.correctionId].includes(x.correction_id)),
    [
      { correction_id: c1.correctionId, adjustments: 2, adjusted: -700 },
      { correction_id: dry.correctionId, adjustments: 1, adjusted: -100 },
    ],
  );
  const usage = async (view: string) =>
    ((await (await fetch(`${gw.baseUrl}/usage?view=${view}`, { headers: { authorization: `Bearer ${keys.north}` } })).json()) as Json).models.find(
      (m: Json) => m.model === M,
    );
  assert.equal([(await usage('billed')).billed, (await usage('corrected')).billed, (await usage('corrected')).adjustment_tokens], [2800, 2000, -800]);

  // The same corrections again append nothing; the older one applied again does not undo the newer.
  const again2 = await ok('POST', '/corrections', terms2);
  assert.equal([again2.appended, again2.already_applied], [0, 2]);
  const again1 = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t2.toISOString(), multiplier: 1.5, reason: 'typo, first attempt' });
  assert.equal([again1.appended, again1.already_applied], [0, 2]);
  now = await nets();
  assert.equal([now.get(A.id), now.get(B.id), now.get(C.id)], [1500, 500, 750]);
  await verify();

  // Undo is a correction: back to the multiplier originally billed, over everything.
  const undo = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t3.toISOString(), multiplier: 2, reason: 'undo' });
  assert.equal([undo.appended, undo.totals.billedNow, undo.totals.corrected, undo.totals.difference], [3, 2750, 4000, 1250]);
  now = await nets();
  assert.equal([now.get(A.id), now.get(B.id), now.get(C.id)], [2000, 800, 1200]);
  assert.equal({ north: await used('north'), south: await used('south') }, original, 'every account is back to exactly its original balance');
  assert.equal((await accountState(gw.ledger, 'north')).quotaUsed, original.north.quota_used);
  await verify();
});

test('one act: the fix of the past and the price from now on (also_from_now), appended together with the same actor and correlation', async () => {
  const M = 'cx/gen-6-astra';
  await ok('PATCH', `/models/${M}`, { multiplier: 3 }); // should have been 2
  const t0 = await tick();
  const D = await charge('north', M, 3000, 400, 100);
  assert.is(D.billed, 1500);
  // No `to`: the window ends at the act, where the new price starts.
  const terms = { model: M, from: t0.toISOString(), multiplier: 2, also_from_now: true, reason: 'typo' };
  const r = await ok('POST', '/corrections', terms);
  assert.equal([r.appended, r.alsoFromNow, r.totals.difference], [1, true, -500]);
  assert.is((await nets()).get(D.id), 1000);
  const modelEvents = await gw.ledger.events.readStream(`model-${M}`);
  const [corrected, priced] = modelEvents.slice(-2);
  assert.equal([corrected.type, priced.type], ['MultiplierCorrected', 'ModelPriced']);
  assert.is(priced.position, corrected.position + 1, 'one append');
  assert.equal(corrected.data, {
    modelId: M,
    correctionId: r.correctionId,
    from: t0.toISOString(),
    to: r.to,
    multiplierMilli: 2000,
    reason: 'typo',
    alsoFromNow: true,
  });
  assert.is(priced.data.multiplierMilli, 2000);
  assert.is(priced.timestamp, corrected.timestamp);
  for (const e of [corrected, priced]) assert.equal([e.metadata.actor, e.metadata.correlationId], ['admin:ops', r.correctionId]);
  assert.ok(Date.parse(r.to) <= Date.parse(priced.timestamp), 'the window ends where the new price starts');

  // A real call after the act is billed at the new price.
  const res = await fetch(`${gw.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.north}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: M, messages: [{ role: 'user', content: 'How are tolls priced?' }] }),
  });
  const body = (await res.json()) as Json;
  assert.is(res.status, 200);
  assert.is(Number(res.headers.get('x-tollgate-billed-tokens')), Math.ceil((body.usage.prompt_tokens + body.usage.completion_tokens) * 2));
  const last = (await allEvents()).filter((e) => e.type === 'ChatCharged').pop()!;
  assert.is(last.data.multiplierMilli, 2000);

  // The same act again (the same terms, so the same id) writes nothing: no second price either.
  const head = await gw.ledger.events.headPosition();
  const again = await ok('POST', '/corrections', terms);
  assert.equal([again.correctionId, again.appended], [r.correctionId, 0]);
  assert.is(await gw.ledger.events.headPosition(), head);
  await verify();
});

test('images: the multiplier and the tokens per image are re-priced on the same path, and compose', async () => {
  const M = 'alpha-opus-5';
  await ok('PATCH', `/models/${M}`, { multiplier: 2 }); // should have been 1.75
  const t0 = await tick();
  const ids: string[] = [];
  for (const prompt of ['a toll booth at dawn', 'a bridge in fog']) {
    const res = await fetch(`${gw.baseUrl}/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.south}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: M, prompt }),
    });
    await res.arrayBuffer();
    assert.is(res.status, 200);
    assert.is(res.headers.get('x-tollgate-billed-tokens'), '90000');
    ids.push((await allEvents()).filter((e) => e.type === 'ImageCharged').pop()!.id);
  }
  const chat = await charge('south', M, 2000, 100, 0); // a chat charge of the same model in the same window
  const t1 = await tick();
  await ok('PATCH', `/models/${M}`, { multiplier: 1.75 });

  const m = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t1.toISOString(), multiplier: 1.75 });
  assert.equal([m.appended, m.totals.charges, m.totals.billedNow, m.totals.corrected], [3, 3, 180_200, 157_675]);
  let now = await nets();
  assert.equal([now.get(ids[0]), now.get(ids[1]), now.get(chat.id)], [78_750, 78_750, 175]);
  await verify();

  // The tokens counted per image were wrong too (40000, not 45000): a component of its own.
  // Only image charges are re-priced, at the multiplier the earlier correction set.
  const t = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t1.toISOString(), component: 'image_tokens', value: 40_000 });
  assert.equal([t.appended, t.totals.charges, t.totals.billedOriginally, t.totals.billedNow, t.totals.corrected], [2, 2, 180_000, 157_500, 140_000]);
  now = await nets();
  assert.equal([now.get(ids[0]), now.get(ids[1]), now.get(chat.id)], [70_000, 70_000, 175]);
  const adj = await adjustmentsOf(t.correctionId);
  assert.equal(
    adj.map((e) => [e.data.billedBefore, e.data.billedCorrected, e.data.multiplierMilliCorrected, e.data.tokensPerImageCorrected, e.data.correctionRevision]),
    [
      [78_750, 70_000, 1750, 40_000, t.revision],
      [78_750, 70_000, 1750, 40_000, t.revision],
    ],
  );
  const refused = await cli([
    'correct',
    '--model',
    M,
    '--from',
    t0.toISOString(),
    '--to',
    t1.toISOString(),
    '--component',
    'image_tokens',
    '--value',
    '40000',
    '--also-from-now',
  ]);
  assert.ok(refused.code !== 0, 'tokens per image are a gateway setting, not a price: also_from_now is refused');
  assert.match(refused.stderr, /also_from_now/);
  await verify();
});

test('cache weights: a correction of cache_read_weight (with the price from now on) and then of cache_write_weight re-price chat charges, and compose', async () => {
  const M = 'alpha-sonnet-5';
  await ok('PATCH', `/models/${M}`, { multiplier: 1.5, cache_read_weight: null, cache_write_weight: null });
  const t0 = await tick();
  // 1000 prompt tokens of which 800 read from the cache, 200 completion: (1000 + 200) * 1.5 = 1800.
  const read = await charge('north', M, 1500, 1000, 200, { cachedTokens: 800 });
  // 500 prompt tokens of which 100 written to the cache, 100 completion: 600 * 1.5 = 900.
  const write = await charge('north', M, 1500, 500, 100, { cacheWriteTokens: 100 });
  assert.equal([read.billed, write.billed], [1800, 900]);
  await gw.ledger.caughtUp();
  const rows = await gw.db.query<Json>(
    `SELECT event_id, cached_tokens, cache_write_tokens, cache_read_milli, cache_write_milli FROM "${gw.ledger.rmSchema}".charges WHERE event_id IN ($1, $2) ORDER BY position`,
    [read.id, write.id],
  );
  assert.equal(
    rows.map((r) => [Number(r.cached_tokens), Number(r.cache_write_tokens), r.cache_read_milli, r.cache_write_milli]),
    [
      [800, 0, 1000, 1000],
      [0, 100, 1000, 1000],
    ],
  );
  const t1 = await tick();

  // Cached tokens should have counted a tenth: (200 + 200 + 800 * 0.1) * 1.5 = 720. And from now on too.
  const r = await ok('POST', '/corrections', {
    model: M,
    from: t0.toISOString(),
    to: t1.toISOString(),
    component: 'cache_read_weight',
    value: 0.1,
    also_from_now: true,
  });
  assert.equal([r.appended, r.totals.charges, r.totals.billedNow, r.totals.corrected, r.value], [1, 2, 2700, 1620, 100]);
  const priced = (await gw.ledger.events.readStream(`model-${M}`)).pop()!;
  assert.equal(
    [priced.type, priced.data.multiplierMilli, priced.data.cacheReadMilli, priced.data.cacheWriteMilli, priced.metadata.correlationId],
    ['ModelPriced', 1500, 100, undefined, r.correctionId],
  );
  assert.is((await ok('GET', '/models')).data.find((x: Json) => x.model_id === M).cache_read_milli, 100);
  let now = await nets();
  assert.equal([now.get(read.id), now.get(write.id)], [720, 900]);
  await verify();

  // Cache writes should have counted 1.25: (400 + 100 * 1.25 + 100) * 1.5 = 937.5 -> 938. The read
  // weight of the first correction still holds for its charges.
  const w = await ok('POST', '/corrections', { model: M, from: t0.toISOString(), to: t1.toISOString(), component: 'cache_write_weight', value: 1.25 });
  assert.equal([w.appended, w.totals.billedNow, w.totals.corrected], [1, 1620, 1658]);
  now = await nets();
  assert.equal([now.get(read.id), now.get(write.id)], [720, 938]);
  const [adj] = await adjustmentsOf(w.correctionId);
  assert.equal([adj.data.chargeEventId, adj.data.delta, adj.data.cacheWriteMilliCorrected, adj.data.cacheReadMilliCorrected], [write.id, 38, 1250, 100]);
  await verify();
});

test('bad input is a clear 400, 404 or 409 and writes nothing', async () => {
  const M = 'cx/gen-6-luna';
  const past = (ms: number) => new Date(Date.now() - ms).toISOString();
  await ok('POST', '/corrections', { model: M, from: past(60_000), to: past(30_000), multiplier: 1.1, correction_id: 'fix-luna-1' });
  const head = await gw.ledger.events.headPosition();
  const cases: Array<[unknown, number, RegExp]> = [
    [{ model: M, from: past(60_000), to: new Date(Date.now() + 3_600_000).toISOString(), multiplier: 1 }, 400, /past/],
    [{ model: M, from: past(1000), to: past(60_000), multiplier: 1 }, 400, /inverted or empty/],
    [{ model: M, from: past(1000), to: past(1000), multiplier: 1 }, 400, /inverted or empty/],
    [{ model: M, from: past(60_000), to: past(1000), multiplier: 0 }, 400, /greater than 0/],
    [{ model: M, from: past(60_000), to: past(1000), multiplier: -1 }, 400, /greater than 0/],
    [{ model: M, from: past(60_000), to: past(1000), multiplier: 1.2345 }, 400, /three decimals/],
    [{ model: M, from: past(60_000), to: past(1000) }, 400, /multiplier/],
    [{ model: M, from: past(60_000), multiplier: 1 }, 400, /'to'/],
    [{ model: M, from: past(60_000), to: past(1000), component: 'price', value: 1 }, 400, /component/],
    [{ model: M, from: past(60_000), to: past(1000), component: 'cache_read_weight', value: -0.1 }, 400, /0 or more/],
    [{ model: M, from: past(60_000), to: past(1000), component: 'image_tokens', value: 0.5 }, 400, /whole number/],
    [{ model: M, from: past(60_000), to: past(1000), multiplier: 1, also_from_now: 'yes' }, 400, /also_from_now/],
    [{ model: 'no-such-model', from: past(60_000), to: past(1000), multiplier: 1 }, 404, /not found/],
    [{ model: M, from: past(50_000), to: past(30_000), multiplier: 1.1, correction_id: 'fix-luna-1' }, 409, /other terms/],
    [{ model: M, from: past(60_000), to: past(30_000), multiplier: 1.2, correction_id: 'fix-luna-1', dry_run: true }, 409, /other terms/],
  ];
  for (const [body, status, message] of cases) {
    const r = await admin('POST', '/corrections', body);
    assert.is(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    assert.match(r.json.error?.message, message, r.text);
  }
  assert.is(await gw.ledger.events.headPosition(), head, 'nothing written');
});

test('the account decides each adjustment against what is billed now (read at its count of adjustments); an older correction never overrides a newer one; its state stays small', () => {
  const plan = { planId: 'p', name: 'P', quota: 10_000_000, validityDays: 30, requestsPerMinute: 0, models: ['*'] };
  const at = new Date();
  let s = accountDecider.initialState();
  const step = (c: AccountCommand) => {
    const events = accountDecider.decide(c, s);
    s = fold(accountDecider, events, s);
    return events;
  };
  step({ type: 'Open', accountId: 'a', name: 'A' });
  step({ type: 'Subscribe', accountId: 'a', plan, now: at });
  step({ type: 'Reserve', holdId: 'h', requestId: 'r', keyId: 'k', model: 'm', kind: 'chat', amount: 1000, now: at, ttlMs: 60_000 });
  step({
    type: 'SettleChat',
    holdId: 'h',
    multiplierMilli: 2000,
    promptTokens: 300,
    completionTokens: 100,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  });
  // What the charge log says the charge is billed now, after each adjustment step.
  let current: { billed: number; quotaDelta: number; multiplierMilli: number; rank: number } | undefined;
  const adjust = (correctionId: string, revision: number, milli: number, chargeEventId = 'e', seen = s.adjustments): AccountCommand => ({
    type: 'Adjust',
    correctionId,
    correctionRevision: revision,
    chargeEventId,
    requestId: 'r',
    model: 'm',
    chargedAt: at.toISOString(),
    billedBefore: 800,
    billedCorrected: (400 * milli) / 1000,
    multiplierMilliBefore: 2000,
    multiplierMilliCorrected: milli,
    fromQuotaBefore: 800,
    adjustmentsSeen: seen,
    lastAdjustment: s.lastAdjustment,
    ...(chargeEventId === 'e' && current ? { current } : {}),
  });
  const record = (events: DomainEvent[], revision: number) => {
    for (const e of events) {
      const d = e.data as Json;
      current = {
        billed: d.billedCorrected,
        quotaDelta: (current?.quotaDelta ?? 0) + d.quotaDelta,
        multiplierMilli: d.multiplierMilliCorrected,
        rank: revision,
      };
    }
    return events;
  };
  assert.equal(
    record(step(adjust('c1', 3, 1500)), 3).map((e) => [(e.data as Json).billedBefore, (e.data as Json).delta]),
    [[800, -200]],
  );
  assert.throws(
    () => accountDecider.decide(adjust('c2', 5, 1250, 'e', 0), s),
    (e: Error) => (e as DomainError).code === 'conflict',
    'figures read before the last adjustment are refused',
  );
  assert.equal(
    record(step(adjust('c2', 5, 1250)), 5).map((e) => [(e.data as Json).billedBefore, (e.data as Json).delta, (e.data as Json).multiplierMilliBefore]),
    [[600, -100, 1500]],
    'from what is billed now, not the original',
  );
  assert.equal(step(adjust('c1', 3, 1500)), [], 'the older correction, applied again later, changes nothing');
  assert.equal(step(adjust('c2', 5, 1250)), [], 'the same one again changes nothing');
  assert.is(s.quotaUsed, 500);
  assert.equal(
    record(step(adjust('undo', 7, 2000)), 7).map((e) => (e.data as Json).delta),
    [300],
  );
  assert.is(s.quotaUsed, 800, 'back to the original balance');
  assert.is(s.adjustments, 3);
  // Correcting many charges leaves the state (and so every snapshot) the same size.
  const size = () => JSON.stringify(s).length;
  const before = size();
  for (let i = 0; i < 5_000; i++) step(adjust('c9', 9, 1000, `charge-${i}`));
  assert.is(s.adjustments, 5_003);
  assert.ok(size() <= before + 32, `state of ${size()} bytes after 5,000 more adjustments (was ${before})`);
  assert.is(reviveAccountState(JSON.parse(JSON.stringify(s))).adjustments, 5_003);
});

/**
 * Two overlapping corrections applied at the same moment, from `a` and `b`, then the same
 * correction from both: the result is the one applying them one after the other in the order of
 * the model's stream gives, every adjustment once.
 */
async function concurrentCorrections(a: TestGateway, b: TestGateway, M: string, prefix: string): Promise<void> {
  const accounts = [`${prefix}-1`, `${prefix}-2`, `${prefix}-3`];
  for (const id of accounts) await setupAccount(id, a);
  await ok('PATCH', `/models/${M}`, { multiplier: 2 }, a);
  const marks: Date[] = [await tick()];
  const charges: Array<{ id: string; tokens: number; account: string }> = [];
  for (let i = 0; i < 12; i++) {
    const tokens = 101 + i * 37;
    const account = accounts[i % 3];
    charges.push({ ...(await charge(account, M, 2000, tokens - 20, 20, {}, a)), tokens, account });
    if (i % 4 === 3) marks.push(await tick());
  }
  // W1 holds charges 0-7, W2 charges 4-11: 4-7 are in both.
  const w1 = { model: M, from: marks[0].toISOString(), to: marks[2].toISOString(), multiplier: 1.5 };
  const w2 = { model: M, from: marks[1].toISOString(), to: marks[3].toISOString(), multiplier: 1.25 };
  const [r1, r2] = await Promise.all([ok('POST', '/corrections', w1, a), ok('POST', '/corrections', w2, b)]);
  const order = (await a.ledger.events.readStream(`model-${M}`)).filter((e) => e.type === 'MultiplierCorrected').map((e) => e.data.correctionId);
  assert.equal(new Set(order), new Set([r1.correctionId, r2.correctionId]));
  const later = order[order.length - 1] === r1.correctionId ? 1500 : 1250;
  const expected = (i: number) => Math.ceil((charges[i].tokens * (i < 4 ? 1500 : i >= 8 ? 1250 : later)) / 1000);
  const check = async () => {
    const now = await nets(a);
    assert.equal(
      charges.map((c) => now.get(c.id)),
      charges.map((_, i) => expected(i)),
      `overlap priced by the later correction (${later})`,
    );
    for (const id of accounts) {
      const billed = charges.reduce((n, c, i) => n + (c.account === id ? expected(i) : 0), 0);
      assert.is((await accountState(a.ledger, id)).quotaUsed, billed, id);
      assert.is((await used(id, b)).quota_used, billed, `${id} as the other gateway reads it`);
    }
    const adjusted = (await allEvents(a)).filter((e) => e.type === 'ChargeAdjusted' && charges.some((c) => c.id === e.data.chargeEventId));
    const pairs = adjusted.map((e) => `${e.data.correctionId}|${e.data.chargeEventId}`);
    assert.is(new Set(pairs).size, pairs.length, 'at most one adjustment per correction and charge');
  };
  await check();

  // The same correction from both gateways at once: each charge adjusted once.
  const w3 = { model: M, from: marks[0].toISOString(), to: marks[3].toISOString(), multiplier: 1.75 };
  const both = await Promise.all([ok('POST', '/corrections', w3, a), ok('POST', '/corrections', w3, b)]);
  assert.is(both[0].correctionId, both[1].correctionId);
  assert.is((await adjustmentsOf(both[0].correctionId, a)).length, 12);
  const now = await nets(a);
  assert.equal(
    charges.map((c) => now.get(c.id)),
    charges.map((c) => Math.ceil(c.tokens * 1.75)),
  );
  await verify(a);
}

test('two overlapping corrections applied at once in one gateway give what one after the other gives', async () => {
  await concurrentCorrections(gw, gw, 'alpha-opus-4.8', 'conc');
});

test("an account's part of a page goes as several commands; one refused because another correction moved the account is read again from there on", async () => {
  const M = 'alpha-opus-4.8';
  const accounts = ['parts-1', 'parts-2'];
  for (const id of accounts) await setupAccount(id);
  await ok('PATCH', `/models/${M}`, { multiplier: 2 });
  const t0 = await tick();
  const charges: Array<{ id: string; tokens: number; account: string }> = [];
  for (let i = 0; i < 20; i++) {
    const tokens = 150 + i * 13;
    const account = accounts[i % 2];
    charges.push({ ...(await charge(account, M, 2000, tokens - 20, 20)), tokens, account });
  }
  const t1 = await tick();
  const { prepareCorrection } = await import('../src/audit/corrections-apply.ts');
  const { correctionInput } = await import('../src/audit/corrections-terms.ts');
  const terms = (multiplier: number) => ({ model: M, from: t0.toISOString(), to: t1.toISOString(), multiplier, reason: `parts ${multiplier}` });
  const prepare = (multiplier: number) => prepareCorrection(gw.ledger, correctionInput(terms(multiplier), { modelId: M, from: t0, to: t1 }), 'admin:ops');
  const [first, second] = [await prepare(1.5), await prepare(1.25)];

  // Every AdjustPage command, by correction; before the first correction's second command on
  // parts-1, the second correction is applied whole, so that command finds the account moved.
  type AdjustPageCall = { correctionId: string; accountId: string; charges: number; refused: boolean };
  const calls: AdjustPageCall[] = [];
  const original = gw.ledger.command;
  const accountPrefix = streams.account('');
  let secondRun: Promise<unknown> | null = null;
  gw.ledger.command = (async (decider: unknown, stream: string, command: { type: string; charges?: Array<{ correctionId: string }> }, ...rest: unknown[]) => {
    const send = () => (original as (...a: unknown[]) => Promise<unknown>)(decider, stream, command, ...rest);
    if (command.type !== 'AdjustPage') return send();
    const accountId = stream.slice(accountPrefix.length);
    const call = { correctionId: command.charges![0].correctionId, accountId, charges: command.charges!.length, refused: false };
    calls.push(call);
    const firstsOnParts1 = calls.filter((c) => c.correctionId === call.correctionId && c.accountId === 'parts-1');
    if (!secondRun && accountId === 'parts-1' && firstsOnParts1.length === 2) {
      secondRun = second({ chargesPerCommand: 3 });
      await secondRun;
    }
    try {
      return await send();
    } catch (err) {
      call.refused = true;
      throw err;
    }
  }) as typeof original;
  let result: Awaited<ReturnType<typeof first>>;
  try {
    result = await first({ chargesPerCommand: 3 });
  } finally {
    gw.ledger.command = original;
  }
  assert.ok(secondRun, 'the second correction ran between two commands of the first');
  const firstId = result.report.correctionId;
  const secondId = calls.find((c) => c.correctionId !== firstId)!.correctionId;
  const mine = (id: string, account: string) => calls.filter((c) => c.correctionId === id && c.accountId === account);
  assert.ok(
    mine(firstId, 'parts-1').some((c) => c.refused),
    "the first correction's second command on parts-1 was refused: the account had moved",
  );
  // On parts-1 nothing else wrote meanwhile (the first correction waited); on parts-2 the two ran side by side.
  assert.equal(
    mine(secondId, 'parts-1').map((c) => [c.charges, c.refused]),
    [
      [3, false],
      [3, false],
      [3, false],
      [1, false],
    ],
    "the second correction's ten charges of parts-1 went as four commands",
  );
  assert.ok(
    calls.every((c) => c.charges <= 3),
    'no command over three charges',
  );

  // The second correction was appended last: it prices every charge, each adjusted at most once by each.
  const now = await nets();
  assert.equal(
    charges.map((c) => now.get(c.id)),
    charges.map((c) => Math.ceil((c.tokens * 1250) / 1000)),
    'every charge priced by the correction appended last',
  );
  for (const id of accounts) {
    const billed = charges.reduce((n, c) => n + (c.account === id ? Math.ceil((c.tokens * 1250) / 1000) : 0), 0);
    assert.is((await used(id)).quota_used, billed, id);
  }
  const adjusted = (await allEvents()).filter((e) => e.type === 'ChargeAdjusted' && charges.some((c) => c.id === e.data.chargeEventId));
  const pairs = adjusted.map((e) => `${e.data.correctionId}|${e.data.chargeEventId}`);
  assert.is(new Set(pairs).size, pairs.length, 'at most one adjustment per correction and charge');
  assert.is(adjusted.filter((e) => e.data.correctionId === secondId).length, 20);
  await verify();
});

if (process.env.DATABASE_URL) {
  test('on PostgreSQL, from two gateways on one schema at once: the same as one after the other', async () => {
    const other = await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema });
    try {
      for (let round = 0; round < 3; round++)
        await concurrentCorrections(gw, other, ['alpha-opus-4.7', 'alpha-opus-4.6', 'alpha-fable-5.1'][round], `pg${round}`);
    } finally {
      await other.close();
    }
  });
} else {
  console.log('corrections from two gateways: SKIPPED (needs DATABASE_URL: two gateways cannot share embedded PGlite)');
}

/** `n` chat charges on `accounts` in turn, a few at a time (each holds 20,000 tokens until settled); tokens of charge i: 100 + i. */
async function manyCharges(accounts: string[], model: string, n: number): Promise<Array<{ id: string; billed: number; tokens: number; account: string }>> {
  const out: Array<{ id: string; billed: number; tokens: number; account: string }> = [];
  for (let i = 0; i < n; i += 20) {
    const chunk = Array.from({ length: Math.min(20, n - i) }, (_, j) => i + j);
    out.push(
      ...(await Promise.all(
        chunk.map(async (k) => ({
          ...(await charge(accounts[k % accounts.length], model, 2000, 80 + k, 20)),
          tokens: 100 + k,
          account: accounts[k % accounts.length],
        })),
      )),
    );
  }
  return out;
}

test('the dry run pages through the charges on request and streams the full detail as NDJSON or CSV, with the same figures as its report', async () => {
  const M = 'alpha-haiku-4.5';
  await ok('PATCH', `/models/${M}`, { multiplier: 2 });
  const t0 = await tick();
  const made = await manyCharges(['north', 'south'], M, 25);
  const t1 = await tick();
  const terms = { model: M, from: t0.toISOString(), to: t1.toISOString(), multiplier: 1.5, dry_run: true };
  const report = await ok('POST', '/corrections', terms);
  assert.is(report.itemsComplete, true);
  assert.is(report.totals.charges, 25);
  const all = report.accounts.flatMap((a: Json) => a.items.map((i: Json) => ({ accountId: a.accountId, ...i })));
  const byId = (xs: Json[]) => [...xs].sort((x, y) => (x.eventId < y.eventId ? -1 : 1));

  const pages: Json[] = [];
  let after: string | undefined;
  do {
    const page = await ok('POST', '/corrections', { ...terms, limit: 10, ...(after ? { after } : {}) });
    assert.is(page.object, 'reconciliation.page');
    assert.ok(page.items.length <= 10);
    pages.push(...page.items);
    after = page.next ?? undefined;
  } while (after);
  assert.is(pages.length, 25);
  assert.equal(new Set(pages.map((p) => p.eventId)).size, 25, 'no charge twice across pages');
  assert.equal(byId(pages), byId(all), "the pages hold the report's items");
  assert.equal(new Set(pages.map((p) => p.eventId)), new Set(made.map((m) => m.id)));
  for (const p of pages) assert.is(p.corrected, Math.ceil((made.find((m) => m.id === p.eventId)!.tokens * 1500) / 1000));
  const bad = await admin('POST', '/corrections', { ...terms, limit: 10, after: 'not-a-cursor' });
  assert.is(bad.status, 400, bad.text);

  const ndjson = await fetch(`${gw.url}/admin/v1/corrections`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', accept: 'application/x-ndjson' },
    body: JSON.stringify(terms),
  });
  assert.match(ndjson.headers.get('content-type') ?? '', /application\/x-ndjson/);
  const lines = (await ndjson.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.is(lines.length, 26);
  assert.equal(byId(lines.slice(0, 25).map(({ object: _o, ...c }) => c)), byId(all));
  assert.is(lines[25].object, 'reconciliation');
  assert.equal(lines[25].totals, report.totals);

  const csv = await admin('POST', '/corrections', { ...terms, format: 'csv' });
  const rows = csv.text.split('\n');
  assert.is(rows[0].split(',')[0], 'account_id');
  assert.is(rows.slice(1, 26).filter((r) => r.includes(',chat,')).length, 25);
  assert.ok(
    rows.includes(`total,25,${report.totals.billedOriginally},${report.totals.billedNow},${report.totals.corrected},${report.totals.difference}`),
    csv.text.slice(-300),
  );
});

test('correcting many charges leaves the account snapshot small; the apply reports progress as NDJSON and an interrupted apply resumes, appending nothing twice', async () => {
  const M = 'cx/gen-6-terra';
  await ok('PATCH', `/models/${M}`, { multiplier: 2 });
  const t0 = await tick();
  const made = await manyCharges(['north'], M, 300);
  const t1 = await tick();
  const snapshotSize = async () => JSON.stringify((await gw.ledger.events.readSnapshot('account-north'))?.state ?? null).length;
  const before = await snapshotSize();

  // Interrupted: the correction and the first 100 adjustments were appended, then the process died.
  const terms = { model: M, from: t0.toISOString(), to: t1.toISOString(), multiplier: 1.5, reason: 'interrupted' };
  const cid = (await ok('POST', '/corrections', { ...terms, dry_run: true })).correctionId as string;
  const { prepareCorrection } = await import('../src/audit/corrections-apply.ts');
  const { correctionInput } = await import('../src/audit/corrections-terms.ts');
  const input = correctionInput(terms, { modelId: M, from: t0, to: t1 });
  let stopAt = 0;
  const interrupted = await prepareCorrection(gw.ledger, input, 'admin:ops');
  await interrupted({
    pageSize: 50,
    onProgress: (p) => {
      stopAt = p.appended;
      if (p.appended >= 100) throw new Error('killed');
    },
  }).catch((e: Error) => assert.is(e.message, 'killed'));
  assert.ok(stopAt >= 100 && stopAt < 300, `stopped after ${stopAt}`);
  assert.is((await adjustmentsOf(cid)).length, stopAt);

  const res = await fetch(`${gw.url}/admin/v1/corrections`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', accept: 'application/x-ndjson', 'x-tollgate-actor': 'ops' },
    body: JSON.stringify(terms),
  });
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const progress = lines.filter((l) => l.object === 'correction.progress');
  assert.ok(progress.length >= 2, JSON.stringify(lines.slice(0, 3)));
  assert.equal(progress[0], { object: 'correction.progress', phase: 'adjust', done: 0, total: 300, appended: 0, pass: 1 });
  assert.is(progress[progress.length - 1].done, 300);
  const last = lines[lines.length - 1];
  assert.is(last.object, 'reconciliation');
  assert.is(last.appended, 300 - stopAt, 'the rest, and only the rest');
  assert.is(last.already_applied, stopAt);
  const adjustments = await adjustmentsOf(cid);
  assert.is(adjustments.length, 300);
  assert.is(new Set(adjustments.map((e) => e.data.chargeEventId)).size, 300, 'one adjustment per charge');
  const now = await nets();
  assert.equal(
    made.map((m) => now.get(m.id)),
    made.map((m) => Math.ceil((m.tokens * 1500) / 1000)),
  );
  // The account's state no longer grows with the charges corrected.
  const after = await snapshotSize();
  assert.ok(after < before + 200, `snapshot of ${after} bytes after 300 adjustments (was ${before})`);
  assert.is((await ok('POST', '/corrections', terms)).appended, 0, 'applied again: nothing');
  await verify();
});

test('operator work is paced: each step waits for the read side, and backs off after the event loop was held up', async () => {
  const { Pacer } = await import('../src/audit/pacing.ts');
  let readSideWaits = 0;
  const pacer = new Pacer(async () => {
    readSideWaits++;
  });
  try {
    await pacer.step();
    assert.is(readSideWaits, 1, 'one wait for the read side per step');
    await new Promise((resolve) => setTimeout(resolve, 30)); // a page's database read
    // A step that holds the loop for 150 ms (as a page of hashing would): the next step backs off.
    const until = Date.now() + 150;
    while (Date.now() < until);
    // The page's next database read: the loop delay's monitor records the late turn meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 30));
    const slept = pacer.sleptMs;
    await pacer.step();
    assert.is(readSideWaits, 2);
    assert.ok(pacer.sleptMs > slept, `backed off after the loop was late (slept ${pacer.sleptMs - slept} ms)`);
  } finally {
    pacer.stop();
  }
});

test.run();
