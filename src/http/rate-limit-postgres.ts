// The GCRA rate limiter with its state in PostgreSQL, so every gateway process shares one
// budget per account. One statement per decision; the row lock orders concurrent callers.
import type { Database } from '../eventstore/db.ts';
import type { RateLimiter } from './rate-limit.ts';

export async function createPostgresRateLimiter(db: Database, schema: string): Promise<RateLimiter> {
  const table = `"${schema}".rate_limits`;
  await db.exec(`CREATE TABLE IF NOT EXISTS ${table} (account_id text PRIMARY KEY, tat double precision NOT NULL, allowed boolean NOT NULL)`);
  const WINDOW = 60_000;
  return {
    async take(accountId, perMinute, now = Date.now()) {
      const interval = WINDOW / perMinute;
      // $2 now, $3 interval, $4 window (all in ms): the same arithmetic as gcra() in rate-limit.ts.
      const [row] = await db.query<{ tat: number; allowed: boolean }>(
        `INSERT INTO ${table} (account_id, tat, allowed) VALUES ($1, $2::float8 + $3::float8, true)
         ON CONFLICT (account_id) DO UPDATE SET
           allowed = greatest(${table}.tat, $2::float8) + $3::float8 - $2::float8 <= $4::float8 + 1e-9,
           tat = CASE WHEN greatest(${table}.tat, $2::float8) + $3::float8 - $2::float8 <= $4::float8 + 1e-9
                      THEN greatest(${table}.tat, $2::float8) + $3::float8 ELSE ${table}.tat END
         RETURNING tat, allowed`, [accountId, now, interval, WINDOW]);
      const tat = Number(row.tat);
      if (!row.allowed) {
        const base = Math.max(tat, now);
        return { allowed: false, limit: perMinute, remaining: 0, resetMs: Math.ceil(base - now), retryAfterMs: Math.ceil(base + interval - now - WINDOW) };
      }
      return { allowed: true, limit: perMinute, remaining: Math.max(0, Math.floor((WINDOW - (tat - now)) / interval + 1e-9)), resetMs: Math.ceil(tat - now), retryAfterMs: 0 };
    },
  };
}
