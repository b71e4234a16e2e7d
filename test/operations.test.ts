// Operations on a real `tollgate serve` process: /healthz, /readyz and /metrics answer what the
// ledger holds, and SIGTERM under load finishes every call in flight (charged exactly once, no
// hold left open) before the process exits. Runs on embedded PGlite and, with DATABASE_URL, on
// PostgreSQL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnGateway, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { eventually, writeModelsConfig } from './support/http.ts';
import { openPglite, openPostgres, type Database } from '../src/eventstore/db.ts';
import { readiness } from '../src/wiring/health-routes.ts';
import type { Ledger } from '../src/ledger/ledger.ts';

const url = process.env.DATABASE_URL;
const engine = url ? 'postgres' : 'pglite';

/** The default models, served by the simulated upstream slowed down (6-8 s a call) so all are in flight at once even on a loaded machine. */
function slowModelsConfig(): string {
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.simulated = { type: 'simulated', tokenDelayMs: 300, imageDelayMs: 8000 };
  return writeModelsConfig(config);
}

const post = (g: GatewayProcess, path: string, body: unknown) =>
  fetch(`${g.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${g.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/** Prometheus text: every sample as name{labels} → value (HELP/TYPE lines checked for form). */
function parseProm(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      assert.ok(/^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$/.test(line), `comment line: ${line}`);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    assert.ok(m, `sample line: ${line}`);
    samples.set(m![1], Number(m![2]));
  }
  return samples;
}

const ops = suite(`operations endpoints on ${engine}`);
let gw: GatewayProcess;
ops.before(async () => {
  // /metrics on a port of its own (TOLLGATE_METRICS_PORT), as docs/operating.md's "Metrics" shows.
  gw = await spawnGateway({ TOLLGATE_METRICS_PORT: '0' });
});

/** The metrics port, from its start-up log line. */
const metricsOrigin = (g: GatewayProcess) => `http://127.0.0.1:${/"port":(\d+)[^\n]*"msg":"metrics listening"/.exec(g.output())![1]}`;
ops.after(async () => {
  await gw?.stop();
});

ops('/healthz answers while the process lives; /readyz reports the store and the projection lag', async () => {
  const origin = gw.baseUrl.replace(/\/v1$/, '');
  const health = await fetch(`${origin}/healthz`);
  assert.is(health.status, 200);
  const ready = await fetch(`${origin}/readyz`);
  assert.is(ready.status, 200);
  const body = (await ready.json()) as { status: string; store: string; projection_lag: { head: number; checkpoint: number; events: number } };
  assert.is(body.status, 'ready');
  assert.is(body.store, 'ok');
  assert.ok(body.projection_lag.head > 0, 'bootstrap wrote events');
  assert.ok(body.projection_lag.checkpoint <= body.projection_lag.head);
});

ops('/metrics counts requests by route and status, billed tokens by model, append latency and open holds', async () => {
  const origin = gw.baseUrl.replace(/\/v1$/, '');
  const scrape = async () => parseProm(await (await fetch(`${metricsOrigin(gw)}/metrics`)).text());
  const publicMetrics = await fetch(`${origin}/metrics`);
  await publicMetrics.arrayBuffer();
  assert.is(publicMetrics.status, 404, 'not on the public port');
  const before = await scrape();
  const ok = await post(gw, '/chat/completions', { model: 'gen-6-terra', messages: [{ role: 'user', content: 'count me' }], max_tokens: 8 });
  assert.is(ok.status, 200);
  const billedHeader = Number(ok.headers.get('x-tollgate-billed-tokens'));
  assert.ok(billedHeader > 0);
  await ok.arrayBuffer();
  const bad = await post(gw, '/chat/completions', { model: 'gen-6-terra', messages: 'not a list' });
  assert.is(bad.status, 400);
  await bad.arrayBuffer();
  const after = await scrape();

  const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  assert.is(delta('tollgate_http_requests_total{route="/v1/chat/completions",method="POST",status="200"}'), 1);
  assert.is(delta('tollgate_http_requests_total{route="/v1/chat/completions",method="POST",status="400"}'), 1);
  assert.is(delta('tollgate_http_request_duration_seconds_count{route="/v1/chat/completions",method="POST",status="200"}'), 1);
  // Labelled by the model's canonical id, whatever alias the caller used.
  assert.is(delta('tollgate_billed_tokens_total{model="cx/gen-6-terra"}'), billedHeader);
  // Hold and charge: one append when the upstream answered while the hold lingered, else two.
  const appends = delta('tollgate_eventstore_append_duration_seconds_count');
  assert.ok(appends === 1 || appends === 2, `hold and charge appended (${appends} appends)`);
  // The gauge reads the holds read model, which the projection updates just after the response.
  const settled = await eventually(
    async () => (await scrape()).get('tollgate_open_holds'),
    (n) => n === 0,
    15_000,
  );
  assert.is(settled, 0);
  assert.ok(after.has('tollgate_projection_lag_events') && after.has('tollgate_projection_lag_seconds'));
  assert.ok(after.has('process_resident_memory_bytes'), 'default process metrics');
  // Where calls' time goes is listed only when asked for (TOLLGATE_CALL_PHASES=on, test/call-phases.test.ts).
  assert.not.ok(
    [...after.keys()].some((k) => k.startsWith('tollgate_call_phase')),
    'no call phases unless asked for',
  );
  // Unmatched paths share one label value: a scan cannot blow up the series count.
  await (await fetch(`${origin}/no/such/${Math.random()}`)).arrayBuffer();
  const scanned = await scrape();
  assert.ok([...scanned.keys()].every((k) => !k.includes('/no/such/')));
});

ops('/readyz answers 503 when the store is unreachable or the read models lag past the bound', async () => {
  const ctx = () => ({ status: 0, body: undefined as unknown, set() {} }) as never as { status: number; body: { status: string } };
  const logged: string[] = [];
  const log = { warn: (o: object, m: string) => logged.push(`${m} ${JSON.stringify(o)}`), info: () => undefined };
  const opts = { timeoutMs: 2000, log };
  const down = {
    rmSchema: 'x',
    events: { headPosition: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:40371')) },
    readModels: { db: { query: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:40371')) }, schema: 'x' },
  } as unknown as Ledger;
  const c1 = ctx();
  await readiness(down, { events: 10_000, seconds: 30 }, opts)(c1 as never);
  assert.is(c1.status, 503);
  assert.is(c1.body.status, 'unavailable');
  // The status only: the database's address and error are for the log, not the public.
  assert.not.match(JSON.stringify(c1.body), /ECONNREFUSED|127\.0\.0\.1/);
  assert.match(logged.join('\n'), /ECONNREFUSED/);
  // A database that answers nothing (a stalled link): /readyz still answers, within its bound.
  const stalled = {
    rmSchema: 'x',
    events: { headPosition: () => new Promise(() => undefined) },
    readModels: { db: { query: () => new Promise(() => undefined) }, schema: 'x' },
  } as unknown as Ledger;
  const c5 = ctx();
  const started = Date.now();
  await readiness(stalled, { events: 10_000, seconds: 30 }, opts)(c5 as never);
  assert.is(c5.status, 503);
  assert.ok(Date.now() - started < 30_000, 'answered, not left waiting on the database');
  const lagging = {
    rmSchema: 'x',
    events: { headPosition: async () => 500, readAll: async () => [{ timestamp: new Date(Date.now() - 60_000).toISOString() }] },
    readModels: { db: { query: async () => [{ position: 100 }] }, schema: 'x' },
  } as unknown as Ledger;
  const c2 = ctx();
  await readiness(lagging, { events: 1000, seconds: 30 }, opts)(c2 as never);
  assert.is(c2.status, 503, 'a minute behind');
  assert.is(c2.body.status, 'lagging');
  const c3 = ctx();
  await readiness(lagging, { events: 1000, seconds: 120 }, opts)(c3 as never);
  assert.is(c3.status, 200, 'within both bounds');
  // KurrentDB positions are log offsets: the lag is the events actually behind, not the distance.
  const offsets = {
    rmSchema: 'x',
    events: {
      kind: 'kurrentdb',
      headPosition: async () => 5_000_000,
      readAll: async (_: number, limit: number) => Array.from({ length: Math.min(3, limit) }, () => ({ timestamp: new Date().toISOString() })),
    },
    readModels: { db: { query: async () => [{ position: 4_000_000 }] }, schema: 'x' },
  } as unknown as Ledger;
  const c4 = ctx();
  await readiness(offsets, { events: 10, seconds: 30 }, opts)(c4 as never);
  assert.is(c4.status, 200);
  assert.is((c4.body as unknown as { projection_lag: { events: number } }).projection_lag.events, 3);
});

ops.run();

const shutdown = suite(`SIGTERM under load on ${engine}`);

shutdown('calls in flight finish and are charged exactly once; no hold stays open; exit code 0', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-sigterm-'));
  const schema = uniqueSchema('sig');
  const models = slowModelsConfig();
  // /metrics on the public port behind a token, docs/operating.md's other way.
  const metricsToken = 'sigterm-test-metrics-token-0123456789abcdef';
  const g = await spawnGateway({ TOLLGATE_DATA_DIR: dataDir, TOLLGATE_SCHEMA: schema, TOLLGATE_MODELS_CONFIG: models, TOLLGATE_METRICS_TOKEN: metricsToken });
  let db: Database | null = null;
  try {
    const models_ = (
      (await (await fetch(`${g.baseUrl}/models`, { headers: { authorization: `Bearer ${g.key}` } })).json()) as {
        data: Array<{ id: string; multiplier: number }>;
      }
    ).data;
    // A mix of non-streamed chat, streamed chat and images, all slow enough to be in flight.
    const calls = Array.from({ length: 24 }, async (_, i) => {
      const kind = ['chat', 'stream', 'image'][i % 3];
      const res =
        kind === 'image'
          ? await post(g, '/images/generations', { model: 'alpha-haiku-4.5', prompt: `tile ${i}` })
          : await post(g, '/chat/completions', {
              model: 'gen-6-terra',
              messages: [{ role: 'user', content: `call ${i}` }],
              max_tokens: 20,
              stream: kind === 'stream',
              ...(kind === 'stream' ? { stream_options: { include_usage: true } } : {}),
            });
      const text = await res.text();
      return { kind, status: res.status, text };
    });
    // SIGTERM once every call holds quota, i.e. is past the gateway's door and being served.
    const origin = g.baseUrl.replace(/\/v1$/, '');
    const deadline = Date.now() + 120_000;
    while (
      parseProm(await (await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text()).get('tollgate_open_holds') !== 24
    ) {
      assert.ok(Date.now() < deadline, 'calls never all in flight');
      await sleep(20);
    }
    const exited = new Promise<number | null>((r) => g.child.once('exit', (code) => r(code)));
    g.child.kill('SIGTERM');
    // New connections are refused once the server stops listening.
    await sleep(100);
    const late = await fetch(`${g.baseUrl}/models`, { headers: { authorization: `Bearer ${g.key}` } }).then(
      (r) => r.status,
      () => 'refused',
    );
    assert.is(late, 'refused');
    const results = await Promise.all(calls);
    assert.is(await exited, 0, g.output());

    // Every call completed: the client saw a whole answer.
    for (const r of results) {
      assert.is(r.status, 200, `${r.kind}: ${r.text.slice(0, 200)}`);
      if (r.kind === 'stream') assert.ok(r.text.trimEnd().endsWith('data: [DONE]'), 'stream ran to its end');
    }
    const multiplier = new Map(models_.map((m) => [m.id, m.multiplier]));
    const billedSeen = results.reduce((sum, r) => {
      if (r.kind === 'image') return sum + Math.ceil(45_000 * multiplier.get('alpha-haiku-4.5')!);
      const usage =
        r.kind === 'stream'
          ? JSON.parse(
              r.text
                .split('\n')
                .filter((l) => l.startsWith('data: {'))
                .map((l) => l.slice(6))
                .reverse()
                .find((l) => l.includes('"usage":{'))!,
            ).usage
          : JSON.parse(r.text).usage;
      return sum + Math.ceil((usage.prompt_tokens + usage.completion_tokens) * multiplier.get('cx/gen-6-terra')!);
    }, 0);

    // The ledger after the exit: one charge per call, every hold closed (the first start's demo-books calls aside).
    db = url ? openPostgres(url, 2) : await openPglite(join(dataDir, 'pglite'));
    const events = await db.query<{ type: string; hold: string; billed: number | null }>(
      `SELECT type, data->>'holdId' AS hold, (data->>'billed')::bigint AS billed FROM "${schema}".events
       WHERE type IN ('QuotaReserved', 'ChatCharged', 'ImageCharged', 'ReservationReleased') AND data->>'accountId' <> 'demo-books'`,
    );
    const reserved = events.filter((e) => e.type === 'QuotaReserved').map((e) => e.hold);
    const charged = events.filter((e) => e.type === 'ChatCharged' || e.type === 'ImageCharged');
    const released = events.filter((e) => e.type === 'ReservationReleased');
    assert.is(reserved.length, 24);
    assert.is(charged.length, 24, 'one charge per call');
    assert.is(released.length, 0);
    assert.equal(new Set(charged.map((e) => e.hold)), new Set(reserved), 'every hold settled by its own charge');
    assert.is(
      charged.reduce((s, e) => s + Number(e.billed), 0),
      billedSeen,
      'billed = what the clients were told',
    );
    const [acct] = await db.query<{ open_holds: number; reserved: number }>(
      `SELECT open_holds, reserved FROM "${schema}_rm".accounts WHERE account_id = 'demo'`,
    );
    assert.equal({ ...acct }, { open_holds: 0, reserved: 0 }, 'read models caught up before exit');
  } finally {
    if (g.child.exitCode === null) g.child.kill('SIGKILL');
    await db?.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(models, { force: true });
    if (url) await dropSchemas(url, schema);
  }
});

shutdown.run();
