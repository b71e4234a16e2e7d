// The count behind the invalid-request limit (src/http/invalid-requests.ts), shared by every
// gateway on the database: one row per API key holding the times of its refusals in the last
// minute. Only a refused request writes here (one upsert); valid calls never read it. Not part of
// the ledger: an attacker's refusals are not business facts, and the row is rewritten in place.
import type { Database, Queryable } from './db.ts';

export const INVALID_WINDOW_MS = 60_000;

export async function ensureInvalidRequestTable(db: Database, schema: string): Promise<void> {
  await db.exec(`CREATE TABLE IF NOT EXISTS "${schema}".invalid_requests (key_id text PRIMARY KEY, failures double precision[] NOT NULL)`);
}

export function invalidRequestStore(db: Queryable, schema: string) {
  const table = `"${schema}".invalid_requests`;
  return {
    /**
     * Records one refusal at `nowMs` and returns the key's refusals of the last minute, oldest
     * first, this one included, at most `limit + 1` (the row's row lock orders concurrent gateways).
     * More than `limit` of them: this refusal was one too many.
     */
    async record(keyId: string, nowMs: number, limit: number): Promise<number[]> {
      const rows = await db.query<{ failures: number[] }>(
        `INSERT INTO ${table} AS r (key_id, failures) VALUES ($1, ARRAY[$2::float8])
         ON CONFLICT (key_id) DO UPDATE SET failures = (
           SELECT coalesce(array_agg(f ORDER BY f), '{}') FROM (
             SELECT f FROM unnest(r.failures || $2::float8) AS f WHERE f > $3::float8 ORDER BY f DESC LIMIT $4::int) recent)
         RETURNING failures`,
        [keyId, nowMs, nowMs - INVALID_WINDOW_MS, limit + 1],
      );
      return rows[0].failures.map(Number);
    },
  };
}

export type InvalidRequestStore = ReturnType<typeof invalidRequestStore>;

/** Deletes the rows whose newest refusal is over a minute old (the sweeper); how many went. */
export async function purgeOldInvalidRequests(db: Queryable, schema: string, nowMs = Date.now()): Promise<number> {
  const gone = await db.query(`DELETE FROM "${schema}".invalid_requests WHERE coalesce(failures[array_length(failures, 1)], 0) <= $1::float8 RETURNING 1`, [
    nowMs - INVALID_WINDOW_MS,
  ]);
  return gone.length;
}
