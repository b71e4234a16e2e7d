// The finance reads on the books' read models (issue 41), on a log of a year of a paid gateway's
// traffic (bench/finance-seed.ts: 50 accounts over 400 UTC days, monthly plans paid and renewed,
// packs, free plans, refunds, disputes, chat calls priced by upstream cost rates), seeded straight
// into PostgreSQL with COPY. Per size:
//   1. seed; replay every read model (replayInto, as a rebuild does); replay them again without the
//      books, and the books' fold alone (bench/finance-projector.ts), for what the books add to a
//      replay; the live path's cost per event with and without the books (pages continuing the log);
//   2. the fold the read models replaced (foldFinance) on the same log, in a process of its own
//      (bench/finance-old-fold.ts): the last 31 days; on a log over EXTRAPOLATE_ABOVE events, a
//      31-day window ending where about FOLD_EVENTS events lie behind it, its walk of the log
//      extrapolated linearly to the whole log (the method is printed with the figure);
//   3. the compiled gateway on that schema, a small closed loop of chat calls through it (a child
//      process: bench/load.ts closed-loop), alone (idle) for IDLE_SPAN_MS before each kind of read,
//      then beside it: the report (JSON and CSV), the reconciliation, the journal (hledger) and the
//      lots, each on REQUESTS random 31-day windows, then the report on the last 366 days; each
//      read's time, the gateway's peak RSS while it ran, every answer checked;
//   4. the console's Finance page opened, and on the last 31 days, in chromium (bench/finance-page.ts);
//   5. where a window's time goes: each read the report makes, timed from this process, and the
//      query plans (EXPLAIN ANALYZE) of the window's booked days and of its upstream cost per day.
// Every schema is dropped at the end.
//
// node --import tsx bench/finance.ts [--sizes 1000000,10000000 | --quick] [--write]   (or npm run bench -- --only finance)
// --quick: 100k events only. BENCH_CPU_PROF=dir: the gateway writes a CPU profile there when it stops.
// BENCH_KEEP=1: the schemas of the log and its read models are kept (named in the output).
// BENCH_RESULTS_DIR=dir: each size's figures are saved there as JSON; --render a.json,b.json [--when text]
// [--write] makes the table (and the block) from saved figures without running anything.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import os from 'node:os';
import { DEFAULT_PG_TIMEOUTS, openPostgres, type Database } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { upstreamCostBetween } from '../src/catalogue/index.ts';
import { forEachPricedCall } from '../projections/catalogue/upstream-cost.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { bookedDays, bookedEntries, bookedLots, deferredRows } from '../projections/books/book-reads.ts';
import { DAY_COLUMNS } from '../projections/books/books.ts';
import { staleDays } from '../projections/books/book-renders.ts';
import { seedFinanceYear, type FinanceSeedResult } from './finance-seed.ts';
import { BOOK_PROJECTIONS, livePageCost, replayOnly, WITHOUT_BOOKS, type PageCost } from './finance-projector.ts';
import type { OldFoldResult } from './finance-old-fold.ts';
import type { ClosedLoopResult } from './load.ts';
import { processCpuSeconds, rssMiB, sampleRss, startLoad } from './processes.ts';
import { gatewayMetrics, openBenchAccount, startMock, startTollgate, tollgateRequest, type Mock, type Tollgate } from './targets.ts';
import { writeMarkedBlock } from './report.ts';
import { timeFinancePage, type PageFigure } from './finance-page.ts';
import { ensureTables as ensureWebhookTables } from '../src/webhooks/storage.ts';
import { quiesce } from './quiesce.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const DAYS = 400;
const ACCOUNTS = 50;
/** Requests per kind of read, each on a random 31-day window... */
const REQUESTS = 20;
/** ...or fewer (MIN_REQUESTS at least) when a kind's reads have taken this long: a 10M log's are minutes each. */
const KIND_BUDGET_MS = 15 * 60_000;
const MIN_REQUESTS = 3;
/** Requests of the report on the last 366 days. */
const LONG_REQUESTS = 2;
/** Above this many events the two extra replays (without the books, the books alone) are left out: per event they cost what they cost at 1M, and at 10M they are half an hour. */
const SPLIT_REPLAYS_UP_TO = 2_000_000;
/** Above this many events the old fold is timed on part of the log and extrapolated. */
const EXTRAPOLATE_ABOVE = 2_500_000;
const FOLD_EVENTS = 1_000_000;
/** The live load: callers, and each one's pause between an answer and its next call. */
const LIVE_CALLERS = 2;
const LIVE_PAUSE_MS = 20;
/** The live calls alone before each kind of read (a third of it with --quick). */
const IDLE_SPAN_MS = 10_000;

/** Issue 41's targets. */
export const FINANCE_TARGETS = { windowP99Ms: 200, longWindowMs: 2_000, liveP99Ratio: 1.5, liveExtraMs: 100, pageMs: 1_000 };

export interface ReadFigure {
  name: string;
  requests: number;
  /** Requests not answered 200 (their times are in the figures: a 503 after a statement timeout). */
  failed: number;
  p50: number;
  p99: number;
  max: number;
  /** Median answer size. */
  bytes: number;
  peakRssMiB: number;
  /** Gateway CPU seconds per request. */
  cpuSeconds: number;
  /** The gateway's longest event-loop delay while this kind of read ran (its nodejs_eventloop_lag_max_seconds, reset by each scrape). */
  loopLagMaxMs: number;
  /** The machine's load average (1 min) when this kind of reads ended: others share it. */
  loadAverage: number;
  /** Live calls made while this kind of read ran. */
  live: LiveFigure;
}

export interface LiveFigure {
  calls: number;
  p50: number;
  p99: number;
  max: number;
}

export interface WindowParts {
  window: string;
  days: number;
  rows: number;
  deferred: number;
  entries: number;
  lots: number;
  calls: number;
  /** Milliseconds of each read, from this process. */
  daysMs: number;
  deferredMs: number;
  entriesMs: number;
  lotsMs: number;
  costMs: number;
  /** Why the upstream cost failed (a statement timeout), if it did. */
  costError?: string;
  /** The same calls priced when read, as before the cost fold (forEachPricedCall): the old path's part. */
  pricedWhenReadMs: number;
}

