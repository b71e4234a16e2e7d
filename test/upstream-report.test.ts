// Upstream reconciliation: the upstream_daily read model and GET /admin/v1/upstream-report (JSON,
// CSV, CLI). Real calls through a gateway with a model on two Anthropic channels (the first one
// failing now and then), one on an OpenAI channel and the simulated provider, checked to the token
// against what each upstream answered and the requests each double received; exact folds of
// hand-made events over two UTC days (older charges without a channel, releases after every
// channel failed); bad ranges refused with nothing written; rows identical after a rebuild. On
// PGlite, and on PostgreSQL with DATABASE_URL.
import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { testDatabases, type TestDatabase } from './support/db.ts';
import { startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { metadataFor } from '../src/ledger/ledger.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import { applyEvents, ensureReadModels } from '../projections/runner/runner.ts';
import { finishDdl } from '../projections/runner/ddl.ts';
import { ReplayMemory } from '../projections/runner/replay-memory.ts';
import { normaliseRow } from '../projections/runner/sql.ts';
import { UNRECORDED, upstreamDaily, upstreamReport, type UpstreamCount, type UpstreamDailyRow } from '../projections/catalogue/upstream-report.ts';
import { upstreamReportCsv, upstreamReportQuery } from '../src/catalogue/upstream-report.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them
import { accountCommand, definePlan, openAccount, subscribe } from '../src/accounts/index.ts';
import { issueKey } from '../src/keys/index.ts';
import { priceModel } from '../src/catalogue/index.ts';

const run = promisify(execFile);
const ADMIN = 'tg_admin_upstream_report_test_token';
const ANTHROPIC_KEY = 'sk-ant-upstream-report-test';
const OPENAI_KEY = 'sk-openai-upstream-report-test';
const MODEL = 'test/recon';
const OAI_MODEL = 'test/recon-oai';
const IMAGE_MODEL = 'cx/gen-6-terra';
const DAY_MS = 86_400_000;

type Counts = Record<UpstreamCount, number>;
const ZERO: Counts = {
  calls: 0,
  failures: 0,
  failovers: 0,
  prompt_tokens: 0,
  cached_tokens: 0,
  cache_write_tokens: 0,
  completion_tokens: 0,
  reasoning_tokens: 0,
  images: 0,
  billed: 0,
};
const COLUMNS = ['day', 'channel', 'upstream_model', ...Object.keys(ZERO)] as const;
const row = (day: string, channel: string, upstream_model: string, counts: Partial<Counts>): UpstreamDailyRow => ({
  day,
  channel,
  upstream_model,
  ...ZERO,
  ...counts,
});
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const sorted = (rows: UpstreamDailyRow[]) =>
  [...rows].sort((a, b) => byteOrder(a.day, b.day) || byteOrder(a.channel, b.channel) || byteOrder(a.upstream_model, b.upstream_model));
const csvOf = (rows: UpstreamDailyRow[]) => [COLUMNS.join(','), ...rows.map((r) => COLUMNS.map((c) => r[c]).join(','))].join('\n') + '\n';

// ---- the fold, on hand-made events over two UTC days ------------------------------------------

let position = 0;
const ev = (type: string, timestamp: string, data: Record<string, unknown>): ProjectedEvent => ({ id: `ev-${++position}`, type, position, timestamp, data });
const chat = (fields: Record<string, unknown>) => ({
  accountId: 'a',
  holdId: `h${position}`,
  requestId: `r${position}`,
  keyId: 'k',
  model: 'pub/model',
  multiplierMilli: 1000,
  reserved: 1000,
  fromQuota: 0,
  fromExtra: 0,
  reasoningEffort: null,
  api: 'chat.completions',
  streamed: false,
  aborted: false,
  ...fields,
});
const failed = (channel: string, upstreamModel?: string, error = 'http_529') => (upstreamModel ? { channel, upstreamModel, error } : { channel, error });

const EVENTS: ProjectedEvent[] = [
  // The last millisecond of 1 March: answered by the second channel after the first failed.
  ev(
    'ChatCharged',
    '2026-03-01T23:59:59.999Z',
    chat({
      promptTokens: 100,
      cachedTokens: 60,
      cacheWriteTokens: 20,
      completionTokens: 30,
      reasoningTokens: 10,
      billed: 130,
      channel: 'anth/claude-x',
      upstreamModel: 'claude-x',
      upstreamId: 'msg_1',
      failovers: [failed('oai/gpt-y', 'gpt-y')],
    }),
  ),
  // A charge from before channels were recorded.
  ev('ChatCharged', '2026-03-02T00:00:00.000Z', chat({ promptTokens: 10, completionTokens: 5, billed: 19 })),
  // Every channel failed: the first failure moved the call on, the last ended it.
  ev('ReservationReleased', '2026-03-02T08:00:00.000Z', {
    accountId: 'a',
    holdId: 'h',
    requestId: 'r',
    amount: 500,
    reason: 'upstream_error',
    failovers: [failed('oai/gpt-y', 'gpt-y'), failed('anth/claude-x', 'claude-x', 'timeout')],
  }),
  // The next channel refused the request itself: the failure before it still moved the call on.
  ev('ReservationReleased', '2026-03-02T09:00:00.000Z', {
    accountId: 'a',
    holdId: 'h',
    requestId: 'r',
    amount: 500,
    reason: 'invalid_request',
    failovers: [failed('oai/gpt-y', 'gpt-y')],
  }),
  // An image after a failed channel whose upstream model was not recorded.
  ev('ImageCharged', '2026-03-02T10:00:00.000Z', {
    accountId: 'a',
    holdId: 'h',
    requestId: 'r',
    keyId: 'k',
    model: 'pub/image',
    multiplierMilli: 1000,
    reserved: 45000,
    images: 1,
    tokensPerImage: 45000,
    size: '1024x1024',
    edit: false,
    billed: 45000,
    fromQuota: 45000,
    fromExtra: 0,
    channel: 'oai/gpt-image',
    upstreamModel: 'gpt-image-1',
    failovers: [failed('sim/img')],
  }),
  // Releases without failed channels, adjustments and other events touch nothing.
  ev('ReservationReleased', '2026-03-02T11:00:00.000Z', { accountId: 'a', holdId: 'h', requestId: 'r', amount: 500, reason: 'client_aborted' }),
  ev('ChargeAdjusted', '2026-03-02T11:30:00.000Z', {
    accountId: 'a',
    correctionId: 'c',
    chargeEventId: 'ev-1',
    requestId: 'r1',
    model: 'pub/model',
    chargedAt: '2026-03-01T23:59:59.999Z',
    billedBefore: 130,
    billedCorrected: 260,
    multiplierMilliBefore: 1000,
    multiplierMilliCorrected: 2000,
    delta: 130,
    quotaDelta: 130,
    extraDelta: 0,
  }),
  ev('QuotaReserved', '2026-03-02T11:45:00.000Z', {
    accountId: 'a',
    holdId: 'h9',
    requestId: 'r9',
    keyId: 'k',
    model: 'pub/model',
    kind: 'chat',
    amount: 10,
    expiresAt: '2026-03-02T12:45:00.000Z',
  }),
  ev(
    'ChatCharged',
    '2026-03-02T12:00:00.000Z',
    chat({ promptTokens: 7, completionTokens: 3, billed: 10, channel: 'anth/claude-x', upstreamModel: 'claude-x' }),
  ),
  // One channel twice in one call's failovers: one row, both attempts. Names CSV must quote.
  ev(
    'ChatCharged',
    '2026-03-02T13:00:00.000Z',
    chat({
      promptTokens: 1,
      completionTokens: 1,
      billed: 2,
      channel: 'odd,chan',
      upstreamModel: '=cmd',
      failovers: [failed('dup/x', 'x'), failed('dup/x', 'x', 'timeout')],
    }),
  ),
];

const MARCH_1 = [
  row('2026-03-01', 'anth/claude-x', 'claude-x', {
    calls: 1,
    prompt_tokens: 100,
    cached_tokens: 60,
    cache_write_tokens: 20,
    completion_tokens: 30,
    reasoning_tokens: 10,
    billed: 130,
  }),
  row('2026-03-01', 'oai/gpt-y', 'gpt-y', { calls: 1, failures: 1, failovers: 1 }),
];
const MARCH_2 = [
  row('2026-03-02', UNRECORDED, UNRECORDED, { calls: 1, prompt_tokens: 10, completion_tokens: 5, billed: 19 }),
  row('2026-03-02', 'anth/claude-x', 'claude-x', { calls: 2, failures: 1, failovers: 0, prompt_tokens: 7, completion_tokens: 3, billed: 10 }),
  row('2026-03-02', 'dup/x', 'x', { calls: 2, failures: 2, failovers: 2 }),
  row('2026-03-02', 'oai/gpt-image', 'gpt-image-1', { calls: 1, images: 1, billed: 45000 }),
  row('2026-03-02', 'oai/gpt-y', 'gpt-y', { calls: 2, failures: 2, failovers: 2 }),
  row('2026-03-02', 'odd,chan', '=cmd', { calls: 1, prompt_tokens: 1, completion_tokens: 1, billed: 2 }),
  row('2026-03-02', 'sim/img', UNRECORDED, { calls: 1, failures: 1, failovers: 1 }),
];

test('the fold is pure: keys once per event, the given row never changed', () => {
  const e = EVENTS.at(-1)!;
  assert.equal(
    upstreamDaily.keysOf(e).map((k) => JSON.parse(k)),
    [
      ['2026-03-02', 'dup/x', 'x'],
      ['2026-03-02', 'odd,chan', '=cmd'],
    ],
  );
  const given = Object.freeze(row('2026-03-02', 'dup/x', 'x', { calls: 5, failures: 5, failovers: 5 }));
  const next = upstreamDaily.evolve(given, e, upstreamDaily.keysOf(e)[0]);
  assert.equal(next, row('2026-03-02', 'dup/x', 'x', { calls: 7, failures: 7, failovers: 7 }));
  assert.equal(upstreamDaily.evolve(given, e, upstreamDaily.keysOf(e)[0]), next, 'same input, same row');
  assert.equal(upstreamDaily.keysOf(EVENTS[5]), [], 'a release without failed channels touches no row');
});

test('the range: UTC days of ISO dates or zoned times, both included, at most 366 days', () => {
  assert.equal(upstreamReportQuery({ from: '2026-03-01', to: '2026-03-02' }), { from: '2026-03-01', to: '2026-03-02', format: 'json' });
  assert.equal(upstreamReportQuery({ from: '2026-03-01T23:30:00-02:00', to: '2026-03-02T12:00Z', format: 'csv' }), {
    from: '2026-03-02',
    to: '2026-03-02',
    format: 'csv',
  });
  assert.equal(
    upstreamReportQuery({ from: '2026-03-01T10:00:00Z', to: '2026-03-01' }),
    { from: '2026-03-01', to: '2026-03-01', format: 'json' },
    'a date stands for its whole day',
  );
  assert.equal(upstreamReportQuery({ from: '2024-01-01', to: '2024-12-31' }).to, '2024-12-31', '366 days');
  const refused: Array<[Record<string, unknown>, string]> = [
    [{ to: '2026-03-01' }, 'from'],
    [{ from: '2026-03-01' }, 'to'],
    [{ from: '2026-03-02', to: '2026-03-01' }, 'from'],
    [{ from: '2026-03-01T10:00:00Z', to: '2026-03-01T09:59:59Z' }, 'from'],
    [{ from: '2024-01-01', to: '2025-01-01' }, 'to'],
    [{ from: '2026-02-30', to: '2026-03-01' }, 'from'],
    [{ from: '2026-03-01T24:00:00Z', to: '2026-03-02' }, 'from'],
    [{ from: '2026-03-01T10:00:00', to: '2026-03-02' }, 'from'],
    [{ from: 'yesterday', to: '2026-03-02' }, 'from'],
    [{ from: ['2026-03-01', '2026-03-02'], to: '2026-03-02' }, 'from'],
    [{ from: '1969-12-31', to: '2026-03-02' }, 'from'],
    [{ from: '2026-03-01', to: '2026-03-02', format: 'xml' }, 'format'],
    [{ from: '2026-03-01', to: '2026-03-02', form: 'csv' }, 'form'],
  ];
  for (const [query, param] of refused) {
    assert.throws(
      () => upstreamReportQuery(query),
      (e: { status: number; param: string }) => e.status === 400 && e.param === param,
      JSON.stringify(query),
    );
  }
});

test('CSV: a header line, then one line per row; odd names quoted', () => {
  const rows = [row('2026-03-02', 'odd,chan', '=cmd', { calls: 1, billed: 2 }), row('2026-03-02', 'say "hi"', '-x', {})];
  assert.is(
    upstreamReportCsv({ from: '2026-03-02', to: '2026-03-02', rows, totals: { ...ZERO } }),
    [COLUMNS.join(','), '2026-03-02,"odd,chan","=cmd",1,0,0,0,0,0,0,0,0,2', '2026-03-02,"say ""hi""","-x",0,0,0,0,0,0,0,0,0,0'].join('\n') + '\n',
  );
});

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase }>(`upstream_daily on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
  });
  s.after(async (ctx) => {
    for (const suffix of ['single', 'replay']) await ctx.t.db.exec(`DROP SCHEMA IF EXISTS "${ctx.t.schema}_${suffix}" CASCADE`);
    await ctx.t.cleanup();
  });
  const rowsOf = async (t: TestDatabase, schema: string) => (await t.db.query(`SELECT * FROM "${schema}".upstream_daily ORDER BY key`)).map(normaliseRow);

  s('every attempt lands on its day, channel and upstream model, to the token', async ({ t }) => {
    const schema = `${t.schema}_rm`;
    await ensureReadModels(t.db, schema, [upstreamDaily]);
    assert.is(await applyEvents(t.db, schema, EVENTS, 0, [upstreamDaily]), EVENTS.length);
    assert.equal(await upstreamReport(t.db, schema, { from: '2026-03-01', to: '2026-03-02' }), [...MARCH_1, ...MARCH_2]);
    assert.equal(await upstreamReport(t.db, schema, { from: '2026-03-01', to: '2026-03-01' }), MARCH_1);
    assert.equal(await upstreamReport(t.db, schema, { from: '2026-03-02', to: '2026-03-31' }), MARCH_2);
    assert.equal(await upstreamReport(t.db, schema, { from: '2026-03-03', to: '2026-03-31' }), []);
  });

  s('event by event, and as a replay with rows held in memory: the same rows', async ({ t }) => {
    const live = await rowsOf(t, `${t.schema}_rm`);
    assert.is(live.length, MARCH_1.length + MARCH_2.length);
    const single = `${t.schema}_single`;
    await ensureReadModels(t.db, single, [upstreamDaily]);
    for (const e of EVENTS) await applyEvents(t.db, single, [e], e.position - 1, [upstreamDaily]);
    assert.equal(await rowsOf(t, single), live);
    // As a rebuild loads: unlogged tables, pages of 3, staged rows flushed at the end.
    const replay = `${t.schema}_replay`;
    await ensureReadModels(t.db, replay, [upstreamDaily], { bulk: true });
    const memory = new ReplayMemory({ copy: t.db.kind === 'postgres', maxStaged: 4 });
    let at = 0;
    for (let i = 0; i < EVENTS.length; i += 3) at = await applyEvents(t.db, replay, EVENTS.slice(i, i + 3), at, [upstreamDaily], memory);
    const finish = finishDdl(replay, [upstreamDaily]);
    await t.db.transaction(async (tx) => {
      await memory.flushAll(tx, replay);
      for (const stmt of [...finish.durable, ...finish.indexes, ...finish.keys]) await tx.query(stmt);
    });
    assert.equal(await rowsOf(t, replay), live);
  });

  s.run();
}

// ---- real calls through a gateway ------------------------------------------------------------

let gw: TestGateway;
let first: AnthropicDouble;
let second: AnthropicDouble;
let openai: OpenAIDouble;
let configDir: string;
let key: string;
let accountId: string;
let expected: UpstreamDailyRow[] = [];
const FROM = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const TO = new Date(Date.now() + DAY_MS).toISOString().slice(0, 10);

async function admin(method: string, path: string, body?: unknown) {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* csv */
  }
  return { status: res.status, type: res.headers.get('content-type') ?? '', json, text };
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

/** The UTC day the ledger recorded a request's charge or release on. */
async function dayOfRequest(requestId: string): Promise<string> {
  const events = await gw.ledger.events.readAll(0, 100_000);
  const e = events.find((x) => x.data.requestId === requestId && ['ChatCharged', 'ImageCharged', 'ReservationReleased'].includes(x.type));
  if (!e) throw new Error(`no charge or release for ${requestId}`);
  return e.timestamp.slice(0, 10);
}

/** Adds what one attempt should add to its row. */
function expectAttempt(day: string, channel: string, upstreamModel: string, counts: Partial<Counts>) {
  let r = expected.find((x) => x.day === day && x.channel === channel && x.upstream_model === upstreamModel);
  if (!r) expected.push((r = row(day, channel, upstreamModel, {})));
  for (const [k, v] of Object.entries(counts)) (r as Record<string, number>)[k] += v as number;
  expected = sorted(expected);
}

const SYSTEM = [{ type: 'text', text: 'You answer questions about toll roads, bridges and tunnels. '.repeat(12), cache_control: { type: 'ephemeral' } }];
const messages = (content: string, stream = false) =>
  fetch(`${gw.baseUrl}/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: MODEL, max_tokens: 64, system: SYSTEM, messages: [{ role: 'user', content }], ...(stream ? { stream: true } : {}) }),
  });

