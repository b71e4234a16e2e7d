// Ledger benchmark: append throughput (one appender, 16 concurrent appenders, group-committed
// appenders) and rebuild throughput of every projection, on embedded PGlite and on a real
// PostgreSQL. Run: node --import tsx bench/ledger.ts [--quick] [--pglite-only|--postgres-only] [--json]
// DATABASE_URL selects the server (default postgres://postgres@127.0.0.1:5432/test); everything
// lives in fresh schemas that are dropped at the end.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { openPglite, openPostgres, type Database } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { createGroupCommitter } from '../src/eventstore/group-commit.ts';
import type { AppendRequest, AppendResult, EventStore } from '../src/eventstore/port.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { catalogueSetup, SimAccount } from './ledger-traffic.ts';
import { commitLatency, cpuMeter, machineInfo, withApplicationName, type CpuSeconds, type MachineInfo } from './machine.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

export type Engine = 'pglite' | 'postgres';

export interface LedgerBenchOptions {
  quick?: boolean;
  engines?: Engine[];
  databaseUrl?: string;
  /** Seconds each append scenario runs (default 5 on PostgreSQL, 3 on PGlite; quick: 1.5 / 1). */
  appendSeconds?: Partial<Record<Engine, number>>;
  /** Event counts to rebuild (ascending; one store grows from one to the next). */
  rebuildSizes?: Partial<Record<Engine, number[]>>;
  /** Concurrency of the group-committed scenarios. */
  batchedConcurrency?: number[];
  log?: (line: string) => void;
}

export interface AppendFigure {
  scenario: string;
  mode: 'direct' | 'group';
  appenders: number;
  events: number;
  seconds: number;
  eventsPerSecond: number;
  meanLatencyMs: number;
  cpu: CpuSeconds;
}
export interface RebuildFigure {
  events: number;
  seconds: number;
  eventsPerSecond: number;
  microsPerEvent: number;
  cpu: CpuSeconds;
}
export interface SeedFigure {
  events: number;
  seconds: number;
  eventsPerSecond: number;
  eventsPerCall: number;
}

export interface EngineFigures {
  engine: Engine;
  append: AppendFigure[];
  seed: SeedFigure;
  rebuild: RebuildFigure[];
  /** Time per event at the largest size over time per event at the smallest (1 = linear). */
  linearity: number | null;
  /**
   * PostgreSQL: mean latency of a plain durable one-row INSERT from one client (the floor a
   * single appender is compared with), measured right after the single appender.
   */
  plainInsertMs: number | null;
  /** One-minute load average before and after (it includes this benchmark's own earlier phases). */
  load: { before: number; after: number };
  notes: string[];
}

export interface TargetCheck {
  engine: Engine;
  measure: string;
  value: number;
  target: string;
  met: boolean;
}

export interface LedgerBenchResult {
  date: string;
  machine: MachineInfo;
  /** One-minute load average when the run started: above 0 means other work shared the CPUs. */
  loadAtStart: number;
  quick: boolean;
  engines: EngineFigures[];
  /** Targets are set for PostgreSQL; PGlite is reported for comparison. */
  targets: TargetCheck[];
}

export const TARGETS = { batchedAppendPerSecond: 30_000, singleVsInsertMax: 1.5, rebuildPerSecond: 100_000, rebuild1MSeconds: 10, linearityMax: 1.25 };

const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/test';
const ACCOUNTS_PER_APPENDER = 8;
const SEED_ACCOUNTS = 1000;
const SEED_REQUESTS_PER_CALL = 1000;

export async function runLedgerBench(opts: LedgerBenchOptions = {}): Promise<LedgerBenchResult> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const quick = opts.quick ?? false;
  const url = opts.databaseUrl ?? process.env.DATABASE_URL ?? DEFAULT_URL;
  const engines = opts.engines ?? ['pglite', 'postgres'];
  const appendSeconds = { pglite: quick ? 1 : 3, postgres: quick ? 1.5 : 5, ...opts.appendSeconds };
  const rebuildSizes = {
    pglite: quick ? [10_000, 30_000] : [20_000, 100_000],
    postgres: quick ? [20_000, 100_000] : [100_000, 1_000_000],
    ...opts.rebuildSizes,
  };
  const batched = opts.batchedConcurrency ?? (quick ? [16, 256] : [16, 256, 1024]);

  const result: LedgerBenchResult = {
    date: new Date().toISOString(),
    machine: await machineInfo(engines.includes('postgres') ? url : null),
    loadAtStart: os.loadavg()[0],
    quick,
    engines: [],
    targets: [],
  };
  for (const engine of engines) {
    log(`\n== ${engine} ==`);
    result.engines.push(await benchEngine(engine, url, { seconds: appendSeconds[engine], sizes: rebuildSizes[engine], batched, log }));
  }
  result.targets = checkTargets(result.engines);
  return result;
}

