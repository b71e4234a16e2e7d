// Where a lone call's wall time goes (issue 42, item 1). One run, four targets on loopback in
// front of one mock upstream that answers at once: the mock called directly, Tollgate as users
// run it, the same build with TOLLGATE_CALL_PHASES=on (each call's timeline of phases on
// /metrics), and Portkey's gateway. Sequential calls, the targets interleaved in blocks of 100.
// The phases of the timed gateway add up to its time inside Koa; the rest of a call is node's
// HTTP server, the loopback and the client. Beside them, the floors on the same PostgreSQL: a
// lone one-row INSERT committed durably (waits for the WAL flush) and with synchronous_commit off.
//   node --import tsx bench/c1-breakdown.ts [--samples 3000] [--no-peer] [--projector] [--write]
//   (or npm run bench -- --only breakdown, which writes its block in BENCHMARKS.md)
import os from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { CHAT_CALL_PHASES, type ChatCallPhase, type StepWithinPhases } from '../src/tracing/call-phases.ts';
import { writeMarkedBlock } from './report.ts';
import { runLoad, freePort } from './processes.ts';
import type { SequentialResult, Summary, TargetRequest } from './load.ts';
import { summarize } from './load.ts';
import {
  directRequest,
  ensurePeerInstalled,
  gatewayMetrics,
  openBenchAccount,
  peerVersion,
  portkeyRequest,
  startMock,
  startPortkey,
  startTollgate,
  tollgateRequest,
  type Peer,
  type Tollgate,
  type Upstream,
  SLOW_UPSTREAM_MS,
} from './targets.ts';

/** What each phase of the timeline covers (src/tracing/call-phases.ts lists them in order). */
const PHASE_TEXT: Record<ChatCallPhase, string> = {
  middleware:
    'Koa middleware before the route: client-gone watch, request id, security headers, CORS, metrics and span set-up, access log set-up, error handler, content type, the routers matching the path',
  auth: 'the API key: its hash looked up in the key cache',
  invalid_limit: 'the invalid-request limiter (nothing to do for a valid call)',
  body: 'reading and parsing the JSON body',
  idempotency: 'Idempotency-Key (none sent)',
  validate: "the body's schema (ajv)",
  model: "the model's resolution and access, and the account's early refusal (on its cached state)",
  count: "counting the prompt's tokens for the hold",
  hold_decide: "the hold's decision (account decider, cached state); it lingers for its charge",
  upstream: 'the upstream request, started at the decision, to its parsed reply',
  charge: "the charge: decided, appended durably (with the hold in one append when the upstream answered within the hold's linger), answered",
  reply: 'the reply body (billed tokens added), billing headers',
  unwind: 'middleware after the route: the access-log line, the metrics, the span',
  respond: 'Koa writes the response: the JSON text, the socket write',
};

/** What each step timed within the phases is (they overlap them; per call on average). */
const STEP_TEXT: Record<StepWithinPhases | 'append_one_in_postgres', string> = {
  ledger_decide: "the command handler's decisions (load state from cache, decide, evolve), every batch",
  ledger_linger: 'the hold waiting for its charge (its batch lingers up to 3 ms, then is appended alone): inside upstream',
  ledger_append: 'the append as the command handler waits for it (group commit queue + store)',
  store_append: "the event store's append: the events checked against their schemas and written as canonical JSON, then sent",
  store_sql: 'of which the SQL statement (append_one): the round trip, its execution and the commit with its WAL flush',
  append_one_in_postgres: "of which inside PostgreSQL: the append function's own execution (pg_stat_user_functions, track_functions=pl), before the commit",
  ledger_answer_held: 'answers held until the other gateways have read a change (none here)',
  access_log: 'the access-log line (pino)',
  request_metrics: 'the request counters and latency histogram',
};

interface Floors {
  durable: Summary;
  relaxed: Summary;
}

/** A lone one-row INSERT from a quiet client: durable (WAL flush), then with synchronous_commit off. */
async function commitFloors(url: string, n: number): Promise<Floors> {
  const c = new pg.Client(url);
  await c.connect();
  const table = `public.bench_floor_${process.pid}`;
  const timed = async () => {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await c.query(`INSERT INTO ${table} (v) VALUES ($1)`, ['x']);
      times.push(performance.now() - t);
    }
    return summarize(times);
  };
  try {
    await c.query(`CREATE TABLE IF NOT EXISTS ${table} (id bigserial PRIMARY KEY, v text)`);
    const durable = await timed();
    await c.query(`SET synchronous_commit = off`);
    const relaxed = await timed();
    return { durable, relaxed };
  } finally {
    await c.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await c.end();
  }
}

type Totals = Map<string, number>;

/** Calls of the gateway's append_one and their time inside PostgreSQL (track_functions=pl on its connections). */
async function appendFunctionStats(url: string, schema: string): Promise<{ calls: number; ms: number }> {
  // Statistics reach the shared view within a second of the transactions that made them.
  await new Promise((r) => setTimeout(r, 1500));
  const c = new pg.Client(url);
  await c.connect();
  try {
    const { rows } = await c.query<{ calls: string; ms: string }>(
      `SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_time), 0) AS ms FROM pg_stat_user_functions WHERE schemaname = $1 AND funcname = 'append_one'`,
      [schema],
    );
    return { calls: Number(rows[0].calls), ms: Number(rows[0].ms) };
  } finally {
    await c.end();
  }
}

