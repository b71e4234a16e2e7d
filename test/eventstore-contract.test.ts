// Runs the event store contract on every engine available: PGlite always, PostgreSQL when
// DATABASE_URL is set, KurrentDB when KURRENTDB_URL is set (skipped visibly otherwise).
import { defineEventStoreContract } from './support/eventstore-contract.ts';
import { testDatabases } from './support/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { validateEvent } from '../src/ledger/catalogue.ts';

for (const target of testDatabases()) {
  defineEventStoreContract(target.label, async () => {
    const t = await target.open();
    const store = await createPostgresEventStore(t.db, { schema: t.schema, validate: validateEvent, pollIntervalMs: 200 });
    const sqlFor = { update: `UPDATE "${t.schema}".events SET type = 'X'`, delete: `DELETE FROM "${t.schema}".events`, truncate: `TRUNCATE "${t.schema}".events` };
    return {
      store,
      tamper: async (op) => t.db.query(sqlFor[op]).then(() => true, () => false),
      close: async () => { await store.close(); await t.cleanup(); },
    };
  }).run();
}

if (!process.env.KURRENTDB_URL) console.log('KurrentDB contract: skipped (KURRENTDB_URL is not set; no KurrentDB server on this machine)');