async function benchEngine(
  engine: Engine,
  url: string,
  o: { seconds: number; sizes: number[]; batched: number[]; log: (l: string) => void },
): Promise<EngineFigures> {
  const tag = randomBytes(4).toString('hex');
  const appName = `tollgate_bench_${tag}`;
  const db: Database = engine === 'postgres' ? openPostgres(withApplicationName(url, appName), 40) : await openPglite();
  const cpu = cpuMeter(engine === 'postgres' ? db : null, appName);
  const schema = `bench_${tag}`;
  const figures: EngineFigures = {
    engine,
    append: [],
    seed: { events: 0, seconds: 0, eventsPerSecond: 0, eventsPerCall: 0 },
    rebuild: [],
    linearity: null,
    plainInsertMs: null,
    load: { before: os.loadavg()[0], after: 0 },
    notes: [],
  };
  try {
    // -- appends: a store of its own, fresh accounts per scenario.
    const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
    await store.appendMany(catalogueSetup());
    await appendScenario(store, cpu, 'warm-up', 1, Math.min(1, o.seconds), 'direct');
    const scenarios: Array<[string, number, 'direct' | 'group']> = [
      ['single appender, one append per call', 1, 'direct'],
      ['16 concurrent appenders, store.append', 16, 'direct'],
      ...o.batched.map((n) => [`${n} concurrent appenders, group commit`, n, 'group'] as [string, number, 'group']),
    ];
    for (const [name, n, mode] of scenarios) {
      const f = await appendScenario(store, cpu, name, n, o.seconds, mode);
      figures.append.push(f);
      o.log(
        `append  ${name.padEnd(42)} ${fmt(f.eventsPerSecond).padStart(9)} events/s  (${f.events} events in ${f.seconds.toFixed(2)} s, mean latency ${f.meanLatencyMs.toFixed(2)} ms, ${cpuText(f.cpu, f.events)})`,
      );
      if (engine === 'postgres' && n === 1 && mode === 'direct') {
        figures.plainInsertMs = (await commitLatency(db, 2000)).mean;
        o.log(`insert  a plain durable one-row INSERT, one client: mean latency ${figures.plainInsertMs.toFixed(2)} ms`);
      }
    }
    await store.close();

    // -- rebuilds: a second store grown to each size in turn, replayed into a fresh schema.
    const events = await createPostgresEventStore(db, { schema: `${schema}_ev`, validate: validateEvent });
    const seeder = await createSeeder(events);
    for (const size of o.sizes) {
      const s = await seeder.growTo(size);
      o.log(`seed    ${String(size).padStart(9)} events (bulk appendMany, ${seeder.eventsPerCall} events per call: ${fmt(s.eventsPerSecond)} events/s)`);
      const usage = await cpu.start();
      const started = performance.now();
      const position = await replayInto(db, events, `${schema}_rm`);
      const seconds = (performance.now() - started) / 1000;
      const used = await usage.stop();
      const count = seeder.total;
      await verifyRebuild(db, `${schema}_rm`, seeder, position);
      const f = { events: count, seconds, eventsPerSecond: count / seconds, microsPerEvent: (seconds * 1e6) / count, cpu: used };
      figures.rebuild.push(f);
      o.log(
        `rebuild ${String(count).padStart(9)} events: ${seconds.toFixed(2)} s, ${fmt(f.eventsPerSecond)} events/s, ${f.microsPerEvent.toFixed(2)} µs/event (${cpuText(used, count)})`,
      );
    }
    figures.seed = seeder.figure();
    if (figures.rebuild.length >= 2) {
      const [a, b] = [figures.rebuild[0], figures.rebuild[figures.rebuild.length - 1]];
      figures.linearity = b.microsPerEvent / a.microsPerEvent;
      o.log(`rebuild cost per event at ${b.events} / at ${a.events}: ${figures.linearity.toFixed(2)}`);
    }
    if (engine === 'pglite' && Math.max(...o.sizes) < 1_000_000) {
      figures.notes.push(
        `PGlite rebuild measured up to ${fmt(Math.max(...o.sizes))} events only: embedded single-threaded WASM PostgreSQL, in memory; a 1M-event store is not its use.`,
      );
    }
    await events.close();
  } finally {
    figures.load.after = os.loadavg()[0];
    if (engine === 'postgres') {
      await db.exec([schema, `${schema}_ev`, `${schema}_rm`].map((s) => `DROP SCHEMA IF EXISTS "${s}" CASCADE`).join('; ')).catch(() => undefined);
    }
    await db.close();
  }
  return figures;
}

