// What an operator does with channels: a models config that cannot work stops the start with the
// model and the variable named; the admin API and the CLI list channels with their state and take
// one out and back (each change an event with its actor); a disabled channel gets no calls;
// /metrics shows calls, failures, failovers and state per channel. Plus the breaker's and the
// weighted order's rules on their own.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { openAccount } from './support/http.ts';
import { startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';
import { buildRoutes, parseModelsConfig } from '../src/catalogue/models-config.ts';
import { CircuitBreaker } from '../src/upstream/channels/breaker.ts';
import { channelOrder } from '../src/upstream/channels/failover.ts';
import type { Channel } from '../src/upstream/channels/registry.ts';
import { priceModel } from '../src/catalogue/index.ts';

const run = promisify(execFile);
const ADMIN = 'tg_admin_channel_operations_test';
// /metrics on the public port behind a token (TOLLGATE_METRICS_TOKEN), as docs/operating.md's "Metrics" shows.
const METRICS_TOKEN = 'metrics-token-for-channel-operations-test';
const UPSTREAM_KEY = 'sk-ant-upstream-secret-for-channel-test';
const MODEL = 'test/two-channel';
let gw: TestGateway;
let first: AnthropicDouble;
let second: AnthropicDouble;
let configDir: string;

function configFor(a: AnthropicDouble, b: AnthropicDouble) {
  const base = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete base.$schema;
  base.providers.first = { type: 'anthropic', baseURL: a.url, apiKeyEnv: 'CHANNEL_TEST_ANTHROPIC_KEY' };
  base.providers.second = { type: 'anthropic', baseURL: b.url, apiKeyEnv: 'CHANNEL_TEST_ANTHROPIC_KEY' };
  base.models[MODEL] = {
    channels: [
      { provider: 'first', upstreamModel: 'claude-a' },
      { provider: 'second', upstreamModel: 'claude-b' },
    ],
  };
  return base;
}

async function admin(method: string, path: string, body?: unknown) {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-tollgate-actor': 'ops' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

async function cli(args: string[]) {
  try {
    const { stdout } = await run(process.execPath, ['bin/tollgate.js', ...args], {
      env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
    });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout + e.stderr };
  }
}

const message = (key: string) =>
  fetch(`${gw.baseUrl}/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hello there' }] }),
  });

test.before(async () => {
  first = await startAnthropicDouble({ apiKey: UPSTREAM_KEY });
  second = await startAnthropicDouble({ apiKey: UPSTREAM_KEY });
  configDir = mkdtempSync(join(tmpdir(), 'tollgate-channels-'));
  writeFileSync(join(configDir, 'models.json'), JSON.stringify(configFor(first, second)));
  process.env.CHANNEL_TEST_ANTHROPIC_KEY = UPSTREAM_KEY;
  gw = await startTestGateway({ adminToken: ADMIN, metricsToken: METRICS_TOKEN, bootstrap: false, modelsConfig: join(configDir, 'models.json') });
  await priceModel(gw.ledger, { modelId: MODEL, multiplierMilli: 1000, status: 'ACTIVE', alias: null }, 'admin:test');
});
test.after(async () => {
  await gw?.stop();
  await first?.close();
  await second?.close();
  rmSync(configDir, { recursive: true, force: true });
});

test('a config that cannot work is refused at start, naming the model and the variable', () => {
  const config = parseModelsConfig(configFor(first, second));
  assert.throws(
    () => buildRoutes(config, () => undefined),
    (e: Error) => /CHANNEL_TEST_ANTHROPIC_KEY/.test(e.message) && e.message.includes(MODEL) && !e.message.includes(UPSTREAM_KEY),
  );
  const unknown = configFor(first, second);
  unknown.models[MODEL].channels[1].provider = 'nowhere';
  assert.throws(
    () => parseModelsConfig(unknown),
    (e: Error) => e.message.includes(MODEL) && e.message.includes('nowhere'),
  );
  const noKeyVar = configFor(first, second);
  delete noKeyVar.providers.first.apiKeyEnv;
  assert.throws(() => parseModelsConfig(noKeyVar), /apiKeyEnv/);
});

test('`tollgate serve` with an unset upstream key variable exits with that message, before serving', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    env: {
      ...process.env,
      CHANNEL_TEST_ANTHROPIC_KEY: '',
      TOLLGATE_MODELS_CONFIG: join(configDir, 'models.json'),
      PORT: '0',
      TOLLGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'tollgate-nokey-')),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.ok(code !== 0, out);
  assert.match(out, /CHANNEL_TEST_ANTHROPIC_KEY/);
  assert.match(out, new RegExp(MODEL.replace('/', '\\/')));
  assert.not.match(out, /base URL/);
});

test('channels are listed with their state; disabling one is an event with its actor, and it gets no calls', async () => {
  const listed = await admin('GET', '/channels');
  const ids = (listed.json.data as Array<{ id: string; state: string; models: string[] }>).filter((c) => c.models.includes(MODEL));
  assert.equal(
    ids.map((c) => [c.id, c.state]),
    [
      ['first/claude-a', 'closed'],
      ['second/claude-b', 'closed'],
    ],
  );

  const off = await admin('PATCH', '/channels/first/claude-a', { enabled: false, reason: 'provider incident' });
  assert.is(off.status, 200, JSON.stringify(off.json));
  assert.is(off.json.state, 'disabled');
  assert.is(off.json.disabled.by, 'admin:ops');
  const events = await gw.ledger.events.readStream('channel-first/claude-a');
  assert.equal(
    events.map((e) => [e.type, e.data.reason, e.metadata.actor]),
    [['ChannelDisabled', 'provider incident', 'admin:ops']],
  );
  // The same request again changes nothing and writes nothing.
  assert.is((await admin('PATCH', '/channels/first/claude-a', { enabled: false })).json.changed, false);
  assert.is((await gw.ledger.events.readStream('channel-first/claude-a')).length, 1);

  const account = await openAccount(gw, { quota: 100_000 });
  const before = first.calls;
  for (let i = 0; i < 3; i++) assert.is((await message(account.key)).status, 200);
  assert.is(first.calls, before, 'a disabled channel is not called');
  assert.is(second.requests.at(-1)?.body.model, 'claude-b');

  const metrics = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  assert.match(metrics, /tollgate_upstream_channel_state\{channel="first\/claude-a",state="disabled"\} 1/);
  assert.match(metrics, /tollgate_upstream_calls_total\{channel="second\/claude-b",outcome="ok"\} [3-9]/);
  assert.not.match(metrics, new RegExp(UPSTREAM_KEY));

  const on = await admin('PATCH', '/channels/first/claude-a', { enabled: true, reason: 'resolved' });
  assert.is(on.json.state, 'closed');
  assert.is((await message(account.key)).status, 200);
  assert.is(first.calls, before + 1, 'enabled again, the first channel takes calls first');
});

test('a failing first channel: the call fails over, metrics count it, the breaker opens at its threshold', async () => {
  const account = await openAccount(gw, { quota: 100_000 });
  first.setDefault({ status: 529 });
  try {
    for (let i = 0; i < 4; i++) assert.is((await message(account.key)).status, 200);
    const channel = (await admin('GET', '/channels')).json.data.find((c: { id: string }) => c.id === 'first/claude-a');
    assert.is(channel.state, 'open');
    assert.ok(channel.failovers >= 3, JSON.stringify(channel));
    const metrics = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    assert.match(metrics, /tollgate_upstream_failovers_total\{channel="first\/claude-a"\} [3-9]/);
    assert.match(metrics, /tollgate_upstream_calls_total\{channel="first\/claude-a",outcome="failed"\} [3-9]/);
  } finally {
    first.setDefault(null);
  }
});

test('bad channel requests are refused and write nothing', async () => {
  const head = await gw.ledger.events.headPosition();
  assert.is((await admin('PATCH', '/channels/nowhere/model', { enabled: false })).status, 404);
  assert.is((await admin('PATCH', '/channels/second/claude-b', { enabled: 'no' })).status, 400);
  assert.is((await admin('PATCH', '/channels/second/claude-b', {})).status, 400);
  assert.is(await gw.ledger.events.headPosition(), head);
});

test('the CLI lists channels and switches one off and on', async () => {
  const list = await cli(['channel', 'list']);
  assert.is(list.code, 0, list.stdout);
  assert.match(list.stdout, /second\/claude-b\t(closed|open|half_open)\tcalls=\d+/);
  const off = await cli(['channel', 'disable', 'second/claude-b', '--reason', 'maintenance', '--actor', 'carol']);
  assert.is(off.code, 0, off.stdout);
  assert.match(off.stdout, /channel second\/claude-b: disabled/);
  const events = await gw.ledger.events.readStream('channel-second/claude-b');
  assert.equal(events.at(-1)?.metadata.actor, 'admin:carol');
  assert.is((await cli(['channel', 'enable', 'second/claude-b'])).code, 0);
  assert.is((await admin('GET', '/channels')).json.data.find((c: { id: string }) => c.id === 'second/claude-b').state, 'closed');
});

test('statements and /v1/usage show the cached tokens the upstream reported', async () => {
  const account = await openAccount(gw, { quota: 1_000_000 });
  const body = {
    model: MODEL,
    max_tokens: 64,
    system: [{ type: 'text', text: 'A long and stable system prompt about harbours and tides. '.repeat(8), cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: 'hello there' }],
  };
  const replies: Array<{ usage: { cache_creation_input_tokens: number; cache_read_input_tokens: number } }> = [];
  for (let i = 0; i < 2; i++) {
    const r = await fetch(`${gw.baseUrl}/messages`, {
      method: 'POST',
      headers: { 'x-api-key': account.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(body),
    });
    assert.is(r.status, 200);
    replies.push((await r.json()) as (typeof replies)[number]);
  }
  const written = replies[0].usage.cache_creation_input_tokens;
  assert.ok(written > 0 && replies[1].usage.cache_read_input_tokens === written, JSON.stringify(replies.map((r) => r.usage)));
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date(Date.now() + 60_000).toISOString();
  const statement = await admin('GET', `/accounts/${account.accountId}/statement?from=${from}&to=${to}`);
  assert.equal(
    statement.json.lines.map((l: { cached_tokens: number; cache_write_tokens: number }) => [l.cache_write_tokens, l.cached_tokens]),
    [
      [written, 0],
      [0, written],
    ],
  );
  const csv = await (
    await fetch(`${gw.url}/admin/v1/accounts/${account.accountId}/statement?from=${from}&to=${to}&format=csv`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    })
  ).text();
  assert.ok(csv.split('\n')[0].endsWith(',cached_tokens,cache_write_tokens'));
  const usage = (await (await fetch(`${gw.baseUrl}/usage`, { headers: { authorization: `Bearer ${account.key}` } })).json()) as {
    totals: { cached_tokens: number; cache_write_tokens: number };
  };
  assert.equal([usage.totals.cached_tokens, usage.totals.cache_write_tokens], [written, written]);
});

test('breaker: opens after the threshold, admits one trial after the cool-down, closes on its success', () => {
  let now = 1_000;
  const b = new CircuitBreaker({ failureThreshold: 2, coolDownMs: 500 }, () => now);
  b.failure();
  assert.is(b.state, 'closed');
  b.failure();
  assert.is(b.state, 'open');
  assert.not.ok(b.admits());
  now += 500;
  assert.is(b.state, 'half_open');
  assert.ok(b.admits(), 'one trial');
  assert.not.ok(b.admits(), 'only one trial at a time');
  b.failure();
  assert.is(b.state, 'open', 'a failed trial re-opens at once');
  now += 500;
  assert.ok(b.admits());
  b.success();
  assert.is(b.state, 'closed');
  assert.ok(b.admits() && b.admits());
});

test('order: as configured without weights; by weight (a draw without replacement) with them; disabled ones left out', () => {
  const channel = (id: string, weight: number, disabled = false) =>
    ({ id, weight, health: { disabled: disabled ? { by: 'x', reason: '', at: '' } : null } }) as unknown as Channel;
  const plain = [channel('a', 0), channel('b', 0), channel('c', 0)];
  assert.equal(
    channelOrder(plain).map((c) => c.id),
    ['a', 'b', 'c'],
  );
  assert.equal(
    channelOrder([channel('a', 0, true), channel('b', 0)]).map((c) => c.id),
    ['b'],
  );
  const weighted = [channel('a', 1), channel('b', 3)];
  const firsts = { a: 0, b: 0 };
  let seed = 7;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return seed / 2147483647;
  };
  for (let i = 0; i < 4000; i++) firsts[channelOrder(weighted, undefined, random)[0].id as 'a' | 'b']++;
  assert.ok(firsts.b / 4000 > 0.7 && firsts.b / 4000 < 0.8, JSON.stringify(firsts));
  assert.equal(
    channelOrder(weighted, undefined, () => 0.99).map((c) => c.id),
    ['b', 'a'],
  );
});

test.run();