/** The counts an Anthropic usage object stands for (prompt: input + cache written + cache read). */
const anthropicCounts = (u: Record<string, number>, billed: number): Partial<Counts> => ({
  calls: 1,
  prompt_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
  cached_tokens: u.cache_read_input_tokens,
  cache_write_tokens: u.cache_creation_input_tokens,
  completion_tokens: u.output_tokens,
  billed,
});

test.before(async () => {
  first = await startAnthropicDouble({ apiKey: ANTHROPIC_KEY });
  second = await startAnthropicDouble({ apiKey: ANTHROPIC_KEY });
  openai = await startOpenAIDouble({ apiKey: OPENAI_KEY });
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.first = { type: 'anthropic', baseURL: first.url, apiKeyEnv: 'UPSTREAM_REPORT_TEST_ANTHROPIC_KEY' };
  config.providers.second = { type: 'anthropic', baseURL: second.url, apiKeyEnv: 'UPSTREAM_REPORT_TEST_ANTHROPIC_KEY' };
  config.providers.third = { type: 'openai', baseURL: `${openai.url}/v1`, apiKeyEnv: 'UPSTREAM_REPORT_TEST_OPENAI_KEY' };
  config.models[MODEL] = {
    channels: [
      { provider: 'first', upstreamModel: 'claude-a' },
      { provider: 'second', upstreamModel: 'claude-b' },
    ],
  };
  config.models[OAI_MODEL] = { provider: 'third', upstreamModel: 'gpt-recon' };
  // The breaker would pass over the failing channel; here every call tries it first.
  config.failover = { failureThreshold: 1000 };
  configDir = mkdtempSync(join(tmpdir(), 'tollgate-upstream-report-'));
  writeFileSync(join(configDir, 'models.json'), JSON.stringify(config));
  process.env.UPSTREAM_REPORT_TEST_ANTHROPIC_KEY = ANTHROPIC_KEY;
  process.env.UPSTREAM_REPORT_TEST_OPENAI_KEY = OPENAI_KEY;
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false, modelsConfig: join(configDir, 'models.json') });
  const l = gw.ledger;
  await priceModel(l, { modelId: MODEL, multiplierMilli: 1000, status: 'ACTIVE', alias: null }, 'admin:test');
  await priceModel(l, { modelId: OAI_MODEL, multiplierMilli: 1500, status: 'ACTIVE', alias: null }, 'admin:test');
  await definePlan(l, { planId: 'recon', name: 'Recon', quota: 10_000_000, validityDays: 30, requestsPerMinute: 10_000, models: ['*'] }, 'admin:test');
  accountId = await openAccount(l, { accountId: 'recon', name: 'Recon' }, 'admin:test');
  await subscribe(l, accountId, 'recon', 'admin:test');
  key = (await issueKey(l, accountId, 'recon', 'admin:test')).secret;
});
test.after(async () => {
  await gw?.stop();
  await first?.close();
  await second?.close();
  await openai?.close();
  rmSync(configDir, { recursive: true, force: true });
});

