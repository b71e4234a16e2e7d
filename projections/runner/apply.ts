// Applies a batch of events to one projection's table in a read-model schema.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
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
  // Each touched row once, and for each event the rows it touches: the fold then looks nothing
  // up (a replay folds millions of events; map look-ups were a fifth of its time).
  if (p.applyPage) {
    const own = events.filter((e) => p.handles.has(e.type));
    if (own.length === 0) return;
    // Awaited whole: its reads see every write queued before them, its writes go before the next projection's.
    return p.applyPage(tx, schema, own);
  }
  const touched = new Map<string, Touched>();
  const relevant: ProjectedEvent[] = [];
  const touchedBy: Touched[][] = [];
  for (const e of events) {
    if (!p.handles.has(e.type)) continue;
    relevant.push(e);
    const keys = p.keysOf(e);
    const rows: Touched[] = new Array(keys.length);
    for (let k = 0; k < keys.length; k++) {
      let t = touched.get(keys[k]);
      if (!t) {
        t = { key: keys[k], before: null, row: null };
        touched.set(keys[k], t);
      }
      rows[k] = t;
    }
    touchedBy.push(rows);
  }
  if (relevant.length === 0) return;

  // The touched rows as they stand before the batch (only those that exist), each read once.
  const staged = memory ? await memory.table(tx, schema, p.table, p.keyedByEvent) : null;
  const toRead: string[] = [];
  const unstorable: Row[] = [];
  for (const t of touched.values()) {
    const row = staged ? staged.get(t.key, unstorable) : undefined;
    if (row) t.before = t.row = row;
    // A row keyed by its event is new: the runner applies each event once (past the checkpoint,
    // under its lock), and evolve() ignores the row anyway, so reading it back would find nothing
    // to use (a page of corrections' adjustments spent a look-up of 2,000 random keys on it).
    else if (row === undefined && !p.keyedByEvent) toRead.push(t.key);
  }
  // Written and read back, so the fold sees exactly what the table holds.
  if (unstorable.length > 0) await Promise.all(Object.assign(new RowChanges(), { upserts: unstorable }).send(tx, schema, p.table));
  if (toRead.length > 0) {
    const existing = await tx.query<Row>(`SELECT * FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [toRead]);
    for (const r of existing) {
      const t = touched.get(r.key as string)!;
      t.before = t.row = normaliseRow(r);
    }
  }

  // Folded in one go: this runs inside the batch's transaction, which holds a transaction id, and
  // readers of the log (every schema on the server) wait for the oldest one still running, so
  // giving turns away here would hold them back (tried: slower reads elsewhere under load).
  for (let i = 0; i < relevant.length; i++) {
    const rows = touchedBy[i];
    for (let k = 0; k < rows.length; k++) {
      const t = rows[k];
      t.row = p.evolve((t.row ?? undefined) as never, relevant[i], t.key);
    }
  }

  const changes = new RowChanges();
  for (const t of touched.values()) {
    // evolve() hands back the very row it was given when nothing changed: nothing to write.
    if (t.row !== null && t.row === t.before) continue;
    if (staged) staged.stage(t.key, t.row);
    else if (t.row === null) {
      // A row that never existed needs no DELETE.
      if (t.before !== null) changes.deletes.push(t.key);
    } else changes.upserts.push(withKey(t.row, t.key));
  }
  const sent = changes.send(tx, schema, p.table);
  if (writes) writes.push(...sent);
  else await Promise.all(sent);
}

/** A row the batch touches: as it stood before (null: absent) and as the fold has made it (null: absent or deleted). */
interface Touched {
  key: string;
  before: Row | null;
  row: Row | null;
}
