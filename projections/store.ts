// Reads and writes the rows of row projections in one read-model schema.
import type { Queryable } from '../src/eventstore/db.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import type { Row, RowProjection } from './row-projection.ts';

export const q = (schema: string, table: string) => `"${schema}"."${table}"`;

export interface DdlOptions {
  /**
   * For a rebuild into a fresh schema: UNLOGGED tables (no WAL for rows rewritten many times over)
   * and no secondary indexes; finishDdl() then makes the tables durable and builds the indexes once.
   */
  bulk?: boolean;
}

export function projectionDdl(schema: string, projections: RowProjection[], opts: DdlOptions = {}): string[] {
  const table = opts.bulk ? 'UNLOGGED TABLE' : 'TABLE';
  const out = [
    `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
    `CREATE ${table} IF NOT EXISTS ${q(schema, 'checkpoint')} (name text PRIMARY KEY, position bigint NOT NULL, updated_at timestamptz NOT NULL)`,
    `INSERT INTO ${q(schema, 'checkpoint')} VALUES ('main', 0, now()) ON CONFLICT DO NOTHING`,
  ];
  for (const p of projections) {
    out.push(`CREATE ${table} IF NOT EXISTS ${q(schema, p.table)} (key text PRIMARY KEY, ${p.columns})`);
    if (!opts.bulk) out.push(...indexDdl(schema, p));
  }
  return out;
}

function indexDdl(schema: string, p: RowProjection): string[] {
  return (p.indexes ?? []).map((cols) => {
    const name = `${p.table}_${cols.replace(/[^a-z0-9]+/g, '_')}_idx`;
    return `CREATE INDEX IF NOT EXISTS "${name}" ON ${q(schema, p.table)} (${cols})`;
  });
}

/** After a bulk load: make every table durable (one sequential rewrite each), then build the indexes. */
export function finishDdl(schema: string, projections: RowProjection[]): string[] {
  return [
    `ALTER TABLE ${q(schema, 'checkpoint')} SET LOGGED`,
    ...projections.map((p) => `ALTER TABLE ${q(schema, p.table)} SET LOGGED`),
    ...projections.flatMap((p) => indexDdl(schema, p)),
  ];
}

/**
 * Applies a batch of events to one projection: load touched rows, fold, write changes. With
 * `writes`, the writes are only sent (their promises pushed there, for the caller to await before
 * committing), so the next projection is folded while the database applies them.
 */
export async function applyBatch(tx: Queryable, schema: string, p: RowProjection, events: StoredEvent[], memory?: RowMemory, writes?: Array<Promise<unknown>>): Promise<void> {
  const relevant: StoredEvent[] = [];
  const keysOf: string[][] = [];
  for (const e of events) {
    if (!p.handles.has(e.type)) continue;
    relevant.push(e);
    keysOf.push(p.keysOf(e));
  }
  if (relevant.length === 0) return;

  // The touched rows as they stand before the batch (only those that exist), each read once.
  const before = new Map<string, Row>();
  const known = memory ? await memory.table(tx, schema, p.table) : null;
  const toRead: string[] = [];
  for (const key of new Set(keysOf.flat())) {
    const row = known?.get(key);
    if (row) before.set(key, row);
    else if (row === undefined) toRead.push(key);
  }
  if (toRead.length > 0) {
    const existing = await tx.query<Row>(`SELECT * FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [toRead]);
    for (const r of existing) before.set(r.key as string, normalise(r));
  }

  const rows = new Map<string, Row | null>(before);
  for (let i = 0; i < relevant.length; i++) {
    for (const key of keysOf[i]) {
      rows.set(key, p.evolve((rows.get(key) ?? undefined) as never, relevant[i], key));
    }
  }

  const changed: Row[] = [];
  const added: Row[] = [];
  const deletes: string[] = [];
  for (const [key, row] of rows) {
    if (row === null) {
      // A row that never existed needs no DELETE.
      if (before.has(key)) deletes.push(key);
      continue;
    }
    // evolve() hands back the very row it was given when nothing changed: nothing to write.
    if (row === before.get(key)) continue;
    // Key first when row lacks it: V8 builds {...row, key} on a slow path then.
    const out = row.key === key ? row : Object.hasOwn(row, 'key') ? { ...row, key } : { key, ...row };
    // A replay knows which keys are new to its private target: those are plain inserts.
    (known && !before.has(key) ? added : changed).push(out);
  }
  const sent: Array<Promise<unknown>> = [];
  if (deletes.length) sent.push(tx.query(`DELETE FROM ${q(schema, p.table)} WHERE key = ANY($1::text[])`, [deletes]));
  // json, not jsonb: the rows are parsed once, straight into the record.
  const source = `SELECT * FROM json_populate_recordset(NULL::${q(schema, p.table)}, $1::json)`;
  if (added.length) sent.push(tx.query(`INSERT INTO ${q(schema, p.table)} ${source}`, [JSON.stringify(added)]));
  if (changed.length) {
    const cols = Object.keys(changed[0]).filter((c) => c !== 'key');
    sent.push(tx.query(
      `INSERT INTO ${q(schema, p.table)} ${source} ON CONFLICT (key) DO UPDATE SET ${cols.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`,
      [JSON.stringify(changed)],
    ));
  }
  if (writes) {
    // Awaited later by the caller; a failure must not count as unhandled meanwhile.
    for (const w of sent) w.catch(() => undefined);
    writes.push(...sent);
  } else {
    await Promise.all(sent);
  }
  if (known) {
    for (const key of deletes) known.forget(key);
    // Only rows written a second time are kept: most rows that are written once (a charge, a
    // hold) are never touched again, and keeping them would only feed the garbage collector.
    for (const row of added) known.remember(row.key as string, null);
    for (const row of changed) known.remember(row.key as string, row);
  }
}