test('calls with failovers, caches, reasoning, an image and an older charge: exact rows in JSON', async () => {
  const channelOf = async (model: string) =>
    ((await admin('GET', '/channels')).json.data as Array<{ id: string; models: string[] }>).find((c) => c.models.includes(model))!.id;
  const simulated = await channelOf(IMAGE_MODEL);

  // Answered by the first channel: the cache written, then read.
  for (const content of ['What is a toll plaza?', 'And an open-road toll?']) {
    const res = await messages(content);
    const body = (await res.json()) as { usage: Record<string, number> };
    assert.is(res.status, 200);
    expectAttempt(
      await dayOfRequest(res.headers.get('x-request-id')!),
      'first/claude-a',
      'claude-a',
      anthropicCounts(body.usage, Number(res.headers.get('x-tollgate-billed-tokens'))),
    );
  }
  // The first channel fails (overloaded): the second answers.
  first.script({ status: 529 });
  const moved = await messages('Who pays at a shadow toll?');
  const movedBody = (await moved.json()) as { usage: Record<string, number> };
  assert.is(moved.status, 200);
  const movedDay = await dayOfRequest(moved.headers.get('x-request-id')!);
  expectAttempt(movedDay, 'first/claude-a', 'claude-a', { calls: 1, failures: 1, failovers: 1 });
  expectAttempt(movedDay, 'second/claude-b', 'claude-b', anthropicCounts(movedBody.usage, Number(moved.headers.get('x-tollgate-billed-tokens'))));
  // Both fail: nothing charged; the first moved the call on, the second ended it.
  first.script({ status: 529 });
  second.script({ status: 529 });
  const failedCall = await messages('Is this call going to fail?');
  assert.ok(failedCall.status >= 500, String(failedCall.status));
  const failedDay = await dayOfRequest(failedCall.headers.get('x-request-id')!);
  expectAttempt(failedDay, 'first/claude-a', 'claude-a', { calls: 1, failures: 1, failovers: 1 });
  expectAttempt(failedDay, 'second/claude-b', 'claude-b', { calls: 1, failures: 1 });
  // A stream moved to the second channel before its first byte: its usage from the events.
  first.script({ status: 529 });
  const stream = await messages('Stream me an answer about toll tags', true);
  assert.is(stream.status, 200);
  // Anthropic's stream counts are running totals: the latest value of each wins.
  let usage: Record<string, number> = {};
  for (const line of (await stream.text()).split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const data = JSON.parse(line.slice(6));
    if (data.type === 'message_start') usage = { ...usage, ...data.message.usage };
    if (data.type === 'message_delta') usage = { ...usage, ...data.usage };
  }
  const streamDay = await dayOfRequest(stream.headers.get('x-request-id')!);
  const streamed = anthropicCounts(usage, 0);
  expectAttempt(streamDay, 'first/claude-a', 'claude-a', { calls: 1, failures: 1, failovers: 1 });
  // Multiplier 1, no cache weights: billed is every prompt and completion token.
  expectAttempt(streamDay, 'second/claude-b', 'claude-b', { ...streamed, billed: streamed.prompt_tokens! + streamed.completion_tokens! });
  // The OpenAI channel: reasoning tokens, then a cached prompt.
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: OAI_MODEL,
        reasoning_effort: 'low',
        messages: [
          { role: 'system', content: 'You know toll roads. '.repeat(20) },
          { role: 'user', content: 'How do toll tags work?' },
        ],
      }),
    });
    const u = (
      (await res.json()) as {
        usage: {
          prompt_tokens: number;
          completion_tokens: number;
          prompt_tokens_details?: { cached_tokens?: number };
          completion_tokens_details?: { reasoning_tokens?: number };
        };
      }
    ).usage;
    assert.is(res.status, 200);
    expectAttempt(await dayOfRequest(res.headers.get('x-request-id')!), 'third/gpt-recon', 'gpt-recon', {
      calls: 1,
      prompt_tokens: u.prompt_tokens,
      cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0,
      completion_tokens: u.completion_tokens,
      reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
      billed: Number(res.headers.get('x-tollgate-billed-tokens')),
    });
  }
  // An image on the simulated provider (a channel of its own).
  const image = await fetch(`${gw.baseUrl}/images/generations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: IMAGE_MODEL, prompt: 'a toll gate at dawn' }),
  });
  await image.arrayBuffer();
  assert.is(image.status, 200);
  expectAttempt(await dayOfRequest(image.headers.get('x-request-id')!), simulated, simulated.slice(simulated.indexOf('/') + 1), {
    calls: 1,
    images: 1,
    billed: Number(image.headers.get('x-tollgate-billed-tokens')),
  });
  // A charge as the ledger recorded them before channels: under (unrecorded).
  const md = metadataFor('key:older');
  await accountCommand(
    gw.ledger,
    accountId,
    {
      type: 'Reserve',
      holdId: 'older-hold',
      requestId: 'older-call',
      keyId: 'older',
      model: MODEL,
      kind: 'chat',
      amount: 1000,
      now: new Date(),
      ttlMs: 60_000,
    },
    md,
  );
  const older = await accountCommand(
    gw.ledger,
    accountId,
    {
      type: 'SettleChat',
      holdId: 'older-hold',
      multiplierMilli: 1000,
      promptTokens: 11,
      completionTokens: 4,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
    },
    md,
  );
  expectAttempt(await dayOfRequest('older-call'), UNRECORDED, UNRECORDED, {
    calls: 1,
    prompt_tokens: 11,
    completion_tokens: 4,
    billed: Number((older.events[0].data as { billed: number }).billed),
  });

  // What each upstream received is what the report counts for it.
  const report = await admin('GET', `/upstream-report?from=${FROM}&to=${TO}`);
  assert.is(report.status, 200, report.text);
  assert.equal(report.json.rows, expected);
  const sum = (channel: string, c: keyof Counts) => expected.filter((r) => r.channel === channel).reduce((n, r) => n + r[c], 0);
  assert.is(sum('first/claude-a', 'calls'), first.calls);
  assert.is(sum('second/claude-b', 'calls'), second.calls);
  assert.is(sum('third/gpt-recon', 'calls'), openai.calls);
  assert.equal([first.calls, sum('first/claude-a', 'failures'), sum('first/claude-a', 'failovers')], [5, 3, 3]);
  assert.equal([second.calls, sum('second/claude-b', 'failures'), sum('second/claude-b', 'failovers')], [3, 1, 0]);
  assert.ok(sum('first/claude-a', 'cached_tokens') > 0 && sum('first/claude-a', 'cache_write_tokens') > 0, 'the first channel wrote then read its cache');
  assert.is(sum('third/gpt-recon', 'reasoning_tokens'), 16);
  assert.ok(sum('third/gpt-recon', 'cached_tokens') > 0);
  assert.is(report.json.object, 'upstream_report');
  assert.equal([report.json.from, report.json.to], [FROM, TO]);
  const totals = Object.fromEntries(Object.keys(ZERO).map((c) => [c, expected.reduce((n, r) => n + r[c as keyof Counts], 0)]));
  assert.equal(report.json.totals, totals);

  // Billed: every charge in the log, and nothing else.
  const log = await gw.ledger.events.readAll(0, 100_000);
  const billedOf = (type: string) => log.filter((e) => e.type === type).reduce((n, e) => n + Number(e.data.billed), 0);
  assert.is(report.json.totals.billed, billedOf('ChatCharged') + billedOf('ImageCharged'));
  assert.is(
    report.json.rows.filter((r: UpstreamDailyRow) => r.images === 0).reduce((n: number, r: UpstreamDailyRow) => n + r.billed, 0),
    billedOf('ChatCharged'),
  );
});

test('CSV through the API, and the CLI in CSV, JSON and lines', async () => {
  const csv = await admin('GET', `/upstream-report?from=${FROM}&to=${TO}&format=csv`);
  assert.is(csv.status, 200);
  assert.match(csv.type, /^text\/csv/);
  assert.is(csv.text, csvOf(expected));
  const json = (await admin('GET', `/upstream-report?from=${FROM}&to=${TO}`)).json;

  const fromCli = await cli(['upstream-report', '--from', FROM, '--to', TO, '--format', 'csv']);
  assert.is(fromCli.code, 0, fromCli.stderr);
  assert.is(fromCli.stdout, csv.text);
  const asJson = await cli(['upstream-report', '--from', FROM, '--to', TO, '--json']);
  assert.is(asJson.code, 0, asJson.stderr);
  assert.equal(JSON.parse(asJson.stdout), json);
  const lines = await cli(['upstream-report', '--from', FROM, '--to', TO]);
  assert.is(lines.code, 0, lines.stderr);
  const out = lines.stdout.trim().split('\n');
  assert.is(out.length, expected.length + 1);
  const moved = expected.find((r) => r.channel === 'first/claude-a')!;
  assert.ok(
    out.includes(
      `${moved.day}\tfirst/claude-a\tclaude-a\tcalls=${moved.calls}\tfailures=${moved.failures}\tfailovers=${moved.failovers}\tprompt=${moved.prompt_tokens}\tcached=${moved.cached_tokens}\tcache_write=${moved.cache_write_tokens}\tcompletion=${moved.completion_tokens}\treasoning=0\timages=0\tbilled=${moved.billed}`,
    ),
    lines.stdout,
  );
  assert.match(out.at(-1)!, new RegExp(`^total\\t\\t\\tcalls=${json.totals.calls}\\t.*\\tbilled=${json.totals.billed}$`));
});

test('bad ranges are a 400 in the admin error shape (and a CLI error); nothing is written', async () => {
  const head = await gw.ledger.events.headPosition();
  const cases = [
    ['', 'from'],
    [`?from=${FROM}`, 'to'],
    [`?to=${TO}`, 'from'],
    [`?from=${TO}&to=${FROM}`, 'from'],
    ['?from=2024-01-01&to=2025-01-01', 'to'],
    ['?from=2026-02-30&to=2026-03-01', 'from'],
    ['?from=last%20week&to=2026-03-01', 'from'],
    [`?from=${FROM}&from=${FROM}&to=${TO}`, 'from'],
    [`?from=${FROM}&to=${TO}&format=xlsx`, 'format'],
  ];
  for (const [query, param] of cases) {
    const r = await admin('GET', `/upstream-report${query}`);
    assert.is(r.status, 400, `${query}: ${r.text}`);
    assert.is(r.json.error.type, 'invalid_request_error');
    assert.is(r.json.error.param, param, query);
    assert.type(r.json.error.message, 'string');
  }
  assert.is((await admin('GET', '/upstream-report?from=2024-01-01&to=2024-12-31')).status, 200, '366 days');
  const noToken = await fetch(`${gw.url}/admin/v1/upstream-report?from=${FROM}&to=${TO}`);
  assert.is(noToken.status, 401);

  const missing = await cli(['upstream-report', '--from', FROM]);
  assert.is(missing.code, 2);
  assert.match(missing.stderr, /--to/);
  const inverted = await cli(['upstream-report', '--from', TO, '--to', FROM]);
  assert.is(inverted.code, 1);
  assert.match(inverted.stderr, /400: 'from' must not be after 'to'/);
  const format = await cli(['upstream-report', '--from', FROM, '--to', TO, '--format', 'xml']);
  assert.is(format.code, 2);
  assert.is(await gw.ledger.events.headPosition(), head, 'nothing written');
});

test('a rebuild from the log gives the very same rows', async () => {
  const rows = async () => (await gw.db.query(`SELECT * FROM "${gw.ledger.rmSchema}".upstream_daily ORDER BY key`)).map(normaliseRow);
  const before = await rows();
  const report = (await admin('GET', `/upstream-report?from=${FROM}&to=${TO}`)).json;
  assert.is(before.length, expected.length);
  const rebuilt = await admin('POST', '/rebuild');
  assert.is(rebuilt.status, 200);
  assert.match(rebuilt.text, /"type":"done"/);
  assert.equal(await rows(), before);
  assert.equal((await admin('GET', `/upstream-report?from=${FROM}&to=${TO}`)).json, report);
});

test.run();
