// The finance reports on a large ledger (issue #26): a log of N events (50 accounts, each with a
// plan, then reserve/charge pairs, seeded straight into PostgreSQL with events from the real
// account decider, read models built by a replay), then the compiled gateway on that schema, and
// for each report its time and the gateway's peak resident memory: the finance report (JSON and
// CSV), the money reconciliation and the lots, over the day that holds every event (so each reads
// and folds the whole log). The lots are the accounts' plans (free: their use is promotional), and
// the calls have no channel rate (unpriced): the fold does the same work per charge either way.
//
// node --import tsx bench/finance.ts [--sizes 100000,1000000]   (or npm run bench -- --only finance)
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { openPostgres } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/catalogue.ts';
import type { AppendRequest } from '../src/eventstore/port.ts';
import { replayInto } from '../projections/rebuild.ts';
import { catalogueSetup, SimAccount } from './ledger-traffic.ts';
import { mustAppendMany } from './ledger.ts';
import { startMock, startTollgate, type Mock, type Tollgate } from './targets.ts';
import { writeMarkedBlock } from './report.ts';

const ACCOUNTS = 50;

export interface FinancePhase {
  seconds: number;
  peakRssMiB: number;
  bytes: number;
}

export interface FinanceSizeResult {
  events: number;
  seedSeconds: number;
  replaySeconds: number;
  idleRssMiB: number;
  loadAverage: number;
  report: FinancePhase;
  reportCsv: FinancePhase;
  reconciliation: FinancePhase;
  lots: FinancePhase;
  errors: string[];
}

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Seeds about `events` events: the catalogue, the accounts with their plans, then charges (how many: `calls`). */
async function seed(url: string, schema: string, events: number): Promise<{ events: number; calls: number }> {
  const db = openPostgres(url, 4);
  const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
  try {
    const tag = randomBytes(3).toString('hex');
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => new SimAccount(tag, i));
    for (const a of accounts) a.spacingMs = 101; // within the seed plan's 600 calls a minute
    await mustAppendMany(store, [...catalogueSetup(), ...accounts.flatMap((a) => a.setup(new Date()))]);
    const pairs = Math.max(0, Math.floor((events - 13 - ACCOUNTS * 3) / 2));
    // 1,000 pairs per append request, spread over the accounts.
    for (let done = 0, i = 0; done < pairs; i++) {
      const batch: AppendRequest[] = [];
      for (let k = 0; k < 50 && done < pairs; k++, done += Math.min(20, pairs - done))
        batch.push(accounts[(i * 50 + k) % ACCOUNTS].nextBulk(Math.min(20, pairs - done)));
      await mustAppendMany(store, batch);
    }
    await replayInto(db, store, `${schema}_rm`);
    return { events: Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`))[0].n), calls: pairs };
  } finally {
    await store.close();
    await db.close();
  }
}

async function oneSize(url: string, events: number, log: (l: string) => void): Promise<FinanceSizeResult> {
  const schema = `bench_fin_${randomBytes(4).toString('hex')}`;
  const errors: string[] = [];
  let mock: Mock | null = null;
  let gw: Tollgate | null = null;
  try {
    let t = performance.now();
    const { events: seeded, calls } = await seed(url, schema, events);
    const seedSeconds = (performance.now() - t) / 1000;
    log(`finance ${events}: seeded ${seeded} events and replayed the read models in ${seedSeconds.toFixed(1)} s`);
    t = performance.now();
    mock = await startMock();
    gw = await startTollgate({ databaseUrl: url, mock, schema });
    const g = gw;
    await new Promise((r) => setTimeout(r, 2000));
    const idleRssMiB = rssKb(g.proc.pid) / 1024;
    const day = new Date().toISOString().slice(0, 10);
    const phase = async (name: string, path: string, check: (text: string) => string | null): Promise<FinancePhase> => {
      let peak = rssKb(g.proc.pid);
      const timer = setInterval(() => (peak = Math.max(peak, rssKb(g.proc.pid))), 50);
      const start = performance.now();
      try {
        const res = await fetch(`${g.url}/admin/v1/finance/${path}${path.includes('?') ? '&' : '?'}from=${day}&to=${day}`, {
          headers: { authorization: `Bearer ${g.adminToken}` },
        });
        const text = await res.text();
        const seconds = (performance.now() - start) / 1000;
        const problem = res.status === 200 ? check(text) : `${res.status} ${text.slice(0, 200)}`;
        if (problem) errors.push(`${name}: ${problem}`);
        const figure = { seconds, peakRssMiB: peak / 1024, bytes: text.length };
        log(`finance ${events}: ${name} ${seconds.toFixed(2)} s, peak RSS ${figure.peakRssMiB.toFixed(0)} MiB, ${text.length} bytes`);
        return figure;
      } finally {
        clearInterval(timer);
      }
    };
    const report = await phase('report (JSON)', 'report', (text) => {
      const totals = (JSON.parse(text) as { totals: { unpriced_calls: number; promotional_tokens: number } }).totals;
      return totals.unpriced_calls === calls && totals.promotional_tokens > 0 ? null : `unpriced calls ${totals.unpriced_calls}, expected ${calls}`;
    });
    const reportCsv = await phase('report (CSV)', 'report?format=csv', (text) => (text.startsWith('day,account_id') ? null : 'not the CSV'));
    const reconciliation = await phase('reconciliation', 'reconciliation', (text) => {
      const total = (JSON.parse(text) as { total: { difference: number } }).total;
      return total.difference === 0 ? null : `difference ${total.difference}`;
    });
    const lots = await phase('lots', 'lots', (text) => ((JSON.parse(text) as { data: unknown[] }).data.length === ACCOUNTS ? null : 'not one lot per account'));
    return { events: seeded, seedSeconds, replaySeconds: 0, idleRssMiB, loadAverage: os.loadavg()[0], report, reportCsv, reconciliation, lots, errors };
  } finally {
    await gw?.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    const db = openPostgres(url, 1);
    await db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm" CASCADE`).catch(() => undefined);
    await db.close();
  }
}

