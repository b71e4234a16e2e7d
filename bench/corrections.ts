// Corrections at the scale of a month: a window of N charges of one model on 50 accounts, one of
// them holding 40 % of the charges, seeded straight into PostgreSQL (events from the real account
// decider) and read models built by a replay; then the compiled gateway on that schema, with a
// light chat load on another account running beside the operator's work. For each size: the dry
// run (totals, then the streamed NDJSON detail), the apply (progress lines: the rate at the start,
// middle and end), applying it again, the big account's statement (JSON, streamed), and verify;
// the gateway's peak resident memory in each phase, and the live calls' p99 and longest call.
//
// node --import tsx bench/corrections.ts [--sizes 10000,100000,1000000]   (or npm run bench -- --only corrections)
// BENCH_KEEP=1 keeps each size's schemas for a look afterwards (they are dropped otherwise).
// BENCH_CPU_PROF=dir: the gateway writes a CPU profile there when it stops; BENCH_PRELOAD=file.mjs: a
// module the gateway imports first (e.g. an allocation profiler: node's --heap-prof keeps only what is alive at exit).
//   --phases verify          only the phases named (probe, dry run, apply again, statement of the big account, verify,
//                            export of the log, rebuild)
//   --share 0.5              TOLLGATE_OPERATOR_SHARE for the gateways (default 1): the share of time operator work may take
//   --skip-apply             no apply either (nor the exact-to-the-token check): e.g. verify alone on the seeded log,
//                            --sizes 1000000 --phases verify --skip-apply (2M events; the seeding takes ~4 min)
//   --topology projector     the read side in a `tollgate projector` process of its own (the deployed topology)
//   --topology operator      the operator's requests (dry run, apply, statement, verify) go to a second gateway
//                            with TOLLGATE_PROJECTIONS=off, so the live calls' gateway does none of their work
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { SimAccount } from './ledger-traffic.ts';
import { seedCharges } from './corrections-seed.ts';
import { schedstat } from './thread-stats.ts';
import { latencyOf, Samples, startWaitProbes, type Latency, type LiveWaits } from './live-waits.ts';
import { openBenchAccount, startMock, startTollgate, tollgateRequest, type Mock, type Tollgate } from './targets.ts';
import { writeMarkedBlock } from './report.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const CORRECTED_MODEL = 'cx/gen-6-astra'; // priced ×2; corrected to ×1.5
const ACCOUNTS = 50;
const BIG_SHARE = 0.4;
/** A call rate no seeding or probe reaches (the most a plan may have: a million a minute). */
const UNLIMITED_RATE = 1_000_000;

export interface PhaseFigure {
  seconds: number;
  peakRssMiB: number;
  /** CPU seconds the gateway process used in the phase (user + system, all its threads): on a shared machine, the figure the load changes least. */
  gatewayCpuSeconds: number;
  /** Live chat calls on another account while the phase ran. */
  live: { calls: number; p99: number; max: number };
  /** What such a call waits on meanwhile: the gateway's event loop and a durable commit (live-waits.ts). */
  waits: LiveWaits;
  /** Seconds the gateway's event loop (its main thread) ran, and waited runnable for a CPU held by another thread or process. */
  loopThread: { ranSeconds: number; queuedSeconds: number };
}

export interface CorrectionSizeResult {
  charges: number;
  events: number;
  seedSeconds: number;
  replaySeconds: number;
  idle: { rssMiB: number; live: { calls: number; p99: number; max: number }; waits: LiveWaits };
  /** Idle again once every phase has ended: on a large log the first idle follows the start too closely to be a clean baseline. */
  idleAfter: { live: Latency; waits: LiveWaits };
  dryRun: PhaseFigure & { bodyBytes: number };
  detail: PhaseFigure & { lines: number; bytes: number };
  apply: PhaseFigure & { appended: number; rate: { start: number; middle: number; end: number; overall: number } };
  reapply: PhaseFigure & { appended: number };
  statement: PhaseFigure & { bytes: number };
  verify: PhaseFigure & { ok: boolean; events: number };
  /** GET /admin/v1/events: the whole log as NDJSON. */
  logExport: PhaseFigure & { bytes: number; lines: number };
  /** POST /admin/v1/rebuild: every read model built again beside the live ones, then swapped in. */
  rebuild: PhaseFigure & { ok: boolean };
  /** TOLLGATE_OPERATOR_SHARE the gateways ran with. */
  share: number;
  /** The corrected (big) account's own calls, sequential, before the correction and after it. */
  corrected: { before: Latency; after: Latency };
  exact: boolean;
  errors: string[];
}

