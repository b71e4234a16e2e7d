// Runs the event store contract on every engine available: PGlite always, PostgreSQL when
// DATABASE_URL is set, KurrentDB when KURRENTDB_URL is set (skipped visibly otherwise). The
// KurrentDB adapter's logic also runs, without a server, in test/kurrentdb-adapter.test.ts.
import { defineEventStoreContract } from './support/eventstore-contract.ts';
import { testDatabases } from './support/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { createKurrentDbEventStore } from '../src/eventstore/kurrentdb.ts';
import { connectKurrentDb, redactConnectionString } from '../src/eventstore/kurrentdb-client.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';

for (const target of testDatabases()) {
  defineEventStoreContract(target.label, async () => {
    const t = await target.open();
    const store = await createPostgresEventStore(t.db, { schema: t.schema, validate: validateEvent, pollIntervalMs: 200 });
    const sqlFor = {
      update: `UPDATE "${t.schema}".events SET type = 'X'`,
      delete: `DELETE FROM "${t.schema}".events`,
      truncate: `TRUNCATE "${t.schema}".events`,
    };
    return {
      store,
      tamper: async (op) =>
        t.db.query(sqlFor[op]).then(
          () => true,
          () => false,
        ),
      close: async () => {
        await store.close();
        await t.cleanup();
      },
    };
  }).run();
}

const kurrentDbUrl = process.env.KURRENTDB_URL;
if (kurrentDbUrl) {
  // A real server. No `tamper`: KurrentDB lets a user with delete rights delete a stream, so
  // immutability there is a matter of its ACLs (see docs/kurrentdb.md), not of the adapter.
  console.log(`KurrentDB contract: running against ${redactConnectionString(kurrentDbUrl)}`);
  defineEventStoreContract('kurrentdb', async () => {
    const store = createKurrentDbEventStore(connectKurrentDb(kurrentDbUrl), { validate: validateEvent, pollIntervalMs: 200 });
    return { store, close: () => store.close() };
  }).run();
} else {
  console.log(
    'KurrentDB contract: SKIPPED (KURRENTDB_URL is not set; no KurrentDB server on this machine). The adapter ran only against an in-memory client double, in test/kurrentdb-adapter.test.ts.',
  );
}