export async function runFinanceBench(o: { databaseUrl: string; sizes: number[]; log?: (l: string) => void }): Promise<FinanceSizeResult[]> {
  const out: FinanceSizeResult[] = [];
  for (const n of o.sizes) out.push(await oneSize(o.databaseUrl, n, o.log ?? console.log));
  return out;
}

const figure = (p: FinancePhase) => `${p.seconds.toFixed(1)} s, ${p.peakRssMiB.toFixed(0)} MiB`;

/** One column per size: each report's time and the gateway's peak resident memory while it ran. */
export function financeTable(rs: FinanceSizeResult[]): string {
  const row = (name: string, cell: (r: FinanceSizeResult) => string) => `| ${name} | ${rs.map(cell).join(' | ')} |`;
  return [
    `| events in the log | ${rs.map((r) => r.events.toLocaleString('en-US')).join(' | ')} |`,
    `|---|${rs.map(() => '---').join('|')}|`,
    row('seed + replay of the read models', (r) => `${r.seedSeconds.toFixed(0)} s`),
    row('gateway RSS, idle', (r) => `${r.idleRssMiB.toFixed(0)} MiB`),
    row('finance report (JSON): time, peak RSS', (r) => figure(r.report)),
    row('finance report (CSV): time, peak RSS', (r) => figure(r.reportCsv)),
    row('money reconciliation: time, peak RSS', (r) => figure(r.reconciliation)),
    row('lots: time, peak RSS', (r) => figure(r.lots)),
    row('load average (1 min) after the run', (r) => r.loadAverage.toFixed(2)),
  ].join('\n');
}

/** The table in its own marked block of BENCHMARKS.md (added at the end the first time). */
export function writeFinanceBlock(path: string, rs: FinanceSizeResult[], when: string): void {
  writeMarkedBlock(path, 'finance', [`Last run: ${when}.`, '', financeTable(rs)].join('\n'));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({ options: { sizes: { type: 'string' }, write: { type: 'boolean' } } });
  const rs = await runFinanceBench({
    databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    sizes: (values.sizes ?? '100000,1000000').split(',').map(Number),
  });
  console.log(`\n${financeTable(rs)}`);
  for (const e of rs.flatMap((r) => r.errors)) console.log(`ERROR: ${e}`);
  if (values.write) writeFinanceBlock(new URL('../BENCHMARKS.md', import.meta.url).pathname, rs, `${new Date().toISOString()}, ${os.cpus().length} cores`);
}