/**
 * What a replay into a schema nobody else writes (a rebuild target before its swap) knows about
 * the rows it wrote, so it need not read them back: which keys exist, and the latest value of the
 * rows it updated most recently. A row comes out exactly as a SELECT would have returned it (the
 * value is put through what writing it as JSON and reading it back does to each column type);
 * rows with a column type it does not model are read from the table. Bounded: past `maxKeys`
 * keys a table stops tracking existence and reads every key it does not hold.
 */
export class RowMemory {
  private tables = new Map<string, TableMemory>();
  /** Until clear(), every key it has not seen written is known not to exist. */
  private fromEmpty = true;

  /** `opts` bounds it; create it when the target's tables are empty (a fresh rebuild target). */
  constructor(private readonly opts: { maxRows?: number; maxKeys?: number } = {}) {}

  async table(tx: Queryable, schema: string, table: string): Promise<TableMemory> {
    let t = this.tables.get(table);
    if (!t) {
      const cols = await tx.query<{ name: string; type: string }>(
        `SELECT a.attname AS name, t.typname AS type FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, [q(schema, table)]);
      t = new TableMemory(cols, this.opts.maxRows ?? 50_000, this.fromEmpty ? this.opts.maxKeys ?? 1_000_000 : 0);
      this.tables.set(table, t);
    }
    return t;
  }

  /** Forgets everything, existence included (after a failed batch, whose writes were rolled back). */
  clear(): void {
    this.tables.clear();
    this.fromEmpty = false;
  }
}

const NOT_MODELLED = Symbol('not modelled');
type Column = { name: string; stored: (v: unknown) => unknown };

export class TableMemory {
  // Two generations approximate "most recently written": a hit in the old one moves the row to the
  // young one; when the young one is full, it becomes the old one and the old one is dropped.
  private young = new Map<string, Row>();
  private old = new Map<string, Row>();
  // Every key that exists (null: not tracked, so a key it does not hold must be read).
  private keys: Set<string> | null;
  private columns: Column[] | null;

  constructor(cols: Array<{ name: string; type: string }>, private readonly maxRows: number, private readonly maxKeys: number) {
    this.keys = maxKeys > 0 ? new Set() : null;
    const modelled = cols.map((c) => ({ name: c.name, stored: STORED[c.type] }));
    this.columns = modelled.every((c) => c.stored) ? (modelled as Column[]) : null;
  }

  /** The row as the table holds it, null if there is none, undefined if unknown here. */
  get(key: string): Row | null | undefined {
    let written = this.young.get(key);
    if (!written && (written = this.old.get(key))) this.keep(key, written);
    if (written) {
      const row = this.asStored(written);
      if (row) return row;
      this.young.delete(key);
      return undefined;
    }
    return this.keys && !this.keys.has(key) ? null : undefined;
  }

  /** The key now exists, with this row (null: not kept; it will be read if needed). */
  remember(key: string, row: Row | null): void {
    if (this.keys) {
      this.keys.add(key);
      if (this.keys.size > this.maxKeys) this.keys = null;
    }
    if (row && this.columns) this.keep(key, row);
  }

  forget(key: string): void {
    this.young.delete(key);
    this.old.delete(key);
    this.keys?.delete(key);
  }

  private keep(key: string, row: Row): void {
    this.old.delete(key);
    this.young.set(key, row);
    if (this.young.size >= this.maxRows / 2) {
      this.old = this.young;
      this.young = new Map();
    }
  }

  // Written as JSON through json_populate_recordset, read back by the driver and normaliseRow().
  private asStored(written: Row): Row | null {
    const out: Row = {};
    for (const c of this.columns!) {
      const v = c.stored(written[c.name]);
      if (v === NOT_MODELLED) return null;
      out[c.name] = v;
    }
    return out;
  }
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;
const nullOr = (f: (v: unknown) => unknown) => (v: unknown) => (v === null || v === undefined ? null : f(v));
const STORED: Record<string, ((v: unknown) => unknown) | undefined> = {
  text: nullOr((v) => (typeof v === 'string' ? v : (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean' ? JSON.stringify(v) : NOT_MODELLED)),
  int8: nullOr((v) => (Number.isSafeInteger(v) ? (v as number) + 0 : NOT_MODELLED)),
  int4: nullOr((v) => (Number.isSafeInteger(v) ? (v as number) + 0 : NOT_MODELLED)),
  bool: nullOr((v) => (typeof v === 'boolean' ? v : NOT_MODELLED)),
  timestamptz: nullOr((v) => {
    const t = typeof v === 'string' && ISO_INSTANT.test(v) ? new Date(v) : null;
    return t && !Number.isNaN(t.getTime()) ? t.toISOString() : NOT_MODELLED;
  }),
  jsonb: (v) => {
    const text = JSON.stringify(v);
    return text === undefined ? null : jsonbOrder(JSON.parse(text));
  },
};

// jsonb keeps object keys sorted by byte length, then bytes; JSON.parse keeps that order.
function jsonbOrder(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(jsonbOrder);
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v).sort((a, b) => Buffer.byteLength(a) - Buffer.byteLength(b) || Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = jsonbOrder((v as Record<string, unknown>)[k]);
  return out;
}

// Timestamps come back as Date; rows compare and fold as ISO strings.
function normalise(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) out[k] = v instanceof Date ? v.toISOString() : v;
  return out;
}

export { normalise as normaliseRow };
