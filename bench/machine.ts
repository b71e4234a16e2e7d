// What the benchmarks ran on, and how much CPU they used: this process (process.cpuUsage) and,
// when the PostgreSQL server runs on this machine, its backends serving our connections (found by
// application_name, read from /proc). On a shared machine CPU per event stays meaningful when
// wall-clock throughput does not.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { openPostgres, type Database } from '../src/eventstore/db.ts';
import { summarize, type Summary } from './load.ts';

export interface MachineInfo {
  nproc: number;
  memoryGiB: number;
  cpu: string;
  node: string;
  postgres: string | null;
}
export interface CpuSeconds {
  node: number;
  postgres: number | null;
}

export async function machineInfo(url: string | null): Promise<MachineInfo> {
  let cpu = os.cpus()[0]?.model ?? 'unknown';
  try {
    cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpu;
  } catch {
    /* not Linux */
  }
  let postgres: string | null = null;
  if (url) {
    const db = openPostgres(url, 1);
    try {
      const [v] = await db.query<Record<string, string>>(
        `SELECT version() AS v, current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sc,
                current_setting('shared_buffers') AS sb, current_setting('max_wal_size') AS wal`,
      );
      postgres = `${v.v.split(' on ')[0]} (fsync=${v.fsync}, synchronous_commit=${v.sc}, shared_buffers=${v.sb}, max_wal_size=${v.wal})`;
    } finally {
      await db.close();
    }
  }
  return { nproc: os.availableParallelism(), memoryGiB: Math.round(os.totalmem() / 2 ** 30), cpu, node: process.version, postgres };
}

/** The URL with application_name set, so the server's backends for this pool can be found. */
export function withApplicationName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', name);
  return u.toString();
}

let clockTicks: number | null = null;
function ticksPerSecond(): number {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds of each backend serving `appName`, or null if they are not local processes. */
async function backendCpu(db: Database, appName: string): Promise<Map<number, number> | null> {
  const rows = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [appName]);
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) return null;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(fields[11]) + Number(fields[12])) / ticksPerSecond());
    } catch {
      return null;
    }
  }
  return out;
}

export function cpuMeter(db: Database | null, appName: string) {
  return {
    async start() {
      const pg0 = db ? await backendCpu(db, appName) : null;
      const node0 = process.cpuUsage();
      // Backends that close before stop() (a replay's worker threads have connections of their
      // own) are counted as of their last sample: at most a quarter second of each is missed.
      const latest = new Map(pg0 ?? []);
      let sampling = Promise.resolve();
      const sample = (server: Database) => {
        sampling = sampling.then(async () => {
          const now = await backendCpu(server, appName).catch(() => null);
          for (const [pid, s] of now ?? []) latest.set(pid, s);
        });
      };
      const timer = pg0 && db ? setInterval(() => sample(db), 250) : null;
      return {
        async stop(): Promise<CpuSeconds> {
          const node = process.cpuUsage(node0);
          if (timer) clearInterval(timer);
          let postgres: number | null = null;
          const pg1 = pg0 && db ? await backendCpu(db, appName) : null;
          await sampling;
          if (pg0 && pg1) {
            for (const [pid, s] of pg1) latest.set(pid, s);
            postgres = 0;
            // A backend that started meanwhile started from nothing.
            for (const [pid, s] of latest) postgres += s - (pg0.get(pid) ?? 0);
          }
          return { node: (node.user + node.system) / 1e6, postgres };
        },
      };
    },
  };
}

/**
 * CPU seconds the whole machine spent busy (every process, every core) between start() and
 * stop(), beside the wall time: how close a run came to using every core.
 */
export function machineBusy() {
  const busy = () => os.cpus().reduce((sum, c) => sum + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0) / 1000;
  const b0 = busy();
  const t0 = performance.now();
  return {
    stop: () => ({ busySeconds: busy() - b0, wallSeconds: (performance.now() - t0) / 1000, cores: os.cpus().length }),
  };
}

/** Latency of a lone one-row INSERT and commit (synchronous commit: it waits for the WAL flush). */
export async function commitLatency(db: Database, n: number): Promise<Summary> {
  const table = `bench_commit_${process.pid}`;
  await db.exec(`CREATE TABLE IF NOT EXISTS public.${table} (id bigserial PRIMARY KEY, v text)`);
  const times: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await db.query(`INSERT INTO public.${table} (v) VALUES ($1)`, ['x']);
      times.push(performance.now() - t);
    }
  } finally {
    await db.exec(`DROP TABLE IF EXISTS public.${table}`);
  }
  return summarize(times);
}
