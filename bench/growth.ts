// Growth: does a metered call get slower when the ledger is large? Two Tollgate processes run
// side by side against the same mock upstream: one on an empty ledger, one on a ledger seeded
// with N events of charge traffic (1000 accounts' holds and charges, made by the real account
// decider) whose read models were built by a replay. The same sequential client measures both,
// interleaved in blocks, so drift on a shared machine hits them alike.
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { openPostgres } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { replayInto } from '../projections/runner/rebuild.ts';
import { createSeeder } from './ledger.ts';
import { runLoad } from './processes.ts';
import type { SequentialResult, Summary } from './load.ts';
import { openBenchAccount, startMock, startTollgate, tollgateRequest, type Mock, type Tollgate } from './targets.ts';
import { EXPECTED_BILLED } from './gateway.ts';
import { streams } from '../src/ledger/events.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

export interface GrowthResult {
  events: number;
  seedSeconds: number;
  replaySeconds: number;
  empty: Summary;
  full: Summary;
  /** full ÷ empty, at p50 and p99. */
  ratio: { p50: number; p99: number };
  ledgerOk: boolean;
  load: number;
  errors: string[];
}

export async function runGrowthBench(o: { databaseUrl: string; events: number; samples: number; log?: (l: string) => void }): Promise<GrowthResult> {
  const log = o.log ?? ((l: string) => console.log(l));
  const db = openPostgres(o.databaseUrl, 8);
  const schema = `bench_growth_${randomBytes(4).toString('hex')}`;
  const errors: string[] = [];
  let mock: Mock | null = null;
  let empty: Tollgate | null = null;
  let full: Tollgate | null = null;
  try {
    const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
    const seeder = await createSeeder(store);
    let t = performance.now();
    await seeder.growTo(o.events);
    const seedSeconds = (performance.now() - t) / 1000;
    log(`growth: seeded ${seeder.total} events in ${seedSeconds.toFixed(1)} s`);
    t = performance.now();
    await replayInto(db, store, `${schema}_rm`);
    const replaySeconds = (performance.now() - t) / 1000;
    log(`growth: read models built by replay in ${replaySeconds.toFixed(1)} s`);
    await store.close();

    mock = await startMock();
    empty = await startTollgate({ databaseUrl: o.databaseUrl, mock });
    full = await startTollgate({ databaseUrl: o.databaseUrl, mock, schema });
    const accounts = { empty: await openBenchAccount(empty, 'empty'), full: await openBenchAccount(full, 'full') };
    const load = os.loadavg()[0];
    const r = await runLoad<SequentialResult>({
      kind: 'sequential',
      stream: false,
      samples: o.samples,
      warmup: 200,
      block: 100,
      targets: [
        { ...tollgateRequest(empty, accounts.empty, false), name: 'empty' },
        { ...tollgateRequest(full, accounts.full, false), name: 'full' },
      ],
    });
    let ledgerOk = true;
    for (const [name, gw] of [
      ['empty', empty],
      ['full', full],
    ] as const) {
      const rows = await db.query<{ n: number; billed: string }>(
        `SELECT count(*)::int AS n, coalesce(sum((data->>'billed')::bigint), 0)::text AS billed FROM "${gw.schema}".events WHERE stream = $1 AND type = 'ChatCharged'`,
        [streams.account(accounts[name].accountId)],
      );
      const ok = r.perTarget[name].ok;
      const good = rows[0].n === ok && Number(rows[0].billed) === ok * EXPECTED_BILLED && r.perTarget[name].failures === 0;
      if (!good) {
        ledgerOk = false;
        errors.push(`growth ${name}: ${rows[0].n} charges (billed ${rows[0].billed}) for ${ok} successful responses, ${r.perTarget[name].failures} failures`);
      }
    }
    const e = r.perTarget.empty.total;
    const f = r.perTarget.full.total;
    const result = {
      events: seeder.total,
      seedSeconds,
      replaySeconds,
      empty: e,
      full: f,
      ratio: { p50: f.p50 / e.p50, p99: f.p99 / e.p99 },
      ledgerOk,
      load,
      errors,
    };
    log(
      `growth: c=1 latency p50 ${e.p50.toFixed(3)} ms empty, ${f.p50.toFixed(3)} ms with ${seeder.total} events (ratio ${result.ratio.p50.toFixed(3)}); p99 ${e.p99.toFixed(3)} / ${f.p99.toFixed(3)} ms${ledgerOk ? '' : ' — LEDGER CHECK FAILED'}`,
    );
    return result;
  } finally {
    await empty?.stop().catch(() => undefined);
    await full?.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    const drop = [schema, `${schema}_rm`, ...(empty ? [empty.schema, `${empty.schema}_rm`] : [])];
    await db.exec(drop.map((s) => `DROP SCHEMA IF EXISTS "${s}" CASCADE`).join('; ')).catch(() => undefined);
    await db.close();
  }
}
