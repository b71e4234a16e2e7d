// Applies a batch of events to one projection's table in a read-model schema.
import type { Queryable } from '../src/eventstore/db.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import type { Row, RowProjection } from './row-projection.ts';
import type { ReplayMemory } from './replay-memory.ts';
import { RowChanges, withKey } from './row-writes.ts';
import { normaliseRow, q } from './sql.ts';

/**
 * Applies a batch of events to one projection: load touched rows, fold, write changes. With
 * `writes`, the writes are only sent (their promises pushed there, for the caller to await before
 * committing), so the next projection is folded while the database applies them. With `memory`
 * (a replay into a schema of its own) changed rows are staged there instead and written when
 * they stop changing (see ReplayMemory).
 */
export async function applyBatch(
  tx: Queryable,
  schema: string,
  p: RowProjection,
  events: ProjectedEvent[],
  memory?: ReplayMemory,
  writes?: Array<Promise<unknown>>,
): Promise<void> {
  // The touched rows: null until known to exist, then their value as the fold goes (null: deleted).
  const rows = new Map<string, Row | null>();
  const relevant: ProjectedEvent[] = [];
  const keysOf: string[][] = [];
  for (const e of events) {
    if (!p.handles.has(e.type)) continue;
    relevant.push(e);
    const keys = p.keysOf(e);
    keysOf.push(keys);
    for (const key of keys) rows.set(key, null);
  }
  if (relevant.length === 0) return;

  // The touched rows as they stand before the batch (only those that exist), each read once.
  const before = new Map<string, Row>();
  const staged = memory ? await memory.table(tx, schema, p.table, p.keyedByEvent) : null;
  const toRead: string[] = [];
  const unstorable: Row[] = [];
  for (const key of rows.keys()) {
    const row = staged ? staged.get(key, unstorable) : undefined;
    if (row) {
      before.set(key, row);
      rows.set(key, row);
    } else if (row === undefined) toRead.push(key);
  }
  // Written and read back, so the fold sees exactly what the table holds.
  if (unstorable.length > 0) await Promise.all(Object.assign(new RowChanges(), { upserts: unstorable }).send(tx, schema, p.table));
  if (toRead.length > 0) {
    const existing = await tx.query<Row>(`SELECT * FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [toRead]);
    for (const r of existing) {
      const row = normaliseRow(r);
      before.set(r.key as string, row);
      rows.set(r.key as string, row);
    }
  }

  for (let i = 0; i < relevant.length; i++) {
    const keys = keysOf[i];
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k];
      rows.set(key, p.evolve((rows.get(key) ?? undefined) as never, relevant[i], key));
    }
  }

  const changes = new RowChanges();
  for (const [key, row] of rows) {
    // evolve() hands back the very row it was given when nothing changed: nothing to write.
    if (row !== null && row === before.get(key)) continue;
    if (staged) staged.stage(key, row);
    else if (row === null) {
      // A row that never existed needs no DELETE.
      if (before.has(key)) changes.deletes.push(key);
    } else changes.upserts.push(withKey(row, key));
  }
  const sent = changes.send(tx, schema, p.table);
  if (writes) writes.push(...sent);
  else await Promise.all(sent);
}
