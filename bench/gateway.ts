// The gateway comparison: the mock upstream called directly, Tollgate (metering on, PostgreSQL)
// and the peer gateway, measured in the same run with the same load generator. After every
// phase the ledger is checked: each successful Tollgate response must be exactly one durable
// charge of the exact price, with no hold left open.
import os from 'node:os';
import { openPostgres, type Database } from '../src/eventstore/db.ts';
import { streams } from '../src/ledger/events.ts';
import { chatCharge, toMilli } from '../src/money/pricing.ts';
import { SEED_MODELS } from '../src/catalogue/seed-models.ts';
import { MOCK_WORDS } from './mock-upstream.ts';
import { freePort, processCpuSeconds, runLoad, sampleRss, type Child } from './processes.ts';
import { commitLatency, withApplicationName, cpuMeter } from './machine.ts';
import { type AutocannonResult, type SequentialResult, type Summary, type TargetRequest } from './load.ts';
import { ensureWrk, runWrk, type WrkResult } from './wrk.ts';
import { quiesce } from './quiesce.ts';
import {
  BENCH_MODEL,
  BENCH_RPM,
  BENCH_SLOW_MODEL,
  SLOW_UPSTREAM_MS,
  PROMPT,
  directRequest,
  ensurePeerInstalled,
  openBenchAccount,
  peerVersion,
  portkeyRequest,
  startMock,
  startPortkey,
  startTollgate,
  gatewayMetrics,
  tollgateRequest,
  type BenchAccount,
  type Mock,
  type Peer,
  type Tollgate,
  type Upstream,
} from './targets.ts';

export type TargetName = 'direct' | 'tollgate' | 'portkey';

export interface GatewayBenchOptions {
  databaseUrl: string;
  quick?: boolean;
  /** Measure the peer too (default true). */
  peer?: boolean;
  /** Directory for CPU profiles of the Tollgate process, one per heavy phase (bench/profile-hook.ts). */
  cpuProfileDir?: string;
  /** Only these phases (default all): for short runs while optimising. */
  phases?: Array<'latency' | 'wrk' | 'latency-slow' | 'ttft' | 'c64' | 'c256'>;
  /** Run Tollgate as docker-compose.yml does: projections in a separate projector process. */
  projector?: boolean;
  /** Only these targets (default all three). */
  targets?: TargetName[];
  /** Overrides of the request counts. */
  sizes?: Partial<Pick<GatewayBenchResult['settings'], 'latencySamples' | 'slowLatencySamples' | 'ttftSamples' | 'c64Requests' | 'c256Requests'>>;
  log?: (line: string) => void;
}

export interface ThroughputFigure {
  target: TargetName;
  connections: number;
  requests: number;
  ok: number;
  failed: number;
  seconds: number;
  perSecond: number;
  latencyMs: { p50: number; p99: number };
  /** CPU seconds per 1000 requests: the server process, and (Tollgate) its PostgreSQL backends. */
  cpuPer1000: { server: number | null; postgres: number | null };
  /** Peak and final VmRSS of the server process during the phase, MiB. */
  rss: { peakMiB: number; lastMiB: number };
  load: number;
}

export interface LedgerCheck {
  phase: string;
  accountId: string;
  expected: number;
  charged: number;
  reserved: number;
  released: number;
  billed: number;
  expectedBilled: number;
  ok: boolean;
}