export interface OldFoldFigure extends OldFoldResult {
  window: string;
  /** Events the fold read (those up to the window's end). */
  eventsFolded: number;
  /** Seconds for the last 31 days of the whole log: measured, or extrapolated (see method). */
  lastWindowSeconds: number;
  /** The same for the last 366 days (the fold's walk of the whole log plus the 366 days' upstream cost). */
  longWindowSeconds: number;
  method: string;
  /** Totals that differ between the fold and the read models' report on the fold's window. */
  differences: string[];
}

export interface FinanceSizeResult {
  events: number;
  seed: Omit<FinanceSeedResult, 'continuation' | 'eventsByDayEnd'>;
  seedSeconds: number;
  replaySeconds: number;
  replayWithoutBooksSeconds: number;
  booksAloneSeconds: number;
  /** CPU seconds of this process (its replay threads included) in each replay: steadier than wall clock on a shared machine. */
  replayCpu: { all: number; withoutBooks: number; booksAlone: number };
  pageCosts: PageCost[];
  /** Closed days whose finance parts the gateway's day renderer kept after its start, and how long it took. */
  renderedDays: number;
  renderSeconds: number;
  idleRssMiB: number;
  reads: ReadFigure[];
  idleLive: LiveFigure;
  duringLive: LiveFigure;
  /** The gateway's longest event-loop delay in the idle spans. */
  idleLoopLagMaxMs: number;
  parts: WindowParts[];
  plans: string[];
  oldFold: OldFoldFigure | null;
  /** The console's Finance page on the last 31 days, or why it was not timed. */
  financePage: PageFigure | string;
  freeDiskGiB: number;
  loadAverage: number;
  errors: string[];
}

/** Waits until the gateway's day renderer has kept every closed day's parts (src/books/day-renderer.ts); resolves with their number. */
async function dayPartsKept(db: Database, rm: string): Promise<number> {
  const today = new Date().toISOString().slice(0, 10);
  for (const until = performance.now() + 15 * 60_000; performance.now() < until; await new Promise((r) => setTimeout(r, 250))) {
    // Before the renderer's first pass its table is not there yet.
    const stale = await staleDays(db, rm, today, 1).catch(() => null);
    if (stale === null || stale.length > 0) continue;
    const [kept] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${rm}".book_renders`);
    return kept.n;
  }
  throw new Error('the day renderer did not keep every closed day within 15 minutes');
}

function percentile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] : NaN;
}

function liveOf(ms: number[]): LiveFigure {
  const s = [...ms].sort((a, b) => a - b);
  return { calls: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99), max: s.length ? s[s.length - 1] : NaN };
}

const epochMs = () => performance.timeOrigin + performance.now();

/** A deterministic stream of numbers in [0, 1), for the windows (the same from run to run). */
function windowRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 4294967296;
  };
}

const dayPlus = (day: string, n: number) => new Date(Date.parse(`${day}T00:00:00.000Z`) + n * 86_400_000).toISOString().slice(0, 10);

