// Live calls beside continuous finance reads, per kind of read (issue 41's live target, sampled
// for a p99 of its own): the finance bench (bench/finance.ts) times 20 reads of each kind, about a
// second, so its "during" p99 is the 4th-slowest of some 340 calls. Here each kind of read runs
// back to back for SPAN_MS, after SPAN_MS of the live calls alone, so both p99s stand on about a
// thousand calls each. On a schema seeded and replayed by the finance bench (BENCH_KEEP=1) or by
// `--seed N` here (bench/finance-seed.ts, then every read model replayed; kept for another run).
//
// node --import tsx bench/finance-live.ts --schema bench_fin_xxx [--seed 1000000] [--write]
import http from 'node:http';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { openPostgres } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { ensureTables as ensureWebhookTables } from '../src/webhooks/storage.ts';
import { seedFinanceYear } from './finance-seed.ts';
import { openBenchAccount, startMock, startTollgate, tollgateRequest } from './targets.ts';
import { startLoad } from './processes.ts';
import type { ClosedLoopResult } from './load.ts';
import { writeMarkedBlock } from './report.ts';
import { quiesce } from './quiesce.ts';
import { staleDays } from '../projections/books/book-renders.ts';
import '../projections/read-models.ts';

const SPAN_MS = 15_000;
const KINDS = [
  { name: 'report (JSON), 31 days', path: 'report', days: 31 },
  { name: 'journal (hledger), 31 days', path: 'journal', days: 31 },
  { name: 'lots, 31 days', path: 'lots', days: 31 },
  { name: 'report (JSON), 366 days', path: 'report', days: 366 },
];

const { values } = parseArgs({ options: { schema: { type: 'string' }, seed: { type: 'string' }, write: { type: 'boolean' } } });
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const schema = values.schema ?? `bench_fin_live_${Date.now().toString(36)}`;
const db = openPostgres(url, 4);
if (values.seed) {
  const seeded = await seedFinanceYear(db, url, schema, { events: Number(values.seed), days: 400, accounts: 50, log: console.log });
  await replayInto(db, await createPostgresEventStore(db, { schema, validate: validateEvent }), `${schema}_rm`);
  console.log(`seeded and replayed ${seeded.events} events into ${schema}`);
}
// As the finance bench: the webhook dispatcher has kept up with the log in a gateway of this size.
await ensureWebhookTables(db, schema);
await db.query(`UPDATE "${schema}".webhook_checkpoint SET position = (SELECT max(position) FROM "${schema}".events) WHERE name = 'dispatcher'`);
const [{ events }] = await db.query<{ events: number }>(`SELECT count(*)::int AS events FROM "${schema}".events`);
const [{ last }] = await db.query<{ last: string }>(`SELECT max(key) AS last FROM "${schema}_rm".book_day_changes WHERE key < $1`, [
  new Date().toISOString().slice(0, 10),
]);

await quiesce(db);

const mock = await startMock();
const gw = await startTollgate({ databaseUrl: url, mock, schema });
const headers = { authorization: `Bearer ${gw.adminToken}` };
const dayPlus = (day: string, n: number) => new Date(Date.parse(`${day}T00:00:00.000Z`) + n * 86_400_000).toISOString().slice(0, 10);
const read = (path: string, from: string, to: string) =>
  new Promise<number>((resolve, reject) => {
    http
      .get(`${gw.url}/admin/v1/finance/${path}?from=${from}&to=${to}`, { headers }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`${path}: ${res.statusCode}`));
        res.resume();
        res.on('end', () => resolve(0));
      })
      .on('error', reject);
  });
// The renderer keeps every closed day first, as in the finance bench.
const today = new Date().toISOString().slice(0, 10);
for (const until = Date.now() + 15 * 60_000; ; await new Promise((r) => setTimeout(r, 250))) {
  // Before the renderer's first pass its table is not there yet.
  const stale = await staleDays(db, `${schema}_rm`, today, 1).catch(() => null);
  if (stale?.length === 0) break;
  if (Date.now() > until) throw new Error('the day renderer did not keep every closed day within 15 minutes');
}
const account = await openBenchAccount(gw, 'live');
const live = await startLoad<ClosedLoopResult>({ kind: 'closed-loop', target: tollgateRequest(gw, account, false), connections: 2, pauseMs: 20 });
await new Promise((r) => setTimeout(r, 3000));
const epoch = () => performance.timeOrigin + performance.now();
const spans: Array<{ kind: string; idle: boolean; from: number; to: number; reads: number }> = [];
let seed = 1;
const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
for (const k of KINDS) {
  let from = epoch();
  await new Promise((r) => setTimeout(r, SPAN_MS));
  spans.push({ kind: k.name, idle: true, from, to: epoch(), reads: 0 });
  from = epoch();
  let reads = 0;
  for (const until = performance.now() + SPAN_MS; performance.now() < until; reads++) {
    const end = dayPlus(last, -Math.floor(random() * (366 - k.days)));
    await read(k.path, dayPlus(end, 1 - k.days), end);
  }
  spans.push({ kind: k.name, idle: false, from, to: epoch(), reads });
}
const result = await live.stop();
await gw.stop();
await mock.proc.stop();
await db.close();

const quantiles = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] };
};
const within = (s: (typeof spans)[number]) => result.calls.filter(([at, ms]) => at >= s.from && at + ms <= s.to).map(([, ms]) => ms);
const f = (v: number) => v.toFixed(1);
const rows = KINDS.map((k) => {
  const idle = quantiles(within(spans.find((s) => s.kind === k.name && s.idle)!));
  const busy = spans.find((s) => s.kind === k.name && !s.idle)!;
  const during = quantiles(within(busy));
  return `| ${k.name} | ${busy.reads} | ${idle.n}: ${f(idle.p50)} / ${f(idle.p99)} / ${f(idle.max)} ms | ${during.n}: ${f(during.p50)} / ${f(during.p99)} / ${f(during.max)} ms | ${(during.p99 / idle.p99).toFixed(2)}× | +${f(during.max - idle.p99)} ms |`;
});
const block = [
  '### Live calls beside continuous finance reads (issue 41)',
  '',
  `\`node --import tsx bench/finance-live.ts ${process.argv.slice(2).join(' ')}\` (bench/finance-live.ts): the compiled gateway on a finance bench`,
  `log of ${events.toLocaleString('en-US')} events (seeded by bench/finance-seed.ts; a kept log also holds the live calls of its earlier runs),`,
  "every closed day's parts kept by its day renderer, 2 live callers (20 ms pause,",
  `a process of their own). For each kind: ${SPAN_MS / 1000} s of the live calls alone, then ${SPAN_MS / 1000} s of that read back to back`,
  '(random windows ending in the last year), the live calls counted that start and end within each span.',
  `Last run: ${new Date().toISOString()}, ${os.cpus().length} cores.`,
  '',
  '| read, back to back | reads | live alone: calls: p50 / p99 / max | live beside the reads | p99 ratio | longest − idle p99 |',
  '|---|---|---|---|---|---|',
  ...rows,
].join('\n');
console.log(block);
if (values.write) writeMarkedBlock(new URL('../BENCHMARKS.md', import.meta.url).pathname, 'finance-live', block);
process.exit(0);