const mib = (kb: number) => kb / 1024;

/** PROBE_CALLS sequential calls on one account (every one must be answered 200): their latencies (p99: the second longest). */
const PROBE_CALLS = 200;
async function probeCalls(gw: Tollgate, account: { accountId: string; key: string }, errors: string[]): Promise<Latency> {
  const req = tollgateRequest(gw, account, false);
  const ms: number[] = [];
  for (let i = 0; i < PROBE_CALLS; i++) {
    const t = performance.now();
    const res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body });
    const text = await res.text();
    ms.push(performance.now() - t);
    if (res.status !== 200) {
      errors.push(`call on ${account.accountId}: ${res.status} ${text.slice(0, 200)}`);
      break;
    }
  }
  return latencyOf(ms);
}
/** CPU seconds a process has used so far (user + system, from /proc/<pid>/stat, in clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Sequential chat calls on one account until stopped; the latencies of those made in a span. */
function liveLoad(gw: Tollgate, account: { accountId: string; key: string }) {
  const req = tollgateRequest(gw, account, false);
  const samples = new Samples();
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      const res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body }).catch(() => null);
      await res?.text();
      samples.add(t, performance.now() - t);
      await new Promise((r) => setTimeout(r, 20)); // light: about 40 calls a second
    }
  })();
  return {
    between: (from: number, to: number) => samples.between(from, to),
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** The phases a run may leave out (--phases): the apply always runs. */
export const OPTIONAL_PHASES = ['probe', 'dry run', 'apply again', 'statement of the big account', 'verify', 'export of the log', 'rebuild'];

/**
 * Where the work runs: everything in the one gateway (as `npm start`); the read side in a projector
 * process of its own; or, besides, the operator's requests sent to a second gateway (its own
 * process and event loop) while the live calls go to the first, which projects.
 */
const TOPOLOGIES = ['one-gateway', 'projector', 'operator'] as const;
export type Topology = (typeof TOPOLOGIES)[number];

export async function runCorrectionsBench(o: {
  databaseUrl: string;
  sizes: number[];
  log?: (l: string) => void;
  phases?: string[];
  /** Leave out the apply too (and the check that every charge is at its corrected figure). */
  skipApply?: boolean;
  topology?: Topology;
  /** TOLLGATE_OPERATOR_SHARE for the gateways (default 1). */
  share?: number;
}): Promise<CorrectionSizeResult[]> {
  const out: CorrectionSizeResult[] = [];
  for (const n of o.sizes) {
    const phases = new Set(o.phases ?? OPTIONAL_PHASES);
    if (!o.skipApply) phases.add('apply');
    out.push(await oneSize(o.databaseUrl, n, o.log ?? console.log, phases, o.topology ?? 'one-gateway', o.share ?? 1));
  }
  return out;
}

async function oneSize(
  url: string,
  charges: number,
  log: (l: string) => void,
  phases: Set<string>,
  topology: Topology,
  share: number,
): Promise<CorrectionSizeResult> {
  // The bench's own checks (seeding, the SQL check of every charge) run long at 1M: no statement timeout of the gateway's.
  const db = openPostgres(url, 8, { ...DEFAULT_PG_TIMEOUTS, statementMs: 600_000 });
  const schema = `bench_corr_${randomBytes(4).toString('hex')}`;
  const errors: string[] = [];
  let mock: Mock | null = null;
  let gw: Tollgate | null = null;
  let operatorGateway: Tollgate | null = null;
  /** The probes running beside the phases: stopped however the run ends. */
  const probes: Array<{ stop(): Promise<void> }> = [];
  try {
    const tag = randomBytes(3).toString('hex');
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => new SimAccount(tag, i, CORRECTED_MODEL));
    // No call rate to speak of: the seeded calls all fall in the seeding's minutes, and the big
    // account's own calls (the probe) must be answered, not refused as over its rate.
    for (const a of accounts) a.requestsPerMinute = UNLIMITED_RATE;
    const from = new Date(Date.now() - 1000);
    let t = performance.now();
    const events = await seedCharges(db, schema, accounts, charges, BIG_SHARE);
    const seedSeconds = (performance.now() - t) / 1000;
    log(`corrections ${charges}: seeded ${events} events in ${seedSeconds.toFixed(1)} s (topology: ${topology}, operator share ${share})`);
    t = performance.now();
    const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
    await replayInto(db, store, `${schema}_rm`);
    const replaySeconds = (performance.now() - t) / 1000;
    log(`corrections ${charges}: read models built in ${replaySeconds.toFixed(1)} s`);
    await store.close();
    const to = new Date(Date.now() + 1000);

    mock = await startMock();
    gw = await startTollgate({
      databaseUrl: url,
      mock,
      schema,
      projector: topology === 'projector',
      env: { TOLLGATE_OPERATOR_SHARE: String(share) },
      nodeArgs: [
        ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
        ...(process.env.BENCH_PRELOAD ? ['--import', process.env.BENCH_PRELOAD] : []),
      ],
    });
    const g = gw;
    const liveAccount = await openBenchAccount(g, 'live');
    const live = liveLoad(g, liveAccount);
    const waits = await startWaitProbes(g.url, url, schema);
    probes.push(live, waits);
    // The operator's requests go to a gateway of their own in the 'operator' topology; the live calls,
    // the probes and the figures (memory, CPU, the loop's waits) stay on the first gateway.
    if (topology === 'operator')
      operatorGateway = await startTollgate({ databaseUrl: url, mock, schema, env: { TOLLGATE_PROJECTIONS: 'off', TOLLGATE_OPERATOR_SHARE: String(share) } });
    const ops = operatorGateway ?? g;
    const headers = { authorization: `Bearer ${ops.adminToken}`, 'content-type': 'application/json', 'x-tollgate-actor': 'bench' };
    const terms = { model: CORRECTED_MODEL, from: from.toISOString(), to: to.toISOString(), multiplier: 1.5, reason: 'bench' };

    /** Runs a phase, sampling the gateway's resident memory every 50 ms. */
    const phase = async <T>(name: string, fn: () => Promise<T>, skipped?: T): Promise<PhaseFigure & { value: T }> => {
      if (skipped !== undefined && !phases.has(name.split(' (')[0])) {
        log(`corrections ${charges}: ${name} skipped (--phases)`);
        const none = { calls: 0, p99: NaN, max: NaN };
        return {
          seconds: NaN,
          peakRssMiB: NaN,
          gatewayCpuSeconds: NaN,
          live: none,
          waits: { loop: none, commit: none },
          loopThread: { ranSeconds: NaN, queuedSeconds: NaN },
          value: skipped,
        };
      }
      let peak = rssKb(g.proc.pid);
      const timer = setInterval(() => (peak = Math.max(peak, rssKb(g.proc.pid))), 50);
      const start = performance.now();
      const cpuBefore = cpuSeconds(g.proc.pid);
      const loopBefore = schedstat(g.proc.pid);
      try {
        const value = await fn();
        const end = performance.now();
        const figure = {
          seconds: (end - start) / 1000,
          peakRssMiB: mib(peak),
          gatewayCpuSeconds: cpuSeconds(g.proc.pid) - cpuBefore,
          live: live.between(start, end),
          waits: waits.between(start, end),
          loopThread: loopThreadSince(loopBefore, schedstat(g.proc.pid)),
          value,
        };
        log(
          `corrections ${charges}: ${name} ${figure.seconds.toFixed(2)} s, peak RSS ${figure.peakRssMiB.toFixed(0)} MiB, gateway CPU ${figure.gatewayCpuSeconds.toFixed(1)} s, live p99 ${figure.live.p99.toFixed(1)} ms, longest ${figure.live.max.toFixed(1)} ms (${figure.live.calls} calls); ${waitsText(figure.waits)}; the loop ran ${figure.loopThread.ranSeconds.toFixed(1)} s and waited ${figure.loopThread.queuedSeconds.toFixed(1)} s for a CPU`,
        );
        return figure;
      } finally {
        clearInterval(timer);
      }
    };
    const post = (path: string, body: unknown, accept = 'application/json') =>
      fetch(`${ops.url}/admin/v1${path}`, { method: 'POST', headers: { ...headers, accept }, body: JSON.stringify(body) });

    // The idle figures: after a few seconds of warming up (the first calls compile the code paths).
    await new Promise((r) => setTimeout(r, 3000));
    const idleStart = performance.now();
    await new Promise((r) => setTimeout(r, 5000));
    const idle = { rssMiB: mib(rssKb(g.proc.pid)), live: live.between(idleStart, performance.now()), waits: waits.between(idleStart, performance.now()) };
    log(
      `corrections ${charges}: idle RSS ${idle.rssMiB.toFixed(0)} MiB, live p99 ${idle.live.p99.toFixed(1)} ms, longest ${idle.live.max.toFixed(1)} ms; ${waitsText(idle.waits)}`,
    );

    // The big account's own calls, with a key issued now (the seeded keys' secrets are not known).
    const bigKey = (await (await post(`/accounts/${accounts[0].accountId}/keys`, { name: 'bench probe' })).json()) as { key: string };
    const big = { accountId: accounts[0].accountId, key: bigKey.key };
    const noProbe = { calls: 0, p99: NaN, max: NaN };
    const correctedBefore = phases.has('probe') ? await probeCalls(g, big, errors) : noProbe;
    log(`corrections ${charges}: the big account's calls before: p99 ${correctedBefore.p99.toFixed(1)} ms, longest ${correctedBefore.max.toFixed(1)} ms`);

    const dry = await phase(
      'dry run (totals)',
      async () => {
        const text = await (await post('/corrections', { ...terms, dry_run: true })).text();
        const r = JSON.parse(text) as { totals: { charges: number } };
        if (r.totals.charges !== charges) errors.push(`dry run: ${r.totals.charges} charges, expected ${charges}`);
        return text.length;
      },
      0,
    );
    const detail = await phase(
      'dry run (NDJSON detail)',
      async () => {
        const res = await post('/corrections', { ...terms, dry_run: true }, 'application/x-ndjson');
        let bytes = 0;
        let lines = 0;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          bytes += chunk.length;
          for (const b of chunk) if (b === 10) lines++;
        }
        return { bytes, lines };
      },
      { bytes: 0, lines: 0 },
    );
    const progress: Array<{ at: number; appended: number }> = [];
    const applyStart = performance.now();
    const apply = await phase(
      'apply',
      async () => {
        const res = await post('/corrections', terms, 'application/x-ndjson');
        let buffer = '';
        let last: Record<string, unknown> = {};
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += Buffer.from(chunk).toString();
          let i;
          while ((i = buffer.indexOf('\n')) >= 0) {
            const l = JSON.parse(buffer.slice(0, i)) as Record<string, unknown>;
            buffer = buffer.slice(i + 1);
            if (l.object === 'correction.progress') {
              progress.push({ at: performance.now(), appended: Number(l.appended) });
              if (progress.length % 50 === 0)
                log(`corrections ${charges}: apply progress ${l.appended} appended at ${((performance.now() - applyStart) / 1000).toFixed(1)} s`);
            }
            last = l;
          }
        }
        if (last.object !== 'reconciliation') errors.push(`apply ended with ${JSON.stringify(last).slice(0, 300)}`);
        return Number(last.appended);
      },
      0,
    );
    const rateBetween = (a: number, b: number) => {
      // Adjustments a second between the progress lines nearest a and b of the way through.
      const total = apply.value || 1;
      if (progress.length === 0) return NaN;
      const x = [...progress].reverse().find((q) => q.appended <= a * total) ?? progress[0];
      const y = progress.find((q) => q.appended >= b * total && q.at > x.at) ?? progress[progress.length - 1];
      return y.at > x.at ? ((y.appended - x.appended) * 1000) / (y.at - x.at) : 0;
    };
    const rate = { start: rateBetween(0, 0.15), middle: rateBetween(0.425, 0.575), end: rateBetween(0.85, 1), overall: apply.value / apply.seconds };
    log(
      `corrections ${charges}: apply ${apply.value} adjustments, ${rate.overall.toFixed(0)}/s (start ${rate.start.toFixed(0)}, middle ${rate.middle.toFixed(0)}, end ${rate.end.toFixed(0)})`,
    );
    // As NDJSON: its progress lines keep the response alive (a JSON answer waited past the client's 300 s header timeout at 1M).
    const reapply = await phase(
      'apply again',
      async () => {
        const text = await (await post('/corrections', terms, 'application/x-ndjson')).text();
        return Number((JSON.parse(text.trim().split('\n').pop()!) as { appended?: number }).appended);
      },
      0,
    );
    if (reapply.value !== 0) errors.push(`apply again appended ${reapply.value}`);
    const correctedAfter = phases.has('probe') ? await probeCalls(g, big, errors) : noProbe;
    log(`corrections ${charges}: the big account's calls after: p99 ${correctedAfter.p99.toFixed(1)} ms, longest ${correctedAfter.max.toFixed(1)} ms`);
    const statement = await phase(
      'statement of the big account (JSON)',
      async () => {
        const res = await fetch(`${ops.url}/admin/v1/accounts/${accounts[0].accountId}/statement?from=${terms.from}&to=${terms.to}`, { headers });
        let bytes = 0;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
        return bytes;
      },
      0,
    );
    const verify = await phase(
      'verify',
      async () => {
        const text = await (await post('/verify', {}, 'application/x-ndjson')).text();
        const lastLine = JSON.parse(text.trim().split('\n').pop()!) as { ok?: boolean; events?: number };
        if (lastLine.ok !== true) errors.push(`verify: ${JSON.stringify(lastLine).slice(0, 1500)}`);
        return { ok: lastLine.ok === true, events: Number(lastLine.events ?? 0) };
      },
      { ok: false, events: 0 },
    );
    const logExport = await phase(
      'export of the log',
      async () => {
        const res = await fetch(`${ops.url}/admin/v1/events`, { headers });
        let bytes = 0;
        let lines = 0;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          bytes += chunk.length;
          for (const b of chunk) if (b === 10) lines++;
        }
        if (res.status !== 200 || lines < events) errors.push(`export of the log: ${res.status}, ${lines} lines for at least ${events} events`);
        return { bytes, lines };
      },
      { bytes: 0, lines: 0 },
    );
    const rebuild = await phase(
      'rebuild',
      async () => {
        const text = await (await post('/rebuild', {}, 'application/x-ndjson')).text();
        const lastLine = JSON.parse(text.trim().split('\n').pop()!) as { type?: string };
        if (lastLine.type !== 'done') errors.push(`rebuild: ${JSON.stringify(lastLine).slice(0, 500)}`);
        return { ok: lastLine.type === 'done' };
      },
      { ok: false },
    );
    await new Promise((r) => setTimeout(r, 3000));
    const idleAfterStart = performance.now();
    await new Promise((r) => setTimeout(r, 5000));
    const idleAfter = { live: live.between(idleAfterStart, performance.now()), waits: waits.between(idleAfterStart, performance.now()) };
    log(
      `corrections ${charges}: idle after the phases: live p99 ${idleAfter.live.p99.toFixed(1)} ms, longest ${idleAfter.live.max.toFixed(1)} ms; ${waitsText(idleAfter.waits)}`,
    );
    // Exact to the token: every charge of the window billed now at ceil(tokens × 1.5).
    const [bad] = await db.query<{ n: string }>(
      `SELECT count(*) AS n FROM (SELECT c.event_id, c.prompt_tokens + c.completion_tokens AS tokens, c.billed + coalesce(sum(a.billed), 0) AS net
         FROM "${schema}_rm".charges c LEFT JOIN "${schema}_rm".charges a ON a.charge_event_id = c.event_id AND a.kind = 'adjustment'
         WHERE c.model = $1 AND c.kind = 'chat' GROUP BY c.event_id, c.prompt_tokens, c.completion_tokens, c.billed) x
       WHERE net <> ceil(tokens * 1.5)`,
      [CORRECTED_MODEL],
    );
    const exact = Number(bad.n) === 0 && apply.value === charges;
    if (!exact && phases.has('apply')) errors.push(`${bad.n} charges not at their corrected figure; ${apply.value} appended for ${charges} charges`);
    log(`corrections ${charges}: exact to the token: ${exact ? 'yes' : 'NO'}${errors.length ? `; errors: ${errors.join('; ')}` : ''}`);
    await live.stop();
    await waits.stop();
    const { value: dryBytes, ...dryFigure } = dry;
    const { value: detailValue, ...detailFigure } = detail;
    const { value: appended, ...applyFigure } = apply;
    const { value: reappended, ...reapplyFigure } = reapply;
    const { value: statementBytes, ...statementFigure } = statement;
    const { value: verified, ...verifyFigure } = verify;
    const { value: exported, ...exportFigure } = logExport;
    const { value: rebuilt, ...rebuildFigure } = rebuild;
    return {
      charges,
      events,
      seedSeconds,
      replaySeconds,
      idle,
      idleAfter,
      dryRun: { ...dryFigure, bodyBytes: dryBytes },
      detail: { ...detailFigure, ...detailValue },
      apply: { ...applyFigure, appended, rate },
      reapply: { ...reapplyFigure, appended: reappended },
      statement: { ...statementFigure, bytes: statementBytes },
      verify: { ...verifyFigure, ...verified },
      logExport: { ...exportFigure, ...exported },
      rebuild: { ...rebuildFigure, ...rebuilt },
      share,
      corrected: { before: correctedBefore, after: correctedAfter },
      exact,
      errors,
    };
  } finally {
    for (const p of probes) await p.stop().catch(() => undefined);
    await operatorGateway?.stop().catch(() => undefined);
    await gw?.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    if (!process.env.BENCH_KEEP)
      await db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm" CASCADE`).catch(() => undefined);
    await db.close();
  }
}