function runOldFold(job: { url: string; schema: string; from: string; to: string }): Promise<OldFoldResult> {
  const script = new URL('./finance-old-fold.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', 'tsx', script, JSON.stringify(job)], { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`old fold failed: ${err.message}\n${stderr.slice(-2000)}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as OldFoldResult);
      } catch {
        reject(new Error(`old fold printed no result:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`));
      }
    });
  });
}

/** Seconds and rows of each read a window's report makes, from this process (after the gateway's reads). */
async function windowParts(db: Database, rm: string, from: string, to: string): Promise<WindowParts> {
  const timed = async <T>(f: () => Promise<T>): Promise<[T, number]> => {
    const t = performance.now();
    const v = await f();
    return [v, performance.now() - t];
  };
  const [rows, daysMs] = await timed(() => bookedDays(db, rm, from, to));
  const [deferred, deferredMs] = await timed(() => deferredRows(db, rm, from, to));
  const [entries, entriesMs] = await timed(() => bookedEntries(db, rm, from, to));
  const [lots, lotsMs] = await timed(() => bookedLots(db, rm, to));
  // The upstream cost as the gateway reads it: with a serving process's statement timeout (a page
  // whose query outlasts it fails there too), so a window whose pages are planned badly fails in
  // seconds here as it does there, instead of running for hours.
  const serving = openPostgres(db.url!, 2, DEFAULT_PG_TIMEOUTS);
  let costError: string | undefined;
  const [costs, costMs] = await timed(() =>
    upstreamCostBetween(serving, rm, from, to).catch((err: Error) => {
      costError = err.message.slice(0, 120);
      return [];
    }),
  );
  await serving.close();
  const [, pricedWhenReadMs] = await timed(() => forEachPricedCall(db, rm, from, to, () => undefined));
  const days = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000 + 1;
  return {
    window: `${from}..${to}`,
    days,
    rows: rows.length,
    deferred: deferred.within.length + deferred.before.size,
    entries: entries.length,
    lots: lots.length,
    calls: costs.reduce((s, c) => s + c.calls, 0),
    daysMs,
    deferredMs,
    entriesMs,
    lotsMs,
    costMs,
    costError,
    pricedWhenReadMs,
  };
}

/**
 * The plans of a window's booked days and of its upstream cost per day: the queries of
 * book-reads.ts and upstreamCostBetween (projections/catalogue/upstream-cost.ts), written out here for EXPLAIN.
 */
async function windowPlans(db: Database, rm: string, from: string, to: string): Promise<string[]> {
  const explain = async (title: string, sql: string, params: unknown[]) => {
    const rows = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params);
    return `${title}\n${rows.map((r) => `  ${r['QUERY PLAN']}`).join('\n')}`;
  };
  const s = `"${rm}"`;
  return [
    await explain(`book_days ${from}..${to}`, `SELECT * FROM ${s}.book_days WHERE day >= $1 AND day <= $2`, [from, to]),
    await explain(
      `upstream_cost_days ${from}..${to}`,
      `SELECT * FROM ${s}.upstream_cost_days WHERE day >= $1 AND day <= $2 AND calls > 0 ORDER BY day COLLATE "C", account_id COLLATE "C", model COLLATE "C", channel COLLATE "C", upstream_model COLLATE "C"`,
      [from, to],
    ),
  ];
}

const TOTALS_COMPARED = [...DAY_COLUMNS, 'upstream_cost', 'unpriced_calls'];

async function oneSize(url: string, target: number, log: (l: string) => void, quick: boolean): Promise<FinanceSizeResult> {
  const schema = `bench_fin_${Math.random().toString(16).slice(2, 10)}`;
  const rm = `${schema}_rm`;
  const scratch = [`${schema}_nb`, `${schema}_bk`];
  const errors: string[] = [];
  // The bench's own statements (the seeding, the replays, the plans) run as long as they need.
  const db = openPostgres(url, 8, { ...DEFAULT_PG_TIMEOUTS, statementMs: 0 });
  let mock: Mock | null = null;
  let gw: Tollgate | null = null;
  let live: { stop(): Promise<ClosedLoopResult> } | null = null;
  const freeDiskGiB = (() => {
    try {
      const f = statfsSync('/');
      return (f.bavail * f.bsize) / 2 ** 30;
    } catch {
      return NaN;
    }
  })();
  try {
    log(`finance ${target.toLocaleString('en-US')}: ${freeDiskGiB.toFixed(0)} GiB free on /, schema ${schema}`);
    let t = performance.now();
    const seeded = await seedFinanceYear(db, url, schema, { events: target, days: DAYS, accounts: ACCOUNTS, log });
    const seedSeconds = (performance.now() - t) / 1000;
    const { continuation, eventsByDayEnd, ...seed } = seeded;
    log(
      `finance ${target}: seeded ${seed.events.toLocaleString('en-US')} events (${seed.calls.toLocaleString('en-US')} calls, ${seed.payments} payments, ` +
        `${seed.refunds} refunds, ${seed.disputes} disputes) over ${seed.firstDay}..${seed.lastDay} in ${seedSeconds.toFixed(1)} s`,
    );

    const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
    const cpuOf = async (f: () => Promise<unknown>) => {
      const before = process.cpuUsage();
      await f();
      const used = process.cpuUsage(before);
      return (used.user + used.system) / 1e6;
    };
    t = performance.now();
    const replayCpu = { all: await cpuOf(() => replayInto(db, store, rm)), withoutBooks: 0, booksAlone: 0 };
    const replaySeconds = (performance.now() - t) / 1000;
    log(`finance ${target}: replay of every read model ${replaySeconds.toFixed(1)} s (node CPU ${replayCpu.all.toFixed(1)} s)`);
    let replayWithoutBooksSeconds = NaN;
    let booksAloneSeconds = NaN;
    if (seed.events <= SPLIT_REPLAYS_UP_TO) {
      replayCpu.withoutBooks = await cpuOf(async () => (replayWithoutBooksSeconds = await replayOnly(db, store, scratch[0], WITHOUT_BOOKS)));
      await db.exec(`DROP SCHEMA IF EXISTS "${scratch[0]}" CASCADE`);
      log(`finance ${target}: replay without the books ${replayWithoutBooksSeconds.toFixed(1)} s (node CPU ${replayCpu.withoutBooks.toFixed(1)} s)`);
      replayCpu.booksAlone = await cpuOf(async () => (booksAloneSeconds = await replayOnly(db, store, scratch[1], BOOK_PROJECTIONS)));
      await db.exec(`DROP SCHEMA IF EXISTS "${scratch[1]}" CASCADE`);
      log(`finance ${target}: the books' fold replayed alone (one thread) ${booksAloneSeconds.toFixed(1)} s (node CPU ${replayCpu.booksAlone.toFixed(1)} s)`);
    } else log(`finance ${target}: the replays without the books and of the books alone are measured on logs of up to ${int(SPLIT_REPLAYS_UP_TO)} events only`);
    await store.close();

    // The live path: the log's next events, in pages as the projector applies them.
    const next = continuation(2_000);
    const pageCosts = [await livePageCost(db, rm, next, 20), await livePageCost(db, rm, next, 1_000, 4)];
    for (const c of pageCosts)
      log(`finance ${target}: projector pages of ${c.pageEvents}: ${c.withBooksUs.toFixed(0)} µs/event with the books, ${c.withoutBooksUs.toFixed(0)} without`);

    // The fold the read models replaced.
    const days = [...eventsByDayEnd.keys()];
    let oldWindow = { from: dayPlus(seed.lastDay, -30), to: seed.lastDay };
    if (seed.events > EXTRAPOLATE_ABOVE) {
      const end = Math.max(
        30,
        days.findIndex((d) => eventsByDayEnd.get(d)! >= FOLD_EVENTS),
      );
      oldWindow = { from: days[end - 30], to: days[end] };
    }
    const eventsFolded = eventsByDayEnd.get(oldWindow.to)!;
    log(`finance ${target}: the old fold (foldFinance) on ${oldWindow.from}..${oldWindow.to}, ${eventsFolded.toLocaleString('en-US')} events to walk`);
    const old = await runOldFold({ url, schema, ...oldWindow }).catch((err: Error) => {
      errors.push(err.message.slice(0, 500));
      return null;
    });
    if (old)
      log(`finance ${target}: old fold ${old.seconds.toFixed(1)} s (upstream cost ${old.costSeconds.toFixed(1)} s), peak RSS ${old.peakRssMiB.toFixed(0)} MiB`);

    // The log was written without a gateway, so the webhook dispatcher's checkpoint would start at
    // 0 and its first start walk the whole log (at 10M events, minutes beside the reads); in a
    // gateway that grew to this size it has kept up with the log.
    await ensureWebhookTables(db, schema);
    await db.query(`UPDATE "${schema}".webhook_checkpoint SET position = (SELECT max(position) FROM "${schema}".events) WHERE name = 'dispatcher'`);
    t = performance.now();
    await quiesce(db);
    log(`finance ${target}: PostgreSQL quiesced (CHECKPOINT, autovacuum waited for) in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    mock = await startMock();
    // BENCH_CPU_PROF=dir: the gateway writes a CPU profile there when it stops (bench/profile-summary.ts reads it).
    gw = await startTollgate({
      databaseUrl: url,
      mock,
      schema,
      nodeArgs: process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [],
    });
    const g = gw;
    t = performance.now();
    const renderedDays = await dayPartsKept(db, rm);
    const renderSeconds = (performance.now() - t) / 1000;
    log(`finance ${target}: the gateway's day renderer kept the parts of ${renderedDays} closed days in ${renderSeconds.toFixed(1)} s`);
    await new Promise((r) => setTimeout(r, 2000));
    const idleRssMiB = rssMiB(g.proc.pid) ?? NaN;
    const account = await openBenchAccount(g, 'live');
    live = await startLoad<ClosedLoopResult>({
      kind: 'closed-loop',
      target: tollgateRequest(g, account, false),
      connections: LIVE_CALLERS,
      pauseMs: LIVE_PAUSE_MS,
    });
    await new Promise((r) => setTimeout(r, 3000));
    // Idle spans before each kind of read: on a shared machine the load of others drifts, and idle
    // calls taken once at the start measured that drift more than the reads.
    const idleSpans: Array<{ from: number; to: number }> = [];
    // The gateway's longest event-loop delay since the last scrape (prom-client resets it on each).
    const loopLagMaxMs = async () => {
      const m = /^nodejs_eventloop_lag_max_seconds\s+(\S+)/m.exec(await gatewayMetrics(g));
      return m ? Number(m[1]) * 1000 : NaN;
    };
    let idleLoopLagMaxMs = 0;
    const idle = async () => {
      await loopLagMaxMs();
      const from = epochMs();
      await new Promise((r) => setTimeout(r, quick ? IDLE_SPAN_MS / 3 : IDLE_SPAN_MS));
      idleSpans.push({ from, to: epochMs() });
      idleLoopLagMaxMs = Math.max(idleLoopLagMaxMs, await loopLagMaxMs());
    };

    const headers = { authorization: `Bearer ${g.adminToken}` };
    // node:http, not fetch: no time limit of the client's on a long read (fetch gives up on headers after 300 s).
    const get = (path: string, w: { from: string; to: string }) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.get(`${g.url}/admin/v1/finance/${path}${path.includes('?') ? '&' : '?'}from=${w.from}&to=${w.to}`, { headers }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          res.on('error', reject);
        });
        req.on('error', reject);
      });
    const random = windowRandom(41);
    const randomWindow = () => {
      const k = Math.floor(random() * (days.length - 30));
      return { from: days[k], to: days[k + 30] };
    };
    const spans: Array<{ name: string; from: number; to: number }> = [];
    const kinds: Array<{ name: string; path: string; check: (text: string) => string | null; windows?: () => { from: string; to: string }; n?: number }> = [
      {
        name: 'report (JSON)',
        path: 'report',
        check: (text) => {
          const r = JSON.parse(text) as { rows: unknown[]; totals: { unpriced_calls: number; revenue: number } };
          return r.rows.length > 0 && r.totals.revenue > 0 && r.totals.unpriced_calls === 0 ? null : `rows ${r.rows.length}, ${JSON.stringify(r.totals)}`;
        },
      },
      {
        name: 'report (CSV)',
        path: 'report?format=csv',
        check: (text) => (text.startsWith('day,account_id') && text.split('\n').length > 2 ? null : 'not the CSV'),
      },
      {
        name: 'reconciliation',
        path: 'reconciliation',
        check: (text) => {
          const total = (JSON.parse(text) as { total: { difference: number } }).total;
          return total.difference === 0 ? null : `difference ${total.difference}`;
        },
      },
      {
        name: 'journal (hledger)',
        path: 'journal?format=hledger',
        check: (text) => (text.includes('revenue:recognised') ? null : 'no revenue in the journal'),
      },
      { name: 'lots', path: 'lots', check: (text) => ((JSON.parse(text) as { data: unknown[] }).data.length > 0 ? null : 'no lots') },
      {
        name: 'report (JSON), last 366 days',
        path: 'report',
        check: (text) => ((JSON.parse(text) as { rows: unknown[] }).rows.length > 0 ? null : 'no rows'),
        windows: () => ({ from: dayPlus(seed.lastDay, -365), to: seed.lastDay }),
        n: LONG_REQUESTS,
      },
    ];
    const reads: Array<Omit<ReadFigure, 'live'>> = [];
    for (const k of kinds) {
      await idle();
      const n = k.n ?? REQUESTS;
      const times: number[] = [];
      const sizes: number[] = [];
      const rss = sampleRss(g.proc.pid, 50);
      const cpu = processCpuSeconds(g.proc.pid) ?? 0;
      const texts: string[] = [];
      const from = epochMs();
      let failed = 0;
      const budgetEnds = performance.now() + KIND_BUDGET_MS;
      for (let i = 0; i < n && (i < MIN_REQUESTS || performance.now() < budgetEnds); i++) {
        const w = (k.windows ?? randomWindow)();
        const t0 = performance.now();
        const r = await get(k.path, w).catch((err: Error) => ({ status: 0, text: err.message }));
        times.push(performance.now() - t0);
        sizes.push(r.text.length);
        if (r.status !== 200) {
          failed++;
          errors.push(`${k.name} ${w.from}..${w.to}: ${r.status} after ${msText(times[times.length - 1])}: ${r.text.slice(0, 200)}`);
        } else texts.push(r.text);
      }
      spans.push({ name: k.name, from, to: epochMs() });
      const lag = await loopLagMaxMs();
      const cpuSeconds = ((processCpuSeconds(g.proc.pid) ?? 0) - cpu) / times.length;
      const { peakMiB } = rss.stop();
      // Checked after the timed requests, so this process's parsing never delays the next one.
      for (const text of texts) {
        const problem = k.check(text);
        if (problem) {
          errors.push(`${k.name}: ${problem}`);
          break;
        }
      }
      const s = [...times].sort((a, b) => a - b);
      const figure = {
        name: k.name,
        requests: times.length,
        failed,
        p50: percentile(s, 0.5),
        p99: percentile(s, 0.99),
        max: s[s.length - 1],
        bytes: [...sizes].sort((a, b) => a - b)[Math.floor(sizes.length / 2)],
        peakRssMiB: peakMiB,
        cpuSeconds,
        loopLagMaxMs: lag,
        loadAverage: os.loadavg()[0],
      };
      reads.push(figure);
      log(
        `finance ${target}: ${k.name} ×${figure.requests}${failed ? ` (${failed} failed)` : ''}: p50 ${figure.p50.toFixed(0)} ms, p99 ${figure.p99.toFixed(0)} ms, ` +
          `${(figure.bytes / 1024).toFixed(0)} KiB, peak RSS ${peakMiB.toFixed(0)} MiB, gateway CPU ${(cpuSeconds * 1000).toFixed(0)} ms each, ` +
          `longest event-loop delay ${lag.toFixed(0)} ms, load average ${figure.loadAverage.toFixed(1)}`,
      );
    }
    // The read models' report on the old fold's window, to hold the two side by side.
    const mine = await get('report', oldWindow);
    const liveResult = await live.stop();
    live = null;
    const failed = liveResult.calls.filter(([, , status]) => status !== 200).length;
    if (failed > 0) errors.push(`${failed} of ${liveResult.calls.length} live calls failed`);
    const callsIn = (from: number, to: number) => liveResult.calls.filter(([at, ms]) => at < to && at + ms > from).map(([, ms]) => ms);
    const idleLive = liveOf(liveResult.calls.filter(([at, ms]) => idleSpans.some((s) => at >= s.from && at + ms <= s.to)).map(([, ms]) => ms));
    const duringLive = liveOf(spans.flatMap((s) => callsIn(s.from, s.to)));
    const readFigures: ReadFigure[] = reads.map((r, i) => ({ ...r, live: liveOf(callsIn(spans[i].from, spans[i].to)) }));
    for (const r of readFigures)
      log(
        `finance ${target}: live calls during ${r.name}: p50 ${r.live.p50.toFixed(1)} / p99 ${r.live.p99.toFixed(1)} / max ${r.live.max.toFixed(0)} ms (${r.live.calls})`,
      );
    log(
      `finance ${target}: live calls idle p50 ${idleLive.p50.toFixed(1)} / p99 ${idleLive.p99.toFixed(1)} / max ${idleLive.max.toFixed(0)} ms (${idleLive.calls}); ` +
        `during the reads p50 ${duringLive.p50.toFixed(1)} / p99 ${duringLive.p99.toFixed(1)} / max ${duringLive.max.toFixed(0)} ms (${duringLive.calls})`,
    );
    // The console's Finance page, opened and on the last 31 days (after the live load: it measures the page alone).
    const page = await timeFinancePage(g.url, g.adminToken, dayPlus(seed.lastDay, -30), seed.lastDay);
    if (typeof page === 'string') log(`finance ${target}: Finance page not timed: ${page}`);
    else
      log(
        `finance ${target}: Finance page opened: ${(page.opens ?? []).map((ms) => ms.toFixed(0)).join(', ')} ms to the table; ` +
          `${page.window} (${page.rows} days): ${page.runs.map((ms) => ms.toFixed(0)).join(', ')} ms from Show to the table`,
      );
    await g.stop();
    gw = null;

    // Where the time goes, with nothing else running: the last 31 days and the last 366.
    const parts = [await windowParts(db, rm, dayPlus(seed.lastDay, -30), seed.lastDay), await windowParts(db, rm, dayPlus(seed.lastDay, -365), seed.lastDay)];
    for (const p of parts)
      log(
        `finance ${target}: parts of ${p.window}: book_days ${p.daysMs.toFixed(0)} ms (${p.rows} rows), deferred ${p.deferredMs.toFixed(0)} ms, ` +
          `entries ${p.entriesMs.toFixed(0)} ms, lots ${p.lotsMs.toFixed(0)} ms, upstream cost ${p.costMs.toFixed(0)} ms (${p.calls} calls; ` +
          `priced when read, as before: ${p.pricedWhenReadMs.toFixed(0)} ms)`,
      );
    const plans = await windowPlans(db, rm, dayPlus(seed.lastDay, -30), seed.lastDay);
    for (const p of plans) log(p);

    // The old fold beside the read models: totals on its window, and its time for the last 31 and 366 days.
    let oldFold: OldFoldFigure | null = null;
    if (old) {
      const differences: string[] = [];
      if (mine.status === 200) {
        const totals = (JSON.parse(mine.text) as { totals: Record<string, number> }).totals;
        for (const k of TOTALS_COMPARED) {
          const a = (old.totals as unknown as Record<string, number>)[k];
          if (a !== totals[k]) differences.push(`${k}: fold ${a}, read models ${totals[k]}`);
        }
      } else differences.push(`the read models' report answered ${mine.status}`);
      if (differences.length) errors.push(`the old fold and the read models differ on ${oldWindow.from}..${oldWindow.to}: ${differences.join('; ')}`);
      const walk = old.seconds - old.costSeconds;
      const whole = seed.events / eventsFolded;
      oldFold = {
        ...old,
        window: `${oldWindow.from}..${oldWindow.to}`,
        eventsFolded,
        lastWindowSeconds: walk * whole + old.costSeconds,
        longWindowSeconds: walk * whole + parts[1].pricedWhenReadMs / 1000,
        method:
          eventsFolded >= seed.events
            ? "last 31 days measured (the fold walks the whole log, then prices the window's calls); last 366 days: that walk plus the 366 days' calls priced when read (timed apart)"
            : `walk of ${eventsFolded.toLocaleString('en-US')} events (${oldWindow.from}..${oldWindow.to}: ${walk.toFixed(1)} s, upstream cost apart) ` +
              `× ${whole.toFixed(2)} to the whole log, plus the window's calls priced when read`,
        differences,
      };
    }
    return {
      events: seed.events,
      seed,
      seedSeconds,
      replaySeconds,
      replayWithoutBooksSeconds,
      booksAloneSeconds,
      replayCpu,
      pageCosts,
      renderedDays,
      renderSeconds,
      idleRssMiB,
      reads: readFigures,
      idleLive,
      duringLive,
      idleLoopLagMaxMs,
      parts,
      plans,
      oldFold,
      financePage: page,
      freeDiskGiB,
      loadAverage: os.loadavg()[0],
      errors,
    };
  } finally {
    await live?.stop().catch(() => undefined);
    await gw?.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    // BENCH_KEEP=1 keeps the log and its read models for a look afterwards.
    if (process.env.BENCH_KEEP) log(`finance ${target}: kept ${schema} and ${rm}`);
    else await db.exec([schema, rm, ...scratch].map((s) => `DROP SCHEMA IF EXISTS "${s}" CASCADE`).join('; ')).catch(() => undefined);
    await db.close();
  }
}

