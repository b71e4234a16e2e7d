// Verify in time proportional to what is new (issue 42, item 4): on a seeded log kept between
// runs (the corrections seeding: a hold and a charge per charge, from the real account decider),
// a full verification records its checkpoint; then a day of new events is appended through the
// event store (new accounts' setup, holds and charges: the real decider again) and projected
// live; then the verification from the checkpoint is timed. Every verification here runs as the
// admin API runs it (verifyLedger), in this process, against PostgreSQL.
// Run: node --import tsx bench/verify-since.ts [--events 1000000] [--new 100000] [--full] [--rounds 2] [--drop-store] [--json]
//   --events N   the size of the seeded log (kept as schema vfs_<N>; seeding 10M takes ~7 min here)
//   --full       time a full verification too (otherwise only when there is no checkpoint yet)
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { openLedger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import { verifyLedger } from '../src/audit/verification.ts';
import { Timings } from '../src/audit/verify-since.ts';
import { SimAccount } from './ledger-traffic.ts';
import { keptSeededStore } from './corrections-seed.ts';
import { mustAppendMany } from './ledger.ts';
import { measurePart, partLine, timePart, type PartFigures } from './part-timer.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const { values } = parseArgs({
  options: {
    events: { type: 'string' },
    new: { type: 'string' },
    full: { type: 'boolean' },
    rounds: { type: 'string' },
    'drop-store': { type: 'boolean' },
    json: { type: 'boolean' },
  },
});
const size = Number(values.events ?? 1_000_000);
const fresh = Number(values.new ?? 100_000);
const rounds = Number(values.rounds ?? 2);
const schema = `vfs_${size}`;
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const db = openPostgres(url, 8, { ...DEFAULT_PG_TIMEOUTS, statementMs: 600_000 });

await keptSeededStore(db, schema, Math.round(size / 2), timePart);
const ledger = await openLedger({ db, schema, readSide: readSide({ db, eventSchema: schema, projectHere: true }) });
const appender = await createPostgresEventStore(db, { schema, validate: validateEvent });
const total = async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`))[0].n);

type Verification = Awaited<ReturnType<typeof verifyLedger>>;
const verifyTimed = async (name: string, full: boolean): Promise<{ v: Verification; figures: PartFigures; parts: Record<string, number> }> => {
  const timings = new Timings();
  const { value: v, figures } = await measurePart(() => verifyLedger(ledger, { full, timings }));
  console.log(partLine(name, figures));
  const parts = Object.fromEntries(Object.entries(timings.ms).map(([k, ms]) => [k, Math.round(ms)]));
  console.log(`  ok ${v.ok}, mode ${v.mode}, ${v.checkedEvents} events read of ${v.events}; ms: ${JSON.stringify(parts)}`);
  if (!v.ok) throw new Error(`verification failed: ${JSON.stringify(v).slice(0, 2000)}`);
  return { v, figures, parts };
};

/** A day of new events: new accounts opened, then holds and charges from the real decider. */
async function appendDay(events: number): Promise<void> {
  const tag = randomBytes(3).toString('hex');
  const accounts = Array.from({ length: 100 }, (_, i) => new SimAccount(tag, i, 'cx/gen-6-astra'));
  for (const a of accounts) a.requestsPerMinute = 1_000_000;
  await mustAppendMany(
    appender,
    accounts.flatMap((a) => a.setup(new Date())),
  );
  let left = events - accounts.length * 3;
  while (left > 0) {
    // 100 appends of up to 10 pairs each per round: one per account, so expected revisions never race.
    const requests = accounts.map((a) => a.nextBulk(Math.max(1, Math.min(10, Math.floor(left / 2 / accounts.length)))));
    await mustAppendMany(appender, requests);
    left -= requests.reduce((k, r) => k + r.events.length, 0);
  }
  await ledger.caughtUp(600_000);
}

console.log(
  `load ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}; ${await total()} events in ${schema}`,
);
const results: Record<string, unknown> = { events: await total() };
let fullRun: { v: Verification; figures: PartFigures } | null = null;
if (values.full) fullRun = await verifyTimed('full verification', true);
const first = await verifyTimed('verification (full unless a checkpoint is there)', false);
if (first.v.mode === 'full') fullRun ??= first;
if (fullRun) results.full = { events: fullRun.v.events, ...fullRun.figures };
const since: Array<{ events: number; read: number; parts: Record<string, number> } & PartFigures> = [];
for (let r = 0; r < rounds; r++) {
  await timePart(`append ${fresh} new events and project them`, () => appendDay(fresh));
  const { v, figures, parts } = await verifyTimed(`verification from the checkpoint, round ${r + 1}`, false);
  if (v.mode !== 'since_checkpoint') throw new Error('expected a verification from the checkpoint');
  since.push({ events: v.events, read: v.checkedEvents, parts, ...figures });
}
results.since = since;
if (values.json) console.log(JSON.stringify(results, null, 2));
await appender.close();
await ledger.close();
if (values['drop-store']) {
  const family = await db.query<{ name: string }>(`SELECT nspname AS name FROM pg_namespace WHERE nspname = $1 OR starts_with(nspname, $2)`, [
    schema,
    `${schema}_rm`,
  ]);
  for (const { name } of family) await db.exec(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
}
await db.close();
