// The checkpoint of a read-model schema: the position of the last event its read models include.
// One row ('main'), created with the tables (ddl.ts) and moved in the transaction that applies
// the events (runner.ts).
import type { Queryable } from '../../src/eventstore/db.ts';
import type { EventStore } from '../../src/eventstore/port.ts';
import { lagAfter, type Lag } from '../../src/eventstore/lag.ts';
import { q } from './sql.ts';

/** The position the read models include (0 before any event). */
export async function read(db: Queryable, schema: string): Promise<number> {
  const [cp] = await db.query<{ position: number }>(`SELECT position FROM ${q(schema, 'checkpoint')} WHERE name = 'main'`);
  return Number(cp?.position ?? 0);
}

/**
 * Locks the checkpoint row until the transaction ends and returns its position; null when the
 * schema has none (a rebuild swapped it while this waited). `relaxedCommit`: the transaction
 * commits without waiting for the disk (set in the same statement, saving a round trip).
 */
export async function lock(tx: Queryable, schema: string, opts: { relaxedCommit?: boolean } = {}): Promise<number | null> {
  const relaxed = opts.relaxedCommit ? `, set_config('synchronous_commit', 'off', true)` : '';
  const [cp] = await tx.query<{ position: number }>(`SELECT position${relaxed} FROM ${q(schema, 'checkpoint')} WHERE name = 'main' FOR UPDATE`);
  return cp ? Number(cp.position) : null;
}

/** Moves the checkpoint (inside the transaction that applied the events up to `position`). */
export async function advance(tx: Queryable, schema: string, position: number): Promise<void> {
  await tx.query(`UPDATE ${q(schema, 'checkpoint')} SET position = $1, updated_at = now() WHERE name = 'main'`, [position]);
}

/** How far the read models are behind the store: the head, the checkpoint, the events between them. */
export async function lag(db: Queryable, store: Pick<EventStore, 'headPosition' | 'readAll' | 'countAfter'>, schema: string): Promise<Lag> {
  return lagAfter(store, await read(db, schema));
}
