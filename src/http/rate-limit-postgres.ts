// The GCRA rate limiter with its state in PostgreSQL, so every gateway process shares one
// budget per account. The row lock orders concurrent callers.
//
// Decisions are batched: the first call goes out at once; calls that arrive while a statement is
// in flight wait for it and are then decided together in one statement (per account: how many
// of its n waiting calls still fit, in arrival order, and the new theoretical arrival time).
// Under load that is one statement per round trip instead of one per call; the outcome is the
// one n separate statements at the same instant would give.
//
// The table is UNLOGGED: a decision writes no WAL, so its commit does not wait for a disk flush
// (a logged table cost every call one more fsync). After a server crash the table comes back
// empty, which only forgets how much of the current minute each account has used.
import type { Database } from '../eventstore/db.ts';
import type { RateDecision, RateLimiter } from './rate-limit.ts';

const WINDOW = 60_000;
/** Most accounts decided in one statement. */
const MAX_ACCOUNTS = 500;

interface Waiting { accountId: string; perMinute: number; resolve(d: RateDecision): void; reject(e: unknown): void }

export async function createPostgresRateLimiter(db: Database, schema: string): Promise<RateLimiter> {
  const table = `"${schema}".rate_limits`;
  await db.exec(`CREATE UNLOGGED TABLE IF NOT EXISTS ${table} (account_id text PRIMARY KEY, tat double precision NOT NULL, allowed boolean NOT NULL)`);
  // Tables made by earlier versions: switched to UNLOGGED once (they only hold rate state), and
  // given the columns a batched statement passes its per-account request through.
  const [persistence] = await db.query<{ p: string }>(`SELECT relpersistence AS p FROM pg_class WHERE oid = $1::regclass`, [table]);
  if (persistence?.p === 'p') await db.exec(`ALTER TABLE ${table} SET UNLOGGED`);
  await db.exec(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS req_n integer NOT NULL DEFAULT 1, ADD COLUMN IF NOT EXISTS req_interval double precision NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS granted integer NOT NULL DEFAULT 0`);

  // $1 account ids, $2 calls waiting per account, $3 interval per account (ms), $4 now, $5 window.
  // Call j (1-based) of an account fits when max(tat, now) + j * interval - now <= window, the
  // arithmetic of gcra() in rate-limit.ts applied j times.
  const fits = (tat: string, n: string, iv: string) =>
    `least(${n}, greatest(0, floor(($5::float8 + 1e-9 - (greatest(${tat}, $4::float8) - $4::float8)) / ${iv})))::integer`;
  const sql = `
    INSERT INTO ${table} AS r (account_id, tat, allowed, req_n, req_interval, granted)
    SELECT a, $4::float8 + ${fits('$4::float8', 'n', 'iv')} * iv, ${fits('$4::float8', 'n', 'iv')} > 0, n, iv, ${fits('$4::float8', 'n', 'iv')}
      FROM unnest($1::text[], $2::integer[], $3::float8[]) AS q(a, n, iv)
    ON CONFLICT (account_id) DO UPDATE SET
      granted = ${fits('r.tat', 'excluded.req_n', 'excluded.req_interval')},
      allowed = ${fits('r.tat', 'excluded.req_n', 'excluded.req_interval')} > 0,
      tat = greatest(r.tat, $4::float8) + ${fits('r.tat', 'excluded.req_n', 'excluded.req_interval')} * excluded.req_interval,
      req_n = excluded.req_n, req_interval = excluded.req_interval
    RETURNING account_id, tat, granted`;

  let queue: Waiting[] = [];
  let inFlight = false;

  async function flush(): Promise<void> {
    if (inFlight || queue.length === 0) return;
    inFlight = true;
    // One group per account; a call whose plan rate differs from its account's group (the plan
    // changed between two calls) waits for the next statement.
    const groups = new Map<string, Waiting[]>();
    const later: Waiting[] = [];
    for (const w of queue) {
      const g = groups.get(w.accountId);
      if (g) { if (g[0].perMinute === w.perMinute) g.push(w); else later.push(w); }
      else if (groups.size < MAX_ACCOUNTS) groups.set(w.accountId, [w]);
      else later.push(w);
    }
    queue = later;
    // Sorted, so two processes lock the rows of one batch in the same order (no deadlock).
    const ids = [...groups.keys()].sort();
    const now = Date.now();
    try {
      const rows = await db.query<{ account_id: string; tat: number; granted: number }>(sql,
        [ids, ids.map((a) => groups.get(a)!.length), ids.map((a) => WINDOW / groups.get(a)![0].perMinute), now, WINDOW]);
      for (const row of rows) decide(groups.get(row.account_id)!, Number(row.tat), Number(row.granted), now);
    } catch (err) {
      for (const g of groups.values()) for (const w of g) w.reject(err);
    } finally {
      inFlight = false;
      void flush();
    }
  }

  return {
    take(accountId, perMinute) {
      return new Promise<RateDecision>((resolve, reject) => {
        queue.push({ accountId, perMinute, resolve, reject });
        void flush();
      });
    },
  };
}

/** Hands each waiting call its decision: the first `granted` fit, the rest are refused. */
function decide(calls: Waiting[], tat: number, granted: number, now: number): void {
  const perMinute = calls[0].perMinute;
  const interval = WINDOW / perMinute;
  const base = tat - granted * interval;
  calls.forEach((w, i) => {
    if (i < granted) {
      const own = base + (i + 1) * interval;
      w.resolve({ allowed: true, limit: perMinute, remaining: Math.max(0, Math.floor((WINDOW - (own - now)) / interval + 1e-9)), resetMs: Math.ceil(own - now), retryAfterMs: 0 });
    } else {
      const after = Math.max(tat, now);
      w.resolve({ allowed: false, limit: perMinute, remaining: 0, resetMs: Math.ceil(after - now), retryAfterMs: Math.ceil(after + interval - now - WINDOW) });
    }
  });
}
