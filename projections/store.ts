// Reads and writes the rows of row projections in one read-model schema.
import type { Queryable } from '../src/eventstore/db.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import type { Row, RowProjection } from './row-projection.ts';

export const q = (schema: string, table: string) => `"${schema}"."${table}"`;

export function projectionDdl(schema: string, projections: RowProjection[]): string[] {
  const out = [
    `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
    `CREATE TABLE IF NOT EXISTS ${q(schema, 'checkpoint')} (name text PRIMARY KEY, position bigint NOT NULL, updated_at timestamptz NOT NULL)`,
    `INSERT INTO ${q(schema, 'checkpoint')} VALUES ('main', 0, now()) ON CONFLICT DO NOTHING`,
  ];
  for (const p of projections) {
    out.push(`CREATE TABLE IF NOT EXISTS ${q(schema, p.table)} (key text PRIMARY KEY, ${p.columns})`);
    for (const cols of p.indexes ?? []) {
      const name = `${p.table}_${cols.replace(/[^a-z0-9]+/g, '_')}_idx`;
      out.push(`CREATE INDEX IF NOT EXISTS "${name}" ON ${q(schema, p.table)} (${cols})`);
    }
  }
  return out;
}

/** Applies a batch of events to one projection: load touched rows, fold, write changes. */
export async function applyBatch(tx: Queryable, schema: string, p: RowProjection, events: StoredEvent[]): Promise<void> {
  const relevant = events.filter((e) => p.handles.has(e.type));
  if (relevant.length === 0) return;
  const touched = new Set<string>();
  for (const e of relevant) for (const k of p.keysOf(e)) touched.add(k);

  const rows = new Map<string, Row | null>();
  const existing = await tx.query<Row>(`SELECT * FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [[...touched]]);
  for (const r of existing) rows.set(r.key as string, normalise(r));

  for (const e of relevant) {
    for (const key of p.keysOf(e)) {
      rows.set(key, p.evolve((rows.get(key) ?? undefined) as never, e, key));
    }
  }

  const upserts: Row[] = [];
  const deletes: string[] = [];
  for (const [key, row] of rows) {
    if (row === null) deletes.push(key);
    else upserts.push({ ...row, key });
  }
  if (deletes.length) await tx.query(`DELETE FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [deletes]);
  if (upserts.length) {
    const cols = Object.keys(upserts[0]).filter((c) => c !== 'key');
    await tx.query(
      `INSERT INTO ${q(schema, p.table)} SELECT * FROM jsonb_populate_recordset(NULL::${q(schema, p.table)}, $1::jsonb)
       ON CONFLICT (key) DO UPDATE SET ${cols.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`,
      [JSON.stringify(upserts)],
    );
  }
}

// Timestamps come back as Date; rows compare and fold as ISO strings.
function normalise(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) out[k] = v instanceof Date ? v.toISOString() : v;
  return out;
}

export { normalise as normaliseRow };
