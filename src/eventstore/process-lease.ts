// Every gateway process holds a lease while it runs: a row it renews, with an expiry on the
// database's clock (so gateways' clocks may differ). Its holds name it; once its lease lapses (the
// process died, or hangs past the lease), any process releases them (src/calls/sweeper.ts).
// Not part of the ledger: rows are written in place, and the ones long lapsed are deleted.
import type { Database, Queryable } from './db.ts';
import { outageReporter, type OutageLog } from './outage.ts';

export interface ProcessLease {
  readonly processId: string;
  /** Stops renewing and deletes the row: after a clean shutdown (its holds settled or released). */
  end(): Promise<void>;
}

export const leaseTable = (schema: string) => `"${schema}".process_leases`;

export async function ensureLeaseTable(db: Database, schema: string): Promise<void> {
  // The schema exists already when the events live in it; with KurrentDB it may not.
  await db.exec(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  await db.exec(`CREATE TABLE IF NOT EXISTS ${leaseTable(schema)} (
    process_id text PRIMARY KEY, started_at timestamptz NOT NULL, expires_at timestamptz NOT NULL)`);
}

/**
 * Takes the lease for `processId` and renews it every third of `ttlMs`. A renewal that fails is
 * retried at the next tick (`onError` is told); if the process cannot renew for `ttlMs`, its holds
 * are released by others, and its own later charges of them are refused by the account decider.
 */
export async function startProcessLease(db: Database, schema: string, processId: string, opts: { ttlMs: number; log: OutageLog }): Promise<ProcessLease> {
  const outage = outageReporter(opts.log, 'process lease renewal');
  await ensureLeaseTable(db, schema);
  const renew = () =>
    db.query(
      `INSERT INTO ${leaseTable(schema)} (process_id, started_at, expires_at) VALUES ($1, now(), now() + $2::int * interval '1 millisecond')
       ON CONFLICT (process_id) DO UPDATE SET expires_at = excluded.expires_at`,
      [processId, opts.ttlMs],
    );
  await renew();
  let renewing: Promise<unknown> = Promise.resolve();
  const timer = setInterval(
    () => {
      renewing = renew().then(
        () => outage.ok(),
        (err: Error) => outage.failed(err),
      );
    },
    Math.max(50, Math.floor(opts.ttlMs / 3)),
  );
  timer.unref();
  return {
    processId,
    async end() {
      clearInterval(timer);
      await renewing;
      await db.query(`DELETE FROM ${leaseTable(schema)} WHERE process_id = $1`, [processId]);
    },
  };
}

/** Deletes the rows of leases lapsed more than a day ago (their holds were released long since). */
export async function forgetOldLeases(db: Queryable, schema: string): Promise<void> {
  await db.query(`DELETE FROM ${leaseTable(schema)} WHERE expires_at < now() - interval '1 day'`);
}