const loopThreadSince = (a: { ran: number; queued: number }, b: { ran: number; queued: number }) => ({
  ranSeconds: (b.ran - a.ran) / 1000,
  queuedSeconds: (b.queued - a.queued) / 1000,
});
const waitsText = (w: LiveWaits) =>
  `gateway loop (GET /healthz) p99 ${w.loop.p99.toFixed(1)} ms, longest ${w.loop.max.toFixed(1)} ms; durable commit p99 ${w.commit.p99.toFixed(1)} ms, longest ${w.commit.max.toFixed(1)} ms`;

const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
/** The section's table, one column per size. */
export function correctionsTable(rs: CorrectionSizeResult[]): string {
  const row = (name: string, cell: (r: CorrectionSizeResult) => string) => `| ${name} | ${rs.map(cell).join(' | ')} |`;
  const live = (p: PhaseFigure) => `${f1(p.live.p99)} ms, ${f0(p.live.max)} ms`;
  const waits = (w: LiveWaits) => `${f1(w.loop.p99)} / ${f1(w.commit.p99)} ms`;
  return [
    `| charges in the window | ${rs.map((r) => r.charges.toLocaleString('en-US')).join(' | ')} |`,
    `|---|${rs.map(() => '---').join('|')}|`,
    row('operator share (TOLLGATE_OPERATOR_SHARE)', (r) => String(r.share)),
    row('events in the log (seeded)', (r) => r.events.toLocaleString('en-US')),
    row('idle: gateway RSS; live p99, longest', (r) => `${f0(r.idle.rssMiB)} MiB; ${f1(r.idle.live.p99)} ms, ${f0(r.idle.live.max)} ms`),
    row('idle after the phases: live p99, longest', (r) => `${f1(r.idleAfter.live.p99)} ms, ${f0(r.idleAfter.live.max)} ms`),
    row('dry run (totals): time, body, peak RSS', (r) => `${f1(r.dryRun.seconds)} s, ${f0(r.dryRun.bodyBytes / 1024)} KB, ${f0(r.dryRun.peakRssMiB)} MiB`),
    row(
      'dry run (NDJSON detail): time, size, peak RSS',
      (r) => `${f1(r.detail.seconds)} s, ${f0(r.detail.bytes / 2 ** 20)} MB, ${f0(r.detail.peakRssMiB)} MiB`,
    ),
    row('apply: time, adjustments/s overall', (r) => `${f1(r.apply.seconds)} s, ${f0(r.apply.rate.overall)}/s`),
    row('apply rate: start / middle / end', (r) => `${f0(r.apply.rate.start)} / ${f0(r.apply.rate.middle)} / ${f0(r.apply.rate.end)}`),
    row('apply: peak RSS', (r) => `${f0(r.apply.peakRssMiB)} MiB`),
    row(
      'apply: gateway CPU, adjustments per CPU second',
      (r) => `${f1(r.apply.gatewayCpuSeconds)} s, ${f0(r.apply.appended / (r.apply.gatewayCpuSeconds || 1))}/s`,
    ),
    row('verify: gateway CPU (all its threads)', (r) => `${f1(r.verify.gatewayCpuSeconds)} s`),
    row('apply again (appends nothing): time, peak RSS', (r) => `${f1(r.reapply.seconds)} s, ${f0(r.reapply.peakRssMiB)} MiB`),
    row(
      'statement of the big account (JSON): time, size, peak RSS',
      (r) => `${f1(r.statement.seconds)} s, ${f0(r.statement.bytes / 2 ** 20)} MB, ${f0(r.statement.peakRssMiB)} MiB`,
    ),
    row(
      'verify: time, events, peak RSS',
      (r) => `${f1(r.verify.seconds)} s, ${r.verify.events.toLocaleString('en-US')}, ${f0(r.verify.peakRssMiB)} MiB${r.verify.ok ? '' : ' NOT OK'}`,
    ),
    row('live p99, longest: dry run', (r) => live(r.dryRun)),
    row('live p99, longest: NDJSON detail', (r) => live(r.detail)),
    row('live p99, longest: apply', (r) => live(r.apply)),
    row('live p99, longest: statement', (r) => live(r.statement)),
    row('live p99, longest: verify', (r) => live(r.verify)),
    row(
      'export of the log: time, size, peak RSS',
      (r) => `${f1(r.logExport.seconds)} s, ${f0(r.logExport.bytes / 2 ** 20)} MB, ${f0(r.logExport.peakRssMiB)} MiB`,
    ),
    row('live p99, longest: export of the log', (r) => live(r.logExport)),
    row(
      'rebuild: time, peak RSS',
      (r) => `${f1(r.rebuild.seconds)} s, ${f0(r.rebuild.peakRssMiB)} MiB${r.rebuild.ok || Number.isNaN(r.rebuild.seconds) ? '' : ' FAILED'}`,
    ),
    row('live p99, longest: rebuild', (r) => live(r.rebuild)),
    row('gateway loop / durable commit p99: idle', (r) => waits(r.idle.waits)),
    row('gateway loop / durable commit p99: apply', (r) => waits(r.apply.waits)),
    row('gateway loop / durable commit p99: verify', (r) => waits(r.verify.waits)),
    row('apply: the loop ran / waited for a CPU', (r) => `${f1(r.apply.loopThread.ranSeconds)} s / ${f1(r.apply.loopThread.queuedSeconds)} s`),
    row('corrected account, its own calls: p99 before / after', (r) => `${f1(r.corrected.before.p99)} / ${f1(r.corrected.after.p99)} ms`),
    row('exact to the token', (r) => (r.exact ? 'yes' : 'NO')),
  ].join('\n');
}