/** The phase totals (seconds) on a gateway's /metrics. */
async function phaseTotals(gw: Tollgate): Promise<Totals> {
  const text = await gatewayMetrics(gw);
  const totals: Totals = new Map();
  for (const m of text.matchAll(/^tollgate_call_phase_seconds_total\{phase="([^"]+)"\} (\S+)$/gm)) totals.set(m[1], Number(m[2]));
  return totals;
}

/** One upstream's run: the targets' latencies and the timed gateway's phases. */
export interface BreakdownRun {
  samples: number;
  latency: Record<string, Summary>;
  /** Per call, ms: each phase's mean. */
  phases: Record<string, number>;
}

export interface Breakdown {
  date: string;
  cores: number;
  load: number;
  peer: string | null;
  /** The mock answering at once, and after SLOW_UPSTREAM_MS. */
  fast: BreakdownRun;
  slow: BreakdownRun;
  floors: Floors;
}

export async function runBreakdown(o: {
  databaseUrl: string;
  samples: number;
  peer: boolean;
  projector?: boolean;
  log: (line: string) => void;
}): Promise<Breakdown> {
  const mock = await startMock();
  const gateways: Tollgate[] = [];
  let peer: Peer | null = null;
  try {
    const plain = await startTollgate({ databaseUrl: o.databaseUrl, mock, projector: o.projector });
    gateways.push(plain);
    // Its sessions count the append function's time inside PostgreSQL (a setting of their own).
    const tracked = new URL(o.databaseUrl);
    tracked.searchParams.set('options', '-c track_functions=pl');
    const timed = await startTollgate({ databaseUrl: tracked.href, mock, projector: o.projector, env: { TOLLGATE_CALL_PHASES: 'on' } });
    gateways.push(timed);
    if (o.peer) {
      await ensurePeerInstalled(o.log);
      peer = await startPortkey(await freePort());
    }
    const accounts = [await openBenchAccount(plain, 'c1'), await openBenchAccount(timed, 'c1')];
    const measure = async (upstream: Upstream, samples: number, warmup: number): Promise<BreakdownRun> => {
      const targets: TargetRequest[] = [
        directRequest(mock, false, upstream),
        { ...tollgateRequest(plain, accounts[0], false, upstream), name: 'tollgate' },
        { ...tollgateRequest(timed, accounts[1], false, upstream), name: 'tollgate_phases' },
        ...(peer ? [portkeyRequest(peer, mock, false, upstream)] : []),
      ];
      // Warm-up: JIT, pools, caches (its calls are timed too, and left out by the totals' difference).
      await runLoad<SequentialResult>({ kind: 'sequential', targets, samples: warmup, warmup: 0, block: 100, stream: false });
      const before = await phaseTotals(timed);
      const sqlBefore = await appendFunctionStats(o.databaseUrl, timed.schema);
      const block = upstream === 'slow' ? 50 : 100;
      const seq = await runLoad<SequentialResult>({ kind: 'sequential', targets, samples, warmup: 0, block, stream: false });
      const after = await phaseTotals(timed);
      const sqlAfter = await appendFunctionStats(o.databaseUrl, timed.schema);
      for (const [name, r] of Object.entries(seq.perTarget))
        if (r.failures) throw new Error(`${name}: ${r.failures} failed calls (${JSON.stringify(r.statuses)})`);
      const phases: Record<string, number> = {};
      for (const [phase, seconds] of after) phases[phase] = ((seconds - (before.get(phase) ?? 0)) * 1000) / samples;
      phases.append_one_in_postgres = (sqlAfter.ms - sqlBefore.ms) / samples;
      o.log(`${upstream} upstream: append_one ran ${sqlAfter.calls - sqlBefore.calls} times in PostgreSQL for ${samples} measured calls`);
      return { samples, latency: Object.fromEntries(Object.entries(seq.perTarget).map(([k, v]) => [k, v.total])), phases };
    };
    const fast = await measure('fast', o.samples, 600);
    const slow = await measure('slow', Math.max(100, Math.round(o.samples / 5)), 100);
    const floors = await commitFloors(o.databaseUrl, 2000);
    return {
      date: new Date().toISOString(),
      cores: os.cpus().length,
      load: os.loadavg()[0],
      peer: peer ? `@portkey-ai/gateway ${peerVersion()}` : null,
      fast,
      slow,
      floors,
    };
  } finally {
    for (const g of gateways) await g.stop().catch(() => undefined);
    await peer?.stop().catch(() => undefined);
    await mock.proc.stop().catch(() => undefined);
    const c = new pg.Client(o.databaseUrl);
    await c.connect();
    for (const g of gateways) await c.query(`DROP SCHEMA IF EXISTS "${g.schema}" CASCADE; DROP SCHEMA IF EXISTS "${g.schema}_rm" CASCADE`);
    await c.end();
  }
}

const ms = (x: number) => x.toFixed(3);

/** The section's tables for BENCHMARKS.md, with the method beside them. */
export function breakdownTable(b: Breakdown): string {
  const runs = [b.fast, b.slow] as const;
  const added = (r: BreakdownRun, s: Summary) => `+${ms(s.p50 - r.latency.direct.p50)} / +${ms(s.mean - r.latency.direct.mean)}`;
  const inGateway = (r: BreakdownRun) => CHAT_CALL_PHASES.reduce((n, p) => n + (r.phases[p] ?? 0), 0);
  const share = (r: BreakdownRun, x: number) => `${((x / r.latency.tollgate_phases.mean) * 100).toFixed(1)} %`;
  const both = (f: (r: BreakdownRun) => string) => runs.map(f).join(' | ');
  const rows = [
    `| target | at once: p50 / mean / p99 (ms) | added, p50 / mean | after ${SLOW_UPSTREAM_MS} ms: p50 / mean / p99 (ms) | added, p50 / mean |`,
    '|---|---:|---:|---:|---:|',
    ...Object.keys(b.fast.latency).map(
      (name) =>
        `| ${name} | ${both((r) => `${ms(r.latency[name].p50)} / ${ms(r.latency[name].mean)} / ${ms(r.latency[name].p99)} | ${name === 'direct' ? '' : added(r, r.latency[name])}`)} |`,
    ),
  ];
  const phaseRows = [
    `| phase (in order) | at once: mean per call (ms) | share | after ${SLOW_UPSTREAM_MS} ms: mean per call (ms) | share | what it covers |`,
    '|---|---:|---:|---:|---:|---|',
    ...CHAT_CALL_PHASES.map((p) => `| ${p} | ${both((r) => `${ms(r.phases[p] ?? 0)} | ${share(r, r.phases[p] ?? 0)}`)} | ${PHASE_TEXT[p]} |`),
    `| **inside Koa, in all** | ${both((r) => `**${ms(inGateway(r))}** | ${share(r, inGateway(r))}`)} | the phases above added up |`,
    `| outside Koa | ${both((r) => `${ms(r.latency.tollgate_phases.mean - inGateway(r))} | ${share(r, r.latency.tollgate_phases.mean - inGateway(r))}`)} | node's HTTP server (parsing, before the first middleware; after the write), the loopback and the client: the timed gateway's mean less the phases |`,
    '',
    `| within the phases above | at once: mean per call (ms) | after ${SLOW_UPSTREAM_MS} ms | what it is |`,
    '|---|---:|---:|---|',
    ...Object.entries(STEP_TEXT).map(([p, what]) => `| ${p} | ${both((r) => ms(r.phases[p] ?? 0))} | ${what} |`),
    `| floor: a lone one-row INSERT, durable | ${ms(b.floors.durable.mean)} (p50 ${ms(b.floors.durable.p50)}) | | from a quiet client on the same PostgreSQL: execution, commit and WAL flush |`,
    `| floor: the same with synchronous_commit off | ${ms(b.floors.relaxed.mean)} (p50 ${ms(b.floors.relaxed.p50)}) | | the round trip and execution without the flush (the flush: ${ms(b.floors.durable.mean - b.floors.relaxed.mean)} ms) |`,
  ];
  return [
    ...rows,
    '',
    ...phaseRows,
    '',
    `Method: one run (${b.date}, ${b.cores} cores, load average ${b.load.toFixed(2)} at the end). Four targets on loopback in front of one mock upstream: the mock direct, Tollgate as users run it (\`npm run build\`, PostgreSQL, metering on), the same build with TOLLGATE_CALL_PHASES=on (the timeline of phases), and ${b.peer ?? 'no peer (--no-peer)'}. First the mock answering at once: ${b.fast.samples.toLocaleString('en-US')} sequential non-streamed chat calls per target after a warm-up of 600, interleaved in blocks of 100 by bench/load.ts's client; then the mock answering after ${SLOW_UPSTREAM_MS} ms: ${b.slow.samples.toLocaleString('en-US')} per target in blocks of 50 (there the hold commits alone while the upstream works, and the charge is appended alone after the reply). A phase is the wall time between two marks of a call's timeline (src/tracing/call-phases.ts), so the phases add up to the time inside Koa; means, because means add up and medians do not. The timed gateway against the plain one is what the marks themselves cost. Floors: 2,000 INSERTs each from one pg client.`,
  ].join('\n');
}

export function writeBreakdownBlock(path: string, b: Breakdown): void {
  writeMarkedBlock(path, 'c1-breakdown', breakdownTable(b));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { samples: { type: 'string' }, 'no-peer': { type: 'boolean' }, projector: { type: 'boolean' }, write: { type: 'boolean' } },
  });
  const b = await runBreakdown({
    databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    samples: Number(values.samples ?? 3000),
    peer: !values['no-peer'],
    projector: values.projector,
    log: (l) => console.log(l),
  });
  console.log(`\n${breakdownTable(b)}`);
  if (values.write) writeBreakdownBlock(fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url)), b);
}
