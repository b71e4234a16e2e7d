// Rebuild-only measurement: seeds a charge store once (the bench/ledger.ts seeder; the store is
// kept in schema --store, default rbstore_<events>, for the next run unless --drop-store) and
// times replayInto with the CPU of node and of the PostgreSQL backends, pages vs finish.
// Run: node --import tsx bench/rebuild-only.ts --events 1000000 [--batch 25000] [--threads N] [--keep] [--drop-store] [--pglite]
// Parallel index-build workers are not counted in the backends' CPU: to count everything, run
// with PGOPTIONS='-c max_parallel_maintenance_workers=0'.
import os from 'node:os';
import { openPostgres, openPglite, type Database } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { createSeeder } from './ledger.ts';
import { cpuMeter, machineBusy, withApplicationName } from './machine.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const args = process.argv.slice(2);
const arg = (n: string, d: string) => {
  const i = args.indexOf(n);
  return i >= 0 ? args[i + 1] : d;
};
const size = Number(arg('--events', '100000'));
const storeSchema = arg('--store', `rbstore_${size}`);
const pglite = args.includes('--pglite');
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const appName = `tollgate_rb_${process.pid}`;
const db: Database = pglite ? await openPglite() : openPostgres(withApplicationName(url, appName), 10);
const cpu = cpuMeter(pglite ? null : db, appName);
const store = await createPostgresEventStore(db, { schema: storeSchema, validate: validateEvent });
let head = await store.headPosition();
if (head < size) {
  const seeder = await createSeeder(store);
  const t0 = performance.now();
  await seeder.growTo(size);
  head = await store.headPosition();
  console.log(`seeded to ${head} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
const count = Number((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${storeSchema}".events`))[0].n);
const load = os.loadavg()[0];
const usage = await cpu.start();
const machine = machineBusy();
const t0 = performance.now();
const target = `${storeSchema}_rm`;
let loopMs = 0;
await replayInto(db, store, target, {
  ...(args.includes('--batch') ? { batchSize: Number(arg('--batch', '25000')) } : {}),
  ...(args.includes('--threads') ? { threads: Number(arg('--threads', '1')) } : {}),
  onProgress: (p) => {
    loopMs = p.elapsedMs;
  },
});
const s = (performance.now() - t0) / 1000;
const used = await usage.stop();
const busy = machine.stop();
const per = (x: number | null) => (x === null ? 'n/a' : ((x * 1e6) / count).toFixed(1));
console.log(
  `rebuild ${count} events: ${s.toFixed(2)} s, ${Math.round(count / s)} events/s, node ${per(used.node)} µs/event, pg ${per(used.postgres)} µs/event, load ${load.toFixed(2)}, pages ${(loopMs / 1000).toFixed(2)} s + finish ${(s - loopMs / 1000).toFixed(2)} s; machine busy ${busy.busySeconds.toFixed(1)} of ${(busy.wallSeconds * busy.cores).toFixed(1)} core-seconds`,
);
if (!args.includes('--keep')) await db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
if (args.includes('--drop-store')) await db.exec(`DROP SCHEMA IF EXISTS "${storeSchema}" CASCADE`);
await store.close();
await db.close();
