// A part of a bench timed in this process: its wall time, the CPU of this process (all its
// threads) and of the local PostgreSQL server, and its peak RSS, printed on one line.
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

/**
 * CPU seconds the local PostgreSQL server has used so far (every process named postgres, plus what
 * the postmaster collected of its exited backends), or null when it is not on this machine.
 */
export function postgresCpuSeconds(): number | null {
  let ticks = 0;
  let found = false;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile: the postmaster's children's figure has it
    }
    if (!stat.includes('(postgres)')) continue;
    found = true;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, and for the postmaster (its parent is not postgres) cutime and cstime.
    ticks += Number(fields[11]) + Number(fields[12]);
    const parent = Number(fields[1]);
    let parentIsPostgres = false;
    try {
      parentIsPostgres = readFileSync(`/proc/${parent}/stat`, 'utf8').includes('(postgres)');
    } catch {
      /* gone */
    }
    if (!parentIsPostgres) ticks += Number(fields[13]) + Number(fields[14]);
  }
  return found ? ticks / 100 : null;
}

export interface PartFigures {
  seconds: number;
  cpuSeconds: number;
  /** Null when PostgreSQL is not on this machine. */
  postgresCpuSeconds: number | null;
  peakRssMiB: number;
}

/** Wall time, CPU of this process (all its threads) and of PostgreSQL, and peak RSS (sampled every 50 ms) of a part. */
export async function measurePart<T>(fn: () => Promise<T>): Promise<{ value: T; figures: PartFigures }> {
  const t = performance.now();
  const cpu = process.cpuUsage();
  const pg0 = postgresCpuSeconds();
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 50);
  try {
    const value = await fn();
    const used = process.cpuUsage(cpu);
    const pg1 = postgresCpuSeconds();
    return {
      value,
      figures: {
        seconds: (performance.now() - t) / 1000,
        cpuSeconds: (used.user + used.system) / 1e6,
        postgresCpuSeconds: pg0 !== null && pg1 !== null ? pg1 - pg0 : null,
        peakRssMiB: peak / 2 ** 20,
      },
    };
  } finally {
    clearInterval(timer);
  }
}

/** The figures of a part on one line. */
export const partLine = (name: string, f: PartFigures) =>
  `${name}: ${f.seconds.toFixed(2)} s, CPU ${f.cpuSeconds.toFixed(1)} s${f.postgresCpuSeconds === null ? '' : `, PostgreSQL CPU ${f.postgresCpuSeconds.toFixed(1)} s`}, peak RSS ${f.peakRssMiB.toFixed(0)} MiB, load ${os.loadavg()[0].toFixed(1)}`;

/** measurePart, printing its line. */
export const timePart = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
  const { value, figures } = await measurePart(fn);
  console.log(partLine(name, figures));
  return value;
};