export async function runFinanceBench(o: { databaseUrl: string; sizes: number[]; quick?: boolean; log?: (l: string) => void }): Promise<FinanceSizeResult[]> {
  const out: FinanceSizeResult[] = [];
  for (const n of o.sizes) {
    const r = await oneSize(o.databaseUrl, n, o.log ?? console.log, !!o.quick);
    out.push(r);
    // Each size's figures as JSON too (a 10M size takes hours): `--render` makes the table from them again.
    const dir = process.env.BENCH_RESULTS_DIR;
    if (dir) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `finance-${n}.json`), JSON.stringify(r, null, 1));
    }
  }
  return out;
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const msText = (v: number) => (Number.isNaN(v) ? '—' : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${v.toFixed(0)} ms`);
const secs = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));

const failedText = (f: ReadFigure) => (f.failed ? ` (**${f.failed} failed**)` : '');
const partsText = (p: WindowParts) =>
  `${msText(p.daysMs)} / ${msText(p.deferredMs)} / ${msText(p.entriesMs)} / ${msText(p.lotsMs)} / ` +
  (p.costError ? `**failed after ${msText(p.costMs)}** (${p.costError})` : `${msText(p.costMs)} (${int(p.calls)} calls)`);

/** One column per size. */
export function financeTable(rs: FinanceSizeResult[]): string {
  const row = (name: string, cell: (r: FinanceSizeResult) => string) => `| ${name} | ${rs.map(cell).join(' | ')} |`;
  const read = (r: FinanceSizeResult, name: string) => r.reads.find((x) => x.name === name)!;
  const readRow = (name: string, label: string) =>
    row(label, (r) => {
      const f = read(r, name);
      return `${f.requests}: ${msText(f.p50)} / ${msText(f.p99)}, ${f.peakRssMiB.toFixed(0)} MiB, ${(f.bytes / 1024).toFixed(0)} KiB (load ${f.loadAverage.toFixed(1)})${failedText(f)}`;
    });
  const long = (r: FinanceSizeResult) => read(r, 'report (JSON), last 366 days');
  const report31 = (r: FinanceSizeResult) => read(r, 'report (JSON)');
  const page = (r: FinanceSizeResult, n: number) => {
    const c = r.pageCosts.find((p) => p.pageEvents === n)!;
    return `${c.withBooksUs.toFixed(0)} / ${c.withoutBooksUs.toFixed(0)} µs (+${(c.withBooksUs - c.withoutBooksUs).toFixed(0)})`;
  };
  return [
    `| events in the log (${DAYS} UTC days, ${ACCOUNTS} accounts) | ${rs.map((r) => int(r.events)).join(' | ')} |`,
    `|---|${rs.map(() => '---').join('|')}|`,
    row('calls / payments (plan periods, packs) / free renewals / refunds / disputes / plans ended unrenewed', (r) => {
      const s = r.seed;
      return `${int(s.calls)} / ${s.payments} (${s.planPayments}, ${s.packs}) / ${s.freeRenewals} / ${s.refunds} / ${s.disputes} / ${s.churned}`;
    }),
    row('seed (generate, hash, validate, COPY)', (r) => `${secs(r.seedSeconds)} s (${int(r.events / r.seedSeconds)} events/s)`),
    row('replay, every read model (2 threads): wall clock, node CPU', (r) => `${secs(r.replaySeconds)} s, ${secs(r.replayCpu.all)} s`),
    row('replay without the books: wall clock, node CPU', (r) =>
      !Number.isFinite(r.replayWithoutBooksSeconds)
        ? '— (not run at this size)'
        : `${secs(r.replayWithoutBooksSeconds)} s, ${secs(r.replayCpu.withoutBooks)} s`,
    ),
    row("the books' share of the replay: wall clock, node CPU", (r) => {
      if (!Number.isFinite(r.replayWithoutBooksSeconds)) return '—';
      const share = (a: number, b: number) => `${secs(a - b)} s (${((100 * (a - b)) / a).toFixed(0)} %)`;
      return `${share(r.replaySeconds, r.replayWithoutBooksSeconds)}, ${share(r.replayCpu.all, r.replayCpu.withoutBooks)}`;
    }),
    row("the books' fold replayed alone (1 thread): wall clock; node CPU per event of the log", (r) =>
      !Number.isFinite(r.booksAloneSeconds) ? '—' : `${secs(r.booksAloneSeconds)} s; ${((r.replayCpu.booksAlone * 1e6) / r.events).toFixed(1)} µs`,
    ),
    row('projector, pages of 20: µs/event with / without the books', (r) => page(r, 20)),
    row('projector, pages of 1,000: µs/event with / without the books', (r) => page(r, 1000)),
    row("the gateway's day renderer at its start: closed days kept, wall clock", (r) => `${int(r.renderedDays)}, ${secs(r.renderSeconds)} s`),
    row('gateway RSS, idle', (r) => `${r.idleRssMiB.toFixed(0)} MiB`),
    `| **31-day windows, random: requests (${REQUESTS}, or fewer after ${KIND_BUDGET_MS / 60_000} min), p50 / p99, peak RSS, answer size (machine load average after them)** | ${rs.map(() => '').join(' | ')} |`,
    readRow('report (JSON)', 'report (JSON)'),
    readRow('report (CSV)', 'report (CSV)'),
    readRow('reconciliation', 'reconciliation'),
    readRow('journal (hledger)', 'journal (hledger)'),
    readRow('lots', 'lots'),
    row(`**report (JSON), last 366 days** (×${LONG_REQUESTS}): p50 / max, peak RSS, size`, (r) => {
      const f = long(r);
      return `${msText(f.p50)} / ${msText(f.max)}, ${f.peakRssMiB.toFixed(0)} MiB, ${(f.bytes / 1024).toFixed(0)} KiB${failedText(f)}`;
    }),
    row('last 31 days from the bench: book_days / deferred / entries / lots / upstream cost', (r) => partsText(r.parts[0])),
    row('last 366 days, the same', (r) => partsText(r.parts[1])),
    row(
      `live chat calls (${LIVE_CALLERS} callers, ${LIVE_PAUSE_MS} ms pause): idle p50 / p99 / max`,
      (r) => `${r.idleLive.p50.toFixed(1)} / ${r.idleLive.p99.toFixed(1)} / ${r.idleLive.max.toFixed(0)} ms`,
    ),
    row('the same during the finance reads', (r) => `${r.duringLive.p50.toFixed(1)} / ${r.duringLive.p99.toFixed(1)} / ${r.duringLive.max.toFixed(0)} ms`),
    row(
      'live p99 during ÷ idle; longest call − idle p99',
      (r) => `${(r.duringLive.p99 / r.idleLive.p99).toFixed(2)}×; +${(r.duringLive.max - r.idleLive.p99).toFixed(0)} ms`,
    ),
    row("the gateway's longest event-loop delay, idle", (r) => `${r.idleLoopLagMaxMs.toFixed(0)} ms`),
    row("the console's Finance page (chromium): opened (reload to its table), each run; the last 31 days by Show, each run", (r) =>
      typeof r.financePage === 'string'
        ? `— (${r.financePage})`
        : `${(r.financePage.opens ?? []).map((ms) => ms.toFixed(0)).join(', ')} ms; ${r.financePage.runs.map((ms) => ms.toFixed(0)).join(', ')} ms (${r.financePage.rows} days)`,
    ),
    ...['report (JSON)', 'report (CSV)', 'reconciliation', 'journal (hledger)', 'lots', 'report (JSON), last 366 days'].map((name) =>
      row(`live calls during ${name}: p99 / max; longest event-loop delay`, (r) => {
        const f = read(r, name);
        return `${f.live.p99.toFixed(0)} / ${f.live.max.toFixed(0)} ms; ${f.loopLagMaxMs.toFixed(0)} ms`;
      }),
    ),
    `| **the fold it replaced (foldFinance)** | ${rs.map(() => '').join(' | ')} |`,
    row('old fold: window timed, events walked, seconds, peak RSS', (r) =>
      r.oldFold ? `${r.oldFold.window}, ${int(r.oldFold.eventsFolded)}, ${secs(r.oldFold.seconds)} s, ${r.oldFold.peakRssMiB.toFixed(0)} MiB` : '—',
    ),
    row('old fold: how its figures for the whole log are had', (r) => r.oldFold?.method ?? '— (failed: see the errors)'),
    row('old fold, last 31 days ÷ read models (report JSON p50)', (r) =>
      r.oldFold ? `${secs(r.oldFold.lastWindowSeconds)} s ÷ ${msText(report31(r).p50)} = ${int((r.oldFold.lastWindowSeconds * 1000) / report31(r).p50)}×` : '—',
    ),
    row('old fold, last 366 days ÷ read models', (r) =>
      !r.oldFold || Number.isNaN(r.oldFold.longWindowSeconds) || long(r).failed
        ? "— (the 366 days' upstream cost failed)"
        : `${secs(r.oldFold.longWindowSeconds)} s ÷ ${msText(long(r).p50)} = ${((r.oldFold.longWindowSeconds * 1000) / long(r).p50).toFixed(1)}×`,
    ),
    row('load average (1 min) after the run; free disk before', (r) => `${r.loadAverage.toFixed(2)}; ${r.freeDiskGiB.toFixed(0)} GiB`),
  ].join('\n');
}

/** Issue 41's targets, one line each, met or not. */
export function financeTargets(rs: FinanceSizeResult[]): string[] {
  const t = FINANCE_TARGETS;
  const out: string[] = [];
  const mark = (ok: boolean) => (ok ? 'met' : '**not met**');
  const at = (r: FinanceSizeResult) => `${int(r.events)} events`;
  for (const r of rs) {
    const windows = r.reads.filter((x) => !x.name.includes('366'));
    const worst = [...windows].sort((a, b) => b.p99 - a.p99)[0];
    const long = r.reads.find((x) => x.name.includes('366'))!;
    const failed = windows.reduce((n, x) => n + x.failed, 0);
    out.push(
      `- ${at(r)}: any 31-day window ≤ ${t.windowP99Ms} ms p99: ${mark(worst.p99 <= t.windowP99Ms && failed === 0)} ` +
        `(slowest: ${worst.name}, p99 ${msText(worst.p99)}${failed ? `; ${failed} failed` : ''})`,
    );
    out.push(
      `- ${at(r)}: 366-day report ≤ ${t.longWindowMs / 1000} s: ${mark(long.max <= t.longWindowMs && long.failed === 0)} ` +
        `(max ${msText(long.max)}${long.failed ? `; ${long.failed} of ${long.requests} failed` : ''})`,
    );
    out.push(
      `- ${at(r)}: live p99 within ${t.liveP99Ratio}× of idle: ${mark(r.duringLive.p99 <= t.liveP99Ratio * r.idleLive.p99)} ` +
        `(${(r.duringLive.p99 / r.idleLive.p99).toFixed(2)}×); no call over idle + ${t.liveExtraMs} ms: ${mark(r.duringLive.max - r.idleLive.p99 <= t.liveExtraMs)} ` +
        `(longest ${msText(r.duringLive.max)}, idle p99 ${r.idleLive.p99.toFixed(1)} ms)`,
    );
    const page = r.financePage;
    out.push(
      typeof page === 'string'
        ? `- ${at(r)}: the Finance page within ${t.pageMs / 1000} s: **not measured** (${page})`
        : `- ${at(r)}: the Finance page within ${t.pageMs / 1000} s: ${mark(Math.max(...(page.opens ?? page.runs)) <= t.pageMs)} (slowest of ${page.runs.length} opens: ${msText(Math.max(...(page.opens ?? page.runs)))}; a 31-day window by Show: slowest ${msText(Math.max(...page.runs))})`,
    );
  }
  if (rs.length > 1) {
    const [a, b] = [rs[0], rs[rs.length - 1]];
    const p99 = (r: FinanceSizeResult) => r.reads.find((x) => x.name === 'report (JSON)')!.p99;
    const rss = (r: FinanceSizeResult) => Math.max(...r.reads.map((x) => x.peakRssMiB));
    out.push(
      `- flat from ${int(a.events)} to ${int(b.events)}: report p99 ${msText(p99(a))} → ${msText(p99(b))} (${(p99(b) / p99(a)).toFixed(2)}×), peak RSS ${rss(a).toFixed(0)} → ${rss(b).toFixed(0)} MiB`,
    );
  }
  return out;
}

/** The table and the targets in their own marked block of BENCHMARKS.md (added at the end the first time). */
export function writeFinanceBlock(path: string, rs: FinanceSizeResult[], when: string): void {
  writeMarkedBlock(
    path,
    'finance',
    [FINANCE_METHOD, '', `Last run: ${when}.`, '', financeTable(rs), '', "Issue 41's targets:", ...financeTargets(rs)].join('\n'),
  );
}

/** How the block's figures are made: written with them, so they never stand without it. */
export const FINANCE_METHOD = `### The finance reads on the books' read models (issue 41)

The figures below replace those of issue #26's bench described above (one day of events, every
read a fold of the whole log): the reads now come from the books' read models. How they are made
(\`bench/finance.ts\`; \`npm run bench -- --only finance\` runs 1M and 10M events, \`--quick\` 100k):

- **The log**: a year of a paid gateway's traffic (\`bench/finance-seed.ts\`): ${ACCOUNTS} accounts
  joining over the first 90 of ${DAYS} UTC days; monthly plans paid and renewed (PaymentReceived +
  SubscriptionRenewed; some stop renewing and their last lot expires), free plans, packs bought when
  tokens run out, refunds, lost disputes, and chat calls every day (QuotaReserved + ChatCharged, three
  models per account, a primary or backup channel priced by upstream cost rates, changed on day 200).
  The calls a day are what the size leaves for the days left, so a 31-day window holds about 8 % of
  the log at any size, and 10M events is the same customers calling ten times as much. Every event
  comes from the real deciders, is checked by validateEvent, hashed by the store's own code and
  COPYed into the events table with the time it happens at; the position origin is then moved past it.
- **Replay**: replayInto of every read model (two worker threads), then by the same steps every read
  model but the books (here "the books" are issue 41's read models: the lot book's tables and the
  cost fold with upstream_calls and the rates, which a plain row projection partly wrote before),
  then the books alone (one thread): wall clock, and this process's CPU (its
  threads included), steadier on a shared machine.
- **Projector**: the 2,000 events that follow the log (the same accounts going on) applied page
  after page with applyPage, as the projector applies a page, with every read model and without the
  books, in a transaction rolled back at the end; the median page's microseconds per event.
- **Reads**: after PostgreSQL is quiesced as before the gateway bench's phases (a CHECKPOINT,
  autovacuum workers waited for; 0.1 s at 10M events) and with the webhook
  dispatcher's checkpoint at the log's head (it has kept up in such a gateway; from 0, its first
  start walks the whole log beside the reads), the compiled gateway on the seeded schema, once its day renderer
  has kept every closed day's parts of the report and the journal (docs/finance.md, "Each closed day rendered once";
  timed from when the gateway first answers), with a closed loop of chat calls through it
  (${LIVE_CALLERS} callers, ${LIVE_PAUSE_MS} ms pause, in a process of their own). Before each kind of read, the calls run alone for
  ${IDLE_SPAN_MS / 1000} s (idle); then ${REQUESTS} requests of that kind one after the other, each on a random 31-day
  window (the same from run to run), and the report on the last 366 days ${LONG_REQUESTS} times. Time is the HTTP
  call's (p50, p99 of the ${REQUESTS}), memory the gateway's peak VmRSS sampled every 50 ms, size the median answer;
  every answer is checked (report priced, reconciliation difference 0, journal with revenue, lots).
- **Live calls**: idle are the calls made wholly within the idle spans; during, those that overlap a
  read. "Longest call − idle p99" is how much longer than idle a call waited. The gateway's longest
  event-loop delay (its nodejs_eventloop_lag_max_seconds, reset by each scrape) is read for each kind.
- **The Finance page**: Debian's chromium (playwright-core) signed in to the console, five times:
  the page reloaded and timed to its day table (it opens on the last 30 days: the bundle from the
  cache, its two reads, their parsing and the render), then, once idle, the last 31 days of the
  log asked for with Show and timed to that window's first day in the table.
- **Where the time goes**: each read a report makes, timed from the bench with nothing else running,
  on the last 31 and 366 days (the plans of the two window queries are printed by the bench), and
  the window's calls priced when read, as before the cost fold (forEachPricedCall).
- **The old fold**: foldFinance, what every read did before, in a process of its own on the same
  log: the last 31 days (it walks the whole log, then prices the window's calls when read), and the
  last 366 (that walk plus their calls priced when read, timed apart). Above ${(EXTRAPOLATE_ABOVE / 1e6).toFixed(1)}M events it is timed on a 31-day window ending where ${(FOLD_EVENTS / 1e6).toFixed(0)}M events lie
  behind it, and its walk extrapolated linearly to the whole log (it reads the log a page at a time,
  its work per event the same); its totals are checked equal to the read models' report on its window.
- Two cores shared with other work: the load average is given beside the figures.`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({
    options: { sizes: { type: 'string' }, write: { type: 'boolean' }, quick: { type: 'boolean' }, render: { type: 'string' }, when: { type: 'string' } },
  });
  // --render a.json,b.json: the table of sizes saved by an earlier run (BENCH_RESULTS_DIR), run again nothing.
  const rs = values.render
    ? values.render.split(',').map((f) => JSON.parse(readFileSync(f, 'utf8')) as FinanceSizeResult)
    : await runFinanceBench({
        databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
        sizes: (values.sizes ?? (values.quick ? '100000' : '1000000,10000000')).split(',').map(Number),
        quick: !!values.quick,
      });
  console.log(`\n${financeTable(rs)}\n\n${financeTargets(rs).join('\n')}`);
  for (const e of rs.flatMap((r) => r.errors)) console.log(`ERROR: ${e}`);
  if (values.write)
    writeFinanceBlock(new URL('../BENCHMARKS.md', import.meta.url).pathname, rs, values.when ?? `${new Date().toISOString()}, ${os.cpus().length} cores`);
}
