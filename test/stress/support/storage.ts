// The ledger's storage opened directly, once no gateway runs on it: to let time pass for the
// sweeper (hold lifetimes are 5-15 minutes and not configurable), verify, and read everything.
import { join } from 'node:path';
import { openPglite, openPostgres, type Database } from '../../../src/eventstore/db.ts';
import { openLedger } from '../../../src/ledger/ledger.ts';
import { readSide } from '../../../projections/runner/read-side.ts';
import { sweepExpiredHolds } from '../../../src/calls/sweeper.ts';
import { verifyLedger } from '../../../src/audit/verification.ts';
import type { StoredEvent } from '../../../src/eventstore/port.ts';
import type { AccountRow, Verification } from './admin.ts';
import '../../../projections/read-models.ts'; // every read model, as the wiring registers them

export interface Storage {
  schema: string;
  databaseUrl?: string;
  dataDir: string;
}

export interface FinalState {
  /** Holds released by the sweeper run with a clock past every hold's expiry. */
  swept: number;
  verification: Verification;
  events: StoredEvent[];
  accounts: AccountRow[];
}

/**
 * Opens the ledger (projections in this process), runs the real sweeper as if `aheadMs` had
 * passed, waits for the read models, verifies (chains + rebuild) and reads every event.
 */
export async function finalState(storage: Storage, aheadMs: number): Promise<FinalState> {
  const db: Database = storage.databaseUrl ? openPostgres(storage.databaseUrl, 4) : await openPglite(join(storage.dataDir, 'pglite'));
  try {
    const ledger = await openLedger({ db, schema: storage.schema, readSide: readSide({ db, eventSchema: storage.schema, projectHere: true }) });
    try {
      await ledger.caughtUp();
      const swept = await sweepExpiredHolds(ledger, new Date(Date.now() + aheadMs));
      await ledger.drain();
      const head = await ledger.events.headPosition();
      if (!(await ledger.waitForPosition(head, 60_000))) throw new Error(`read models did not reach ${head}`);
      const verification = (await verifyLedger(ledger)) as Verification;
      const events: StoredEvent[] = [];
      for (let after = 0; ;) {
        const page = await ledger.events.readAll(after, 10_000);
        if (page.length === 0) break;
        events.push(...page);
        after = page[page.length - 1].position;
      }
      const accounts = await db.query<AccountRow>(
        `SELECT account_id, quota_total, quota_used, reserved, open_holds, extra_granted, extra_used FROM "${ledger.rmSchema}".accounts`,
      );
      return { swept, verification, events, accounts };
    } finally {
      await ledger.close();
    }
  } finally {
    await db.close();
  }
}

export async function dropSchemas(url: string, schema: string): Promise<void> {
  const db = openPostgres(url, 1);
  try {
    await db.exec(
      `DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm_next" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm_verify" CASCADE`,
    );
    // Each verify loads into a scratch schema of its own (`<rm>_verify_<random>`, or `<rm>_verified_<random>`
    // when kept for the next one, beside its checkpoint's `<rm>_verified`): a crash in one leaves it behind.
    const scratch = await db.query<{ name: string }>(`SELECT nspname AS name FROM pg_namespace WHERE starts_with(nspname, $1)`, [`${schema}_rm_verif`]);
    for (const { name } of scratch) await db.exec(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
  } finally {
    await db.close();
  }
}
