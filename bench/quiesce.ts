// PostgreSQL settled before a bench's measured phase (bench/gateway.ts, bench/finance.ts).
import type { Database } from '../src/eventstore/db.ts';

/**
 * Lets PostgreSQL settle before a measured phase: a CHECKPOINT writes out what earlier phases (and
 * earlier runs' multi-million-event seeds) left dirty, and autovacuum workers still busy on their
 * tables are waited for (up to a minute), so a phase is not charged for another one's I/O.
 */
export async function quiesce(db: Database): Promise<void> {
  await db.query('CHECKPOINT');
  for (const until = Date.now() + 60_000; Date.now() < until;) {
    const [{ n }] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`);
    if (n === 0) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
}