/** `appenders` workers, each awaiting one command's append after another, for `seconds`. */
async function appendScenario(
  store: EventStore,
  cpu: ReturnType<typeof cpuMeter>,
  name: string,
  appenders: number,
  seconds: number,
  mode: 'direct' | 'group',
): Promise<AppendFigure> {
  const tag = randomBytes(3).toString('hex');
  const accounts = Array.from({ length: appenders * ACCOUNTS_PER_APPENDER }, (_, i) => new SimAccount(tag, i));
  const now = new Date();
  for (let i = 0; i < accounts.length; i += 500)
    await mustAppendMany(
      store,
      accounts.slice(i, i + 500).flatMap((a) => a.setup(now)),
    );
  const committer = createGroupCommitter(store);
  const append: (r: AppendRequest) => Promise<AppendResult> = mode === 'group' ? committer.append : (r) => store.append(r);
  let events = 0;
  let latency = 0;
  let calls = 0;
  const usage = await cpu.start();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: appenders }, async (_, w) => {
      const mine = accounts.slice(w * ACCOUNTS_PER_APPENDER, (w + 1) * ACCOUNTS_PER_APPENDER);
      for (let i = 0; performance.now() < deadline; i++) {
        const request = mine[i % mine.length].nextAppend();
        const t0 = performance.now();
        await append(request);
        latency += performance.now() - t0;
        calls++;
        events += request.events.length;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const used = await usage.stop();
  return { scenario: name, mode, appenders, events, seconds: elapsed, eventsPerSecond: events / elapsed, meanLatencyMs: latency / calls, cpu: used };
}

export async function mustAppendMany(store: EventStore, requests: AppendRequest[]): Promise<void> {
  const results = await store.appendMany(requests);
  const failed = results.find((r) => r instanceof Error);
  if (failed) throw failed;
}

/**
 * Grows an event store with charge traffic: 1000 accounts (opened, subscribed, one key each) and
 * then QuotaReserved + ChatCharged pairs round-robin over them, 1000 requests per appendMany,
 * two calls in flight (accounts split between them so expected revisions never race).
 */
export async function createSeeder(store: EventStore) {
  const tag = randomBytes(3).toString('hex');
  const accounts = Array.from({ length: SEED_ACCOUNTS }, (_, i) => new SimAccount(tag, i));
  const setup = [...catalogueSetup(), ...accounts.flatMap((a) => a.setup(new Date()))];
  for (let i = 0; i < setup.length; i += 500) await mustAppendMany(store, setup.slice(i, i + 500));
  const setupEvents = setup.reduce((n, r) => n + r.events.length, 0);
  let total = setupEvents;
  let charges = 0;
  let seconds = 0;
  let next = 0;
  const lanes = 2;
  return {
    eventsPerCall: SEED_REQUESTS_PER_CALL * 2,
    get total() {
      return total;
    },
    get charges() {
      return charges;
    },
    accounts: SEED_ACCOUNTS,
    async growTo(size: number): Promise<SeedFigure> {
      const started = performance.now();
      const before = total;
      let remaining = Math.floor((size - total) / 2);
      const lane = async (l: number) => {
        while (remaining > 0) {
          const n = Math.min(SEED_REQUESTS_PER_CALL, remaining);
          remaining -= n;
          const batch: AppendRequest[] = [];
          // Lane l owns the accounts with index % lanes === l.
          for (let i = 0; i < n; i++) batch.push(accounts[(next++ * lanes + l) % SEED_ACCOUNTS].nextBulk(1));
          await mustAppendMany(store, batch);
          total += n * 2;
          charges += n;
        }
      };
      await Promise.all(Array.from({ length: lanes }, (_, l) => lane(l)));
      const s = (performance.now() - started) / 1000;
      seconds += s;
      return { events: total - before, seconds: s, eventsPerSecond: (total - before) / s, eventsPerCall: SEED_REQUESTS_PER_CALL * 2 };
    },
    figure(): SeedFigure {
      const events = total - setupEvents;
      return { events, seconds, eventsPerSecond: events / seconds, eventsPerCall: SEED_REQUESTS_PER_CALL * 2 };
    },
  };
}

type Seeder = Awaited<ReturnType<typeof createSeeder>>;

/** Cheap sanity checks that the rebuild produced the read models the seeded traffic implies. */
async function verifyRebuild(db: Database, rm: string, seeder: Seeder, position: number): Promise<void> {
  const one = async (sql: string) => Number(Object.values((await db.query(sql))[0])[0]);
  const checks: Array<[string, number, number]> = [
    ['checkpoint', await one(`SELECT position FROM "${rm}".checkpoint`), position],
    ['charges', await one(`SELECT count(*) FROM "${rm}".charges`), seeder.charges],
    ['accounts', await one(`SELECT count(*) FROM "${rm}".accounts`), seeder.accounts],
    ['keys used', await one(`SELECT count(*) FROM "${rm}".keys WHERE last_used_at IS NOT NULL`), Math.min(seeder.accounts, seeder.charges)],
    ['open holds', await one(`SELECT count(*) FROM "${rm}".holds`), 0],
    ['usage requests', await one(`SELECT coalesce(sum(requests), 0) FROM "${rm}".usage_daily`), seeder.charges],
    ['open_holds', await one(`SELECT coalesce(sum(open_holds), 0) FROM "${rm}".accounts`), 0],
    ['quota used = billed', await one(`SELECT coalesce(sum(quota_used), 0) - (SELECT coalesce(sum(billed), 0) FROM "${rm}".charges) FROM "${rm}".accounts`), 0],
  ];
  const bad = checks.filter(([, got, want]) => got !== want);
  if (bad.length) throw new Error(`rebuild produced wrong read models: ${bad.map(([n, g, w]) => `${n} ${g} != ${w}`).join(', ')}`);
}

function checkTargets(engines: EngineFigures[]): TargetCheck[] {
  const out: TargetCheck[] = [];
  for (const e of engines.filter((x) => x.engine === 'postgres')) {
    const bestBatched = Math.max(0, ...e.append.filter((f) => f.mode === 'group').map((f) => f.eventsPerSecond));
    const single = e.append.find((f) => f.mode === 'direct' && f.appenders === 1);
    if (single && e.plainInsertMs !== null)
      out.push({
        engine: e.engine,
        measure: 'single appender mean latency / plain durable INSERT',
        value: single.meanLatencyMs / e.plainInsertMs,
        target: `<= ${TARGETS.singleVsInsertMax}`,
        met: single.meanLatencyMs / e.plainInsertMs <= TARGETS.singleVsInsertMax,
      });
    out.push({
      engine: e.engine,
      measure: 'append with group commit (best), events/s',
      value: bestBatched,
      target: `>= ${fmt(TARGETS.batchedAppendPerSecond)}`,
      met: bestBatched >= TARGETS.batchedAppendPerSecond,
    });
    for (const r of e.rebuild) {
      out.push({
        engine: e.engine,
        measure: `rebuild all projections, ${fmt(r.events)} events, events/s`,
        value: r.eventsPerSecond,
        target: `>= ${fmt(TARGETS.rebuildPerSecond)}`,
        met: r.eventsPerSecond >= TARGETS.rebuildPerSecond,
      });
      if (r.events >= 1_000_000)
        out.push({
          engine: e.engine,
          measure: `rebuild ${fmt(r.events)} events, seconds`,
          value: r.seconds,
          target: `<= ${TARGETS.rebuild1MSeconds}`,
          met: r.seconds <= TARGETS.rebuild1MSeconds,
        });
    }
    if (e.linearity !== null)
      out.push({
        engine: e.engine,
        measure: `rebuild time per event, ${fmt(e.rebuild.at(-1)!.events)} vs ${fmt(e.rebuild[0].events)}`,
        value: e.linearity,
        target: `<= ${TARGETS.linearityMax} (linear)`,
        met: e.linearity <= TARGETS.linearityMax,
      });
  }
  return out;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function cpuText(c: CpuSeconds, events: number): string {
  const per = (s: number) => `${((s * 1e6) / events).toFixed(1)} µs/event`;
  return c.postgres === null ? `node cpu ${per(c.node)}` : `cpu: node ${per(c.node)}, postgres ${per(c.postgres)}`;
}

/** The figures as a Markdown table, against the targets where there is one (PostgreSQL). */
export function formatTable(r: LedgerBenchResult): string {
  const rows: string[][] = [['engine', 'measure', 'result', 'CPU per event (node / postgres)', 'target', 'met']];
  const cpuCell = (c: CpuSeconds, events: number) => {
    const us = (s: number) => `${((s * 1e6) / events).toFixed(1)} µs`;
    return c.postgres === null ? `${us(c.node)} (in-process)` : `${us(c.node)} / ${us(c.postgres)}`;
  };
  for (const e of r.engines) {
    const pg = e.engine === 'postgres';
    for (const a of e.append) {
      const t = a.mode === 'group' && pg ? `>= ${fmt(TARGETS.batchedAppendPerSecond)}` : '';
      rows.push([
        e.engine,
        `append: ${a.scenario}`,
        `${fmt(a.eventsPerSecond)} events/s`,
        cpuCell(a.cpu, a.events),
        t,
        t ? (a.eventsPerSecond >= TARGETS.batchedAppendPerSecond ? 'yes' : 'no') : '',
      ]);
    }
    const single = e.append.find((a) => a.mode === 'direct' && a.appenders === 1);
    if (single && e.plainInsertMs !== null) {
      const x = single.meanLatencyMs / e.plainInsertMs;
      rows.push([
        e.engine,
        'append: single appender, mean latency vs a plain durable one-row INSERT',
        `${single.meanLatencyMs.toFixed(3)} vs ${e.plainInsertMs.toFixed(3)} ms (${x.toFixed(2)}×)`,
        '',
        `<= ${TARGETS.singleVsInsertMax}×`,
        x <= TARGETS.singleVsInsertMax ? 'yes' : 'no',
      ]);
    }
    rows.push([
      e.engine,
      `seed: bulk appendMany, ${fmt(e.seed.eventsPerCall)} events per call, 2 in flight`,
      `${fmt(e.seed.eventsPerSecond)} events/s`,
      '',
      '',
      '',
    ]);
    for (const b of e.rebuild) {
      const t = pg ? `>= ${fmt(TARGETS.rebuildPerSecond)}${b.events >= 1_000_000 ? `, <= ${TARGETS.rebuild1MSeconds} s` : ''}` : '';
      const met = b.eventsPerSecond >= TARGETS.rebuildPerSecond && (b.events < 1_000_000 || b.seconds <= TARGETS.rebuild1MSeconds);
      rows.push([
        e.engine,
        `rebuild all projections: ${fmt(b.events)} events`,
        `${fmt(b.eventsPerSecond)} events/s (${b.seconds.toFixed(2)} s)`,
        cpuCell(b.cpu, b.events),
        t,
        t ? (met ? 'yes' : 'no') : '',
      ]);
    }
    if (e.linearity !== null) {
      const t = pg ? `<= ${TARGETS.linearityMax}` : '';
      rows.push([
        e.engine,
        `rebuild time per event, ${fmt(e.rebuild.at(-1)!.events)} / ${fmt(e.rebuild[0].events)} events`,
        e.linearity.toFixed(2),
        '',
        t,
        t ? (e.linearity <= TARGETS.linearityMax ? 'yes' : 'no') : '',
      ]);
    }
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  const line = (row: string[]) => `| ${row.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

export function describeMachine(r: LedgerBenchResult): string {
  const m = r.machine;
  return `${r.date}: ${m.nproc} cores (${m.cpu}), ${m.memoryGiB} GiB, Node ${m.node}${m.postgres ? `, ${m.postgres}` : ''}`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const engines: Engine[] = args.includes('--pglite-only') ? ['pglite'] : args.includes('--postgres-only') ? ['postgres'] : ['pglite', 'postgres'];
  const started = Date.now();
  const r = await runLedgerBench({ quick: args.includes('--quick'), engines });
  console.log(`\nLedger benchmark${r.quick ? ' (quick)' : ''}, ${describeMachine(r)}\n`);
  console.log(formatTable(r));
  if (r.loadAtStart > r.machine.nproc * 0.25) {
    console.log(
      `\nnote: load average ${r.loadAtStart.toFixed(2)} when the run started, on ${r.machine.nproc} cores: other work shared the machine, so wall-clock throughput is pessimistic; CPU per event is ours alone.`,
    );
  }
  for (const e of r.engines) {
    console.log(`\n${e.engine}: load average ${e.load.before.toFixed(2)} before, ${e.load.after.toFixed(2)} after`);
    for (const n of e.notes) console.log(`note: ${n}`);
  }
  const missed = r.targets.filter((t) => !t.met);
  console.log(
    missed.length ? `\ntargets missed: ${missed.map((t) => `${t.measure} (${t.value.toFixed(2)}, target ${t.target})`).join('; ')}` : '\nall targets met',
  );
  if (args.includes('--json')) console.log(JSON.stringify(r, null, 2));
  console.log(`\ntotal ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