export interface GatewayBenchResult {
  date: string;
  quick: boolean;
  peerVersion: string | null;
  /** Sequential, non-streaming: milliseconds to the end of the response, per target. */
  latency: Record<string, Summary>;
  /**
   * c=1 measured by wrk (a separate C load tool, one keep-alive connection, each target in turn
   * for a fixed time, not interleaved): what a user's load tool measures. Tollgate's entry also
   * has its appends per call and their mean time during the phase (its /metrics).
   */
  wrk?: Record<string, WrkResult & { appendsPerRequest?: number; appendMeanMs?: number }>;
  /** The same with an upstream that answers after SLOW_UPSTREAM_MS (slowUpstreamMs). */
  latencySlow: Record<string, Summary>;
  slowUpstreamMs: number;
  /** Sequential, streaming: to the first content token, and to the first SSE data chunk. */
  ttft: Record<string, { firstToken: Summary; firstData: Summary; total: Summary }>;
  throughput: ThroughputFigure[];
  rss: ThroughputFigure[];
  ledgerChecks: LedgerCheck[];
  load: { start: number; end: number; byPhase: Record<string, number> };
  /**
   * Where the c=1 time goes, from Tollgate's own /metrics: event store appends (group commit)
   * during the c=1 phase, and the latency of a lone one-row commit on the same server (the WAL
   * flush every durable append waits for).
   */
  floor: { appendsPerRequest: number; appendMeanMs: number; commitP50Ms: number; commitP99Ms: number } | null;
  settings: {
    latencySamples: number;
    slowLatencySamples: number;
    ttftSamples: number;
    c64Requests: number;
    c256Requests: number;
    rateLimitPerMinute: number;
    synchronousCommit: string;
  };
  errors: string[];
}

/** What each call of `model` must be billed: the mock's usage (4 characters per prompt token, one per word). */
const expectedBilled = (model: string) =>
  chatCharge(Math.ceil(JSON.stringify(PROMPT).length / 4), MOCK_WORDS.length, toMilli(SEED_MODELS.find((m) => m.id === model)!.multiplier));
export const EXPECTED_BILLED = expectedBilled(BENCH_MODEL);