/** Writes the table into its own marked block of BENCHMARKS.md (appended at the end the first time). */
export function writeCorrectionsBlock(path: string, rs: CorrectionSizeResult[], when: string): void {
  writeMarkedBlock(path, 'corrections', `Last run: ${when}.\n\n${correctionsTable(rs)}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({
    options: {
      sizes: { type: 'string' },
      phases: { type: 'string' },
      'skip-apply': { type: 'boolean' },
      topology: { type: 'string' },
      share: { type: 'string' },
    },
  });
  const topology = (values.topology ?? 'one-gateway') as Topology;
  if (!TOPOLOGIES.includes(topology)) throw new Error(`--topology is one of ${TOPOLOGIES.join(', ')}`);
  const sizes = (values.sizes ?? '10000,100000,1000000').split(',').map(Number);
  // --phases probe,dry run,apply again,statement of the big account,verify,export of the log,rebuild (default all; the apply always runs)
  const phases = values.phases?.split(',');
  const rs = await runCorrectionsBench({
    databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    sizes,
    phases,
    skipApply: values['skip-apply'],
    topology,
    share: values.share === undefined ? 1 : Number(values.share),
  });
  console.log(`\n${correctionsTable(rs)}`);
  for (const e of rs.flatMap((r) => r.errors)) console.log(`ERROR: ${e}`);
}
