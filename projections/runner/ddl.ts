// The tables of a read-model schema: created (or completed with columns added later) for live
// use, or created bare for a bulk load and finished once it is over.
import type { RowProjection } from './row-projection.ts';
import { q } from './sql.ts';

export interface DdlOptions {
  /**
   * For a rebuild into a fresh schema. Tables of rows rewritten many times over are UNLOGGED and
   * without secondary indexes: finishDdl() makes them durable and builds the indexes once, by
   * sorting. Event-keyed logs (rows written once, in event order) are durable from the start and
   * keep their secondary indexes (mostly appended to, maintained while node folds the next page,
   * instead of sorted at the end when nothing else runs); only their primary key, on random
   * event ids, is left to finishDdl().
   */
  bulk?: boolean;
  /**
   * A bulk load that is read once and dropped (verify's rebuild, compared with the live read
   * models by key): every table UNLOGGED, keyed from the start and without secondary indexes. No
   * index is left to build at the end: that one statement over a log of a million rows outlasts a
   * serving process's statement timeout (seen at 2M events: verify answered 503).
   */
  scratch?: boolean;
  /**
   * A scratch load kept as verify's copy of the read models (src/audit/verify-since.ts): the
   * tables a page fold writes get the live tables' secondary indexes from the start, so that later
   * events apply to the copy as they do to the live tables (a repricing's update finds its calls
   * by their series, not by a scan of every call). The others are only ever read by key.
   */
  indexed?: boolean;
}

export function projectionDdl(schema: string, projections: RowProjection[], opts: DdlOptions = {}): string[] {
  const bulk = opts.bulk || opts.scratch;
  const table = bulk ? 'UNLOGGED TABLE' : 'TABLE';
  const out = [
    `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
    `CREATE ${table} IF NOT EXISTS ${q(schema, 'checkpoint')} (name text PRIMARY KEY, position bigint NOT NULL, updated_at timestamptz NOT NULL)`,
    `INSERT INTO ${q(schema, 'checkpoint')} VALUES ('main', 0, now()) ON CONFLICT DO NOTHING`,
  ];
  for (const p of projections) {
    const columns = [p.columns, ...(p.addedColumns ?? [])].join(', ');
    if (opts.bulk && !opts.scratch && p.keyedByEvent) out.push(`CREATE TABLE IF NOT EXISTS ${q(schema, p.table)} (key text NOT NULL, ${columns})`);
    else out.push(`CREATE ${table} IF NOT EXISTS ${q(schema, p.table)} (key text PRIMARY KEY, ${columns})`);
    for (const column of p.addedColumns ?? []) out.push(`ALTER TABLE ${q(schema, p.table)} ADD COLUMN IF NOT EXISTS ${column}`);
    if (!bulk || (p.keyedByEvent && !opts.scratch) || (opts.indexed && foldWritten(p))) out.push(...indexDdl(schema, p));
  }
  return out;
}

/** A table written by a page fold (applyPage), which may look its rows up by other columns than the key. */
const foldWritten = (p: RowProjection) => p.applyPage !== undefined || p.handles.size === 0;

/** Each of a projection's indexes: `columns`, or `columns WHERE condition` for a partial one. */
function indexDdl(schema: string, p: RowProjection): string[] {
  return (p.indexes ?? []).map((spec) => {
    const name = `${p.table}_${spec.replace(/[^a-z0-9]+/g, '_')}_idx`;
    const [columns, where] = spec.split(' WHERE ');
    return `CREATE INDEX IF NOT EXISTS "${name}" ON ${q(schema, p.table)} (${columns})${where ? ` WHERE ${where}` : ''}`;
  });
}

/**
 * After a bulk load, in four steps: make the UNLOGGED tables durable (one sequential rewrite
 * each); build the indexes left out, the primary keys of event-keyed logs included (each
 * statement may run on a connection of its own, side by side); attach those primary keys, named
 * as CREATE TABLE names them (the same schema as a live one, index for index); gather the
 * planner's statistics.
 */
export function finishDdl(
  schema: string,
  projections: RowProjection[],
  opts: DdlOptions = {},
): { durable: string[]; indexes: string[]; keys: string[]; statistics: string[] } {
  const logs = projections.filter((p) => p.keyedByEvent);
  // A scratch load has its keys already (the comparison reads by key); nothing else is worth writing.
  if (opts.scratch) return { durable: [], indexes: [], keys: [], statistics: [] };
  return {
    durable: [
      `ALTER TABLE ${q(schema, 'checkpoint')} SET LOGGED`,
      ...projections.filter((p) => !p.keyedByEvent).map((p) => `ALTER TABLE ${q(schema, p.table)} SET LOGGED`),
    ],
    indexes: [
      ...logs.map((p) => `CREATE UNIQUE INDEX "${p.table}_pkey" ON ${q(schema, p.table)} (key)`),
      ...projections.filter((p) => !p.keyedByEvent).flatMap((p) => indexDdl(schema, p)),
    ],
    keys: logs.map((p) => `ALTER TABLE ${q(schema, p.table)} ADD CONSTRAINT "${p.table}_pkey" PRIMARY KEY USING INDEX "${p.table}_pkey"`),
    // Tables filled in bulk have no planner statistics until autovacuum comes by (never, where it
    // is off): a look-up of 2,000 keys was then planned as a scan of the whole charge log.
    statistics: projections.map((p) => `ANALYZE ${q(schema, p.table)}`),
  };
}