/** The event store append histogram of a Tollgate process (its /metrics). */
async function appendMetrics(gw: Tollgate): Promise<{ sum: number; count: number }> {
  const text = await gatewayMetrics(gw);
  const value = (name: string) => Number(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { sum: value('tollgate_eventstore_append_duration_seconds_sum'), count: value('tollgate_eventstore_append_duration_seconds_count') };
}

async function ledgerCheck(db: Database, schema: string, phase: string, account: BenchAccount, expected: number, model: string): Promise<LedgerCheck> {
  const rows = await db.query<{ type: string; n: number; billed: string }>(
    `SELECT type, count(*)::int AS n, coalesce(sum((data->>'billed')::bigint), 0)::text AS billed FROM "${schema}".events WHERE stream = $1 GROUP BY type`,
    [streams.account(account.accountId)],
  );
  const by = (t: string) => rows.find((r) => r.type === t);
  const charged = by('ChatCharged')?.n ?? 0;
  const billed = Number(by('ChatCharged')?.billed ?? 0);
  const c = {
    phase,
    accountId: account.accountId,
    expected,
    charged,
    reserved: by('QuotaReserved')?.n ?? 0,
    released: by('ReservationReleased')?.n ?? 0,
    billed,
    expectedBilled: expected * expectedBilled(model),
    ok: false,
  };
  c.ok = c.charged === expected && c.reserved === expected && c.released === 0 && c.billed === c.expectedBilled;
  return c;
}

export async function runGatewayBench(o: GatewayBenchOptions): Promise<GatewayBenchResult> {
  const log = o.log ?? ((l: string) => console.log(l));
  const quick = o.quick ?? false;
  const withPeer = (o.peer ?? true) && (o.targets ?? ['portkey']).includes('portkey');
  const settings = {
    latencySamples: quick ? 600 : 3000,
    // Each call waits SLOW_UPSTREAM_MS: 600 per target is about 1.5 minutes for the three.
    slowLatencySamples: quick ? 150 : 600,
    ttftSamples: quick ? 400 : 2000,
    c64Requests: quick ? 6000 : 40_000,
    c256Requests: quick ? 6000 : 30_000,
    rateLimitPerMinute: BENCH_RPM,
    synchronousCommit: '',
    ...o.sizes,
  };
  const phases = new Set(o.phases ?? ['latency', 'wrk', 'latency-slow', 'ttft', 'c64', 'c256']);
  const only = new Set<TargetName>(o.targets ?? ['direct', 'tollgate', 'portkey']);
  const result: GatewayBenchResult = {
    date: new Date().toISOString(),
    quick,
    peerVersion: null,
    latency: {},
    latencySlow: {},
    slowUpstreamMs: SLOW_UPSTREAM_MS,
    ttft: {},
    throughput: [],
    rss: [],
    ledgerChecks: [],
    floor: null,
    load: { start: os.loadavg()[0], end: 0, byPhase: {} },
    settings,
    errors: [],
  };
  const appName = `tollgate_bench_gw_${process.pid}`;
  const db = openPostgres(o.databaseUrl, 2);
  const pgCpu = cpuMeter(db, appName);
  let mock: Mock | null = null;
  let gw: Tollgate | null = null;
  let peer: Peer | null = null;
  try {
    settings.synchronousCommit = (await db.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`))[0].s;
    if (withPeer) {
      await ensurePeerInstalled(log);
      result.peerVersion = peerVersion();
    }
    mock = await startMock();
    gw = await startTollgate({
      databaseUrl: withApplicationName(o.databaseUrl, appName),
      mock,
      nodeArgs: o.cpuProfileDir ? ['--import', new URL('./profile-hook.ts', import.meta.url).pathname] : undefined,
      env: o.cpuProfileDir ? { BENCH_PROFILE_DIR: o.cpuProfileDir } : undefined,
      projector: o.projector,
    });
    if (withPeer) peer = await startPortkey(await freePort());
    log(
      `mock upstream pid ${mock.proc.pid}, tollgate pid ${gw.proc.pid} (schema ${gw.schema})${peer ? `, portkey ${result.peerVersion} pid ${peer.proc.pid}` : ''}`,
    );

    const accounts = {
      warm: await openBenchAccount(gw, 'warm'),
      latency: await openBenchAccount(gw, 'c1'),
      wrk: await openBenchAccount(gw, 'c1wrk'),
      latencySlow: await openBenchAccount(gw, 'c1slow'),
      ttft: await openBenchAccount(gw, 'ttft'),
      c64: await openBenchAccount(gw, 'c64'),
      c256: await openBenchAccount(gw, 'c256'),
    };
    const requests = (account: BenchAccount, stream: boolean, upstream: Upstream = 'fast'): TargetRequest[] =>
      [
        directRequest(mock!, stream, upstream),
        tollgateRequest(gw!, account, stream, upstream),
        ...(peer ? [portkeyRequest(peer, mock!, stream, upstream)] : []),
      ].filter((t) => only.has(t.name as TargetName) || t.name === 'tollgate');
    const servers: Record<TargetName, Child | null> = { direct: mock.proc, tollgate: gw.proc, portkey: peer?.proc ?? null };
    const check = async (phase: string, account: BenchAccount, expected: number, model = BENCH_MODEL) => {
      const c = await ledgerCheck(db, gw!.schema, phase, account, expected, model);
      result.ledgerChecks.push(c);
      const line = `ledger ${phase}: ${c.charged} charges for ${expected} successful responses, ${c.reserved} holds, ${c.released} releases, billed ${c.billed} (expected ${c.expectedBilled})`;
      log(c.ok ? line : `FAILED ${line}`);
      if (!c.ok) result.errors.push(line);
    };

    // Warm-up: JIT, connection pools, caches, on every target.
    for (const t of requests(accounts.warm, false))
      await runLoad<AutocannonResult>({ kind: 'autocannon', target: t, connections: 16, amount: quick ? 1500 : 4000 });
    const warmSeq = await runLoad<SequentialResult>({
      kind: 'sequential',
      targets: requests(accounts.warm, true),
      samples: 0,
      warmup: 200,
      block: 1,
      stream: true,
    });
    void warmSeq;

    // 1. Added latency, concurrency 1, non-streaming: targets interleaved in blocks of 100.
    if (phases.has('latency')) {
      await quiesce(db);
      result.load.byPhase.latency = os.loadavg()[0];
      const appends0 = await appendMetrics(gw);
      const seq = await runLoad<SequentialResult>({
        kind: 'sequential',
        targets: requests(accounts.latency, false),
        samples: settings.latencySamples,
        warmup: 100,
        block: 100,
        stream: false,
      });
      const appends1 = await appendMetrics(gw);
      const commit = await commitLatency(db, 300);
      const calls = seq.perTarget.tollgate.ok;
      result.floor = {
        appendsPerRequest: (appends1.count - appends0.count) / calls,
        appendMeanMs: ((appends1.sum - appends0.sum) * 1000) / Math.max(1, appends1.count - appends0.count),
        commitP50Ms: commit.p50,
        commitP99Ms: commit.p99,
      };
      log(
        `c=1 floor: ${result.floor.appendsPerRequest.toFixed(2)} appends per call, ${result.floor.appendMeanMs.toFixed(3)} ms each (Tollgate's metrics); a lone one-row commit on this server: p50 ${commit.p50.toFixed(3)} ms, p99 ${commit.p99.toFixed(3)} ms`,
      );
      for (const [name, r] of Object.entries(seq.perTarget)) {
        result.latency[name] = r.total;
        log(`c=1 latency ${name.padEnd(8)} p50 ${r.total.p50.toFixed(3)} ms  p99 ${r.total.p99.toFixed(3)} ms  (${r.total.n} samples, ${r.failures} failures)`);
        if (r.failures) result.errors.push(`c=1 latency: ${name} had ${r.failures} failed responses (${JSON.stringify(r.statuses)})`);
      }
      await check('c=1 latency', accounts.latency, seq.perTarget.tollgate.ok);
    }

    // 1a. The same c=1 load as a user's tool drives it: wrk, one keep-alive connection, each
    // target back to back for a fixed time (the bench's own client interleaves them in blocks).
    if (phases.has('wrk') && ensureWrk(log)) {
      result.wrk = {};
      for (const t of requests(accounts.wrk, false)) {
        await quiesce(db);
        const before = await appendMetrics(gw);
        const w = runWrk(t, { connections: 1, seconds: quick ? 5 : 15 });
        const after = await appendMetrics(gw);
        const appends =
          t.name === 'tollgate'
            ? {
                appendsPerRequest: (after.count - before.count) / w.requests,
                appendMeanMs: ((after.sum - before.sum) * 1000) / Math.max(1, after.count - before.count),
              }
            : {};
        result.wrk[t.name] = { ...w, ...appends };
        log(
          `c=1 wrk ${t.name.padEnd(8)} p50 ${w.latencyMs.p50.toFixed(3)} ms  p99 ${w.latencyMs.p99.toFixed(3)} ms  (${w.requests} requests, ${w.non2xx} non-2xx, ${w.errors} socket errors)` +
            (appends.appendsPerRequest !== undefined
              ? `; ${appends.appendsPerRequest.toFixed(2)} appends per call, ${appends.appendMeanMs!.toFixed(3)} ms each`
              : ''),
        );
        if (w.non2xx || w.errors) result.errors.push(`c=1 wrk: ${t.name} had ${w.non2xx} non-2xx responses and ${w.errors} socket errors`);
      }
    }

    // 1b. The same with an upstream that answers after SLOW_UPSTREAM_MS: the hold is no longer
    // merged with the charge (it commits on its own while the upstream works), so what is added
    // is the charge's durable append after the reply.
    if (phases.has('latency-slow')) {
      await quiesce(db);
      result.load.byPhase.latencySlow = os.loadavg()[0];
      const seq = await runLoad<SequentialResult>({
        kind: 'sequential',
        targets: requests(accounts.latencySlow, false, 'slow'),
        samples: settings.slowLatencySamples,
        warmup: 20,
        block: 50,
        stream: false,
      });
      for (const [name, r] of Object.entries(seq.perTarget)) {
        result.latencySlow[name] = r.total;
        log(
          `c=1 latency, upstream after ${SLOW_UPSTREAM_MS} ms, ${name.padEnd(8)} p50 ${r.total.p50.toFixed(3)} ms  p99 ${r.total.p99.toFixed(3)} ms  (${r.total.n} samples, ${r.failures} failures)`,
        );
        if (r.failures) result.errors.push(`c=1 latency (slow upstream): ${name} had ${r.failures} failed responses (${JSON.stringify(r.statuses)})`);
      }
      await check(`c=1 latency, upstream after ${SLOW_UPSTREAM_MS} ms`, accounts.latencySlow, seq.perTarget.tollgate.ok, BENCH_SLOW_MODEL);
    }

    // 2. Time to first token, streaming, concurrency 1.
    if (phases.has('ttft')) {
      await quiesce(db);
      result.load.byPhase.ttft = os.loadavg()[0];
      const ttft = await runLoad<SequentialResult>({
        kind: 'sequential',
        targets: requests(accounts.ttft, true),
        samples: settings.ttftSamples,
        warmup: 50,
        block: 100,
        stream: true,
      });
      for (const [name, r] of Object.entries(ttft.perTarget)) {
        result.ttft[name] = { firstToken: r.firstToken!, firstData: r.firstData!, total: r.total };
        log(
          `ttft ${name.padEnd(8)} first token p50 ${r.firstToken!.p50.toFixed(3)} ms  p99 ${r.firstToken!.p99.toFixed(3)} ms; first data chunk p50 ${r.firstData!.p50.toFixed(3)} ms (${r.failures} failures)`,
        );
        if (r.failures || r.firstToken!.n !== r.total.n)
          result.errors.push(`ttft: ${name} had ${r.failures} failed streams, ${r.total.n - r.firstToken!.n} without a content token`);
      }
      await check('ttft (streaming)', accounts.ttft, ttft.perTarget.tollgate.ok);
    }

    // 3. Throughput at 64 connections and 4. memory at 256: each target alone, a fixed number
    // of requests (all complete, so the ledger can be checked against the count).
    const heavy = async (phase: 'c64' | 'c256', connections: number, amount: number, account: BenchAccount, into: ThroughputFigure[]) => {
      for (const t of requests(account, false)) {
        const name = t.name as TargetName;
        const server = servers[name]!;
        await quiesce(db);
        const load = os.loadavg()[0];
        const cpu0 = processCpuSeconds(server.pid);
        const pg = name === 'tollgate' ? await pgCpu.start() : null;
        const rss = sampleRss(server.pid);
        const profiling = name === 'tollgate' && !!o.cpuProfileDir;
        if (profiling) process.kill(server.pid, 'SIGUSR2');
        const r = await runLoad<AutocannonResult>({ kind: 'autocannon', target: t, connections, amount });
        if (profiling) {
          process.kill(server.pid, 'SIGUSR2');
          await new Promise((res) => setTimeout(res, 1500));
        }
        const mem = rss.stop();
        const cpu1 = processCpuSeconds(server.pid);
        const pgUsed = pg ? (await pg.stop()).postgres : null;
        const failed = r.non2xx + r.errors + r.timeouts;
        const f: ThroughputFigure = {
          target: name,
          connections,
          requests: amount,
          ok: r.ok,
          failed,
          seconds: r.seconds,
          perSecond: r.perSecond,
          latencyMs: { p50: r.latencyMs.p50, p99: r.latencyMs.p99 },
          cpuPer1000: {
            server: cpu0 !== null && cpu1 !== null ? ((cpu1 - cpu0) * 1000) / Math.max(1, r.ok) : null,
            postgres: pgUsed === null ? null : (pgUsed * 1000) / Math.max(1, r.ok),
          },
          rss: mem,
          load,
        };
        into.push(f);
        log(
          `c=${connections} ${name.padEnd(8)} ${Math.round(f.perSecond)} req/s, ${r.ok} ok, ${failed} failed (non-2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}), p50 ${f.latencyMs.p50} ms p99 ${f.latencyMs.p99} ms, RSS peak ${mem.peakMiB.toFixed(0)} MiB, cpu/1000 req ${f.cpuPer1000.server?.toFixed(2)} s${f.cpuPer1000.postgres !== null ? ` + postgres ${f.cpuPer1000.postgres.toFixed(2)} s` : ''}, load ${load.toFixed(2)}`,
        );
        if (failed) result.errors.push(`c=${connections}: ${name} had ${failed} failed requests`);
        if (name === 'tollgate') await check(`c=${connections}`, account, r.ok);
      }
      result.load.byPhase[phase] = os.loadavg()[0];
    };
    if (phases.has('c64')) await heavy('c64', 64, settings.c64Requests, accounts.c64, result.throughput);
    if (phases.has('c256')) await heavy('c256', 256, settings.c256Requests, accounts.c256, result.rss);
  } finally {
    result.load.end = os.loadavg()[0];
    await peer?.stop().catch(() => undefined);
    const schema = gw?.schema;
    await gw?.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    if (schema) await db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm" CASCADE`).catch(() => undefined);
    await db.close();
  }
  return result;
}
