// The table behind Idempotency-Key (src/http/idempotency.ts): one claim per API key and
// Idempotency-Key, then the response it got. Not part of the ledger: claims are written in place,
// expire, and are purged by the sweeper (purgeExpired).
import type { Database, Queryable } from './db.ts';

export async function ensureIdempotencyTable(db: Database, schema: string): Promise<void> {
  await db.exec(`CREATE TABLE IF NOT EXISTS "${schema}".idempotency (
    key_id text NOT NULL, key text NOT NULL, body_hash text NOT NULL, created_at timestamptz NOT NULL,
    status integer, headers jsonb, body text, PRIMARY KEY (key_id, key))`);
  await db.exec(`ALTER TABLE "${schema}".idempotency ADD COLUMN IF NOT EXISTS heartbeat_at timestamptz`);
  // Records were per account before they were per API key: the old rows never match a key id and are purged with age.
  await db.exec(`DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = '${schema}' AND table_name = 'idempotency' AND column_name = 'account_id') THEN
      ALTER TABLE "${schema}".idempotency RENAME COLUMN account_id TO key_id;
    END IF;
  END $$`);
  await db.exec(`CREATE INDEX IF NOT EXISTS idempotency_created_at ON "${schema}".idempotency (created_at)`);
}

/** A claim as a repeat of its key finds it: the response once recorded (status not null). */
interface IdempotencyClaim {
  body_hash: string;
  created_at: Date;
  status: number | null;
  headers: Record<string, string> | null;
  body: string | null;
  /** No heartbeat for the `abandonedAfterS` given to find(). */
  abandoned: boolean;
}

export function idempotencyStore(db: Queryable, schema: string) {
  const table = `"${schema}".idempotency`;
  return {
    /**
     * Claims the key for a request with this body (and a fresh heartbeat); false when a claim
     * younger than `ttlS` seconds holds it. An older claim is taken over, its response dropped.
     */
    async claim(keyId: string, key: string, bodyHash: string, ttlS: number): Promise<boolean> {
      const claimed = await db.query(
        `INSERT INTO ${table} (key_id, key, body_hash, created_at, heartbeat_at) VALUES ($1, $2, $3, now(), now())
         ON CONFLICT (key_id, key) DO UPDATE SET body_hash = excluded.body_hash, created_at = excluded.created_at, heartbeat_at = excluded.heartbeat_at, status = NULL, headers = NULL, body = NULL
           WHERE ${table}.created_at < now() - $4::int * interval '1 second'
         RETURNING 1`,
        [keyId, key, bodyHash, ttlS],
      );
      return claimed.length > 0;
    },
    /** Renews a claim whose response is not recorded yet. */
    async heartbeat(keyId: string, key: string): Promise<void> {
      await db.query(`UPDATE ${table} SET heartbeat_at = now() WHERE key_id = $1 AND key = $2 AND status IS NULL`, [keyId, key]);
    },
    async record(keyId: string, key: string, status: number, headers: Record<string, string>, body: string): Promise<void> {
      await db.query(`UPDATE ${table} SET status = $3, headers = $4, body = $5 WHERE key_id = $1 AND key = $2`, [
        keyId,
        key,
        status,
        JSON.stringify(headers),
        body,
      ]);
    },
    /** Drops a claim, so the key runs again. */
    async forget(keyId: string, key: string): Promise<void> {
      await db.query(`DELETE FROM ${table} WHERE key_id = $1 AND key = $2`, [keyId, key]);
    },
    async find(keyId: string, key: string, abandonedAfterS: number): Promise<IdempotencyClaim | null> {
      const [row] = await db.query<IdempotencyClaim>(
        `SELECT body_hash, created_at, status, headers, body,
                coalesce(heartbeat_at, created_at) < now() - $3::int * interval '1 second' AS abandoned
           FROM ${table} WHERE key_id = $1 AND key = $2`,
        [keyId, key, abandonedAfterS],
      );
      return row ?? null;
    },
  };
}

/** Deletes the records older than `ttlS` seconds (they would be taken over anyway); how many went. */
export async function purgeExpiredIdempotency(db: Queryable, schema: string, ttlS: number): Promise<number> {
  const gone = await db.query(`DELETE FROM "${schema}".idempotency WHERE created_at < now() - $1::int * interval '1 second' RETURNING 1`, [ttlS]);
  return gone.length;
}
