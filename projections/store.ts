// Reads and writes the rows of row projections in one read-model schema.
import type { Queryable } from '../src/eventstore/db.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
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
 * committing), so the next projection is folded while the database applies them. With `memory`
 * (a replay into a schema of its own) changed rows are staged there instead and written when
 * they stop changing (see ReplayMemory).
 */
export async function applyBatch(tx: Queryable, schema: string, p: RowProjection, events: ProjectedEvent[], memory?: ReplayMemory, writes?: Array<Promise<unknown>>): Promise<void> {
  const relevant: ProjectedEvent[] = [];
  const keysOf: string[][] = [];
  for (const e of events) {
    if (!p.handles.has(e.type)) continue;
    relevant.push(e);
    keysOf.push(p.keysOf(e));
  }
  if (relevant.length === 0) return;

  // The touched rows as they stand before the batch (only those that exist), each read once.
  const before = new Map<string, Row>();
  const staged = memory ? await memory.table(tx, schema, p.table) : null;
  const toRead: string[] = [];
  const unstorable: Row[] = [];
  for (const key of new Set(keysOf.flat())) {
    const row = staged?.get(key, unstorable);
    if (row) before.set(key, row);
    else if (row === undefined) toRead.push(key);
  }
  // Written and read back, so the fold sees exactly what the table holds.
  if (unstorable.length > 0) await Promise.all(Object.assign(new RowChanges(), { upserts: unstorable }).send(tx, schema, p.table));
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

// Key first when row lacks it: V8 builds {...row, key} on a slow path then.
const withKey = (row: Row, key: string): Row => (row.key === key ? row : Object.hasOwn(row, 'key') ? { ...row, key } : { key, ...row });

/** The writes one projection's batch needs: at most one DELETE, one INSERT and one upsert. */
class RowChanges {
  deletes: string[] = [];
  /** Rows known not to be in the table: plain inserts. */
  inserts: Row[] = [];
  upserts: Row[] = [];

  send(tx: Queryable, schema: string, table: string): Array<Promise<unknown>> {
    const sent: Array<Promise<unknown>> = [];
    const t = q(schema, table);
    if (this.deletes.length) sent.push(tx.query(`DELETE FROM ${t} WHERE key = ANY($1::text[])`, [this.deletes]));
    // json, not jsonb: the rows are parsed once, straight into the record.
    const source = `SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)`;
    if (this.inserts.length) sent.push(tx.query(`INSERT INTO ${t} ${source}`, [JSON.stringify(this.inserts)]));
    if (this.upserts.length) {
      const cols = Object.keys(this.upserts[0]).filter((c) => c !== 'key');
      sent.push(tx.query(
        `INSERT INTO ${t} ${source} ON CONFLICT (key) DO UPDATE SET ${cols.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`,
        [JSON.stringify(this.upserts)],
      ));
    }
    // Awaited by the caller; a failure must not count as unhandled meanwhile.
    for (const w of sent) w.catch(() => undefined);
    return sent;
  }
}

/**
 * What a replay into a schema nobody else reads until it is swapped in (a rebuild target) keeps
 * in memory: rows it changed but has not written yet, and which keys exist in the table. A row
 * is written once it has not changed for a page, so a hot row (an account, a key, a day's usage)
 * is written a handful of times instead of once per page, and a hold opened and settled between
 * two writes is never written at all. Staged rows are kept as a SELECT would return them (each
 * value put through what writing it as JSON and reading it back does to its column type), so a
 * fold sees the same input whether a row came from here or from the table; a row with a column
 * type this does not model is written at once. Bounded: past `maxStaged` rows everything staged
 * is written; past `maxKeys` keys a table stops tracking existence and reads keys it does not hold.
 *
 * The checkpoint moves with each page while staged rows are unwritten: the target is complete
 * only after flushAll(). A failed page leaves staged rows lost, so the replay must start over.
 */
export class ReplayMemory {
  private tables = new Map<string, TableMemory>();
  private page = 0;
  private broken = false;

  constructor(private readonly opts: { maxStaged?: number; maxKeys?: number } = {}) {}

  async table(tx: Queryable, schema: string, table: string): Promise<TableMemory> {
    if (this.broken) throw new Error('replay memory lost staged rows after a failed page; start the replay again');
    let t = this.tables.get(table);
    if (!t) {
      const cols = await tx.query<{ name: string; type: string }>(
        `SELECT a.attname AS name, t.typname AS type FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, [q(schema, table)]);
      t = new TableMemory(table, cols, this.opts.maxKeys ?? 1_000_000, () => this.page);
      this.tables.set(table, t);
    }
    return t;
  }

  /** After a page's folds: writes rows that did not change in it (all of them when too many are staged). */
  endPage(tx: Queryable, schema: string, writes: Array<Promise<unknown>>): void {
    const staged = [...this.tables.values()].reduce((n, t) => n + t.stagedCount, 0);
    const all = staged > (this.opts.maxStaged ?? 200_000);
    for (const t of this.tables.values()) writes.push(...t.flush(tx, schema, all ? Infinity : this.page));
    this.page++;
  }

  /** Writes everything staged: the target is complete after this. */
  async flushAll(tx: Queryable, schema: string): Promise<void> {
    for (const t of this.tables.values()) await Promise.all(t.flush(tx, schema, Infinity));
  }

  /** After a failed page, whose writes were rolled back. */
  fail(): void {
    this.broken = true;
    this.tables.clear();
  }
}

const NOT_MODELLED = Symbol('not modelled');
type Column = { name: string; stored: (v: unknown) => unknown };

export class TableMemory {
  /** Changed rows not yet written (null: to be deleted), with the page that last changed them. */
  private staged = new Map<string, { row: Row | null; stored: boolean; page: number }>();
  // Every key that exists in the table (null: not tracked, so a key not staged must be read).
  private written: Set<string> | null = new Set();
  private columns: Column[] | null;

  constructor(readonly name: string, cols: Array<{ name: string; type: string }>, private readonly maxKeys: number, private readonly page: () => number) {
    const modelled = cols.map((c) => ({ name: c.name, stored: STORED[c.type] }));
    this.columns = modelled.every((c) => c.stored) ? (modelled as Column[]) : null;
  }

  get stagedCount(): number { return this.staged.size; }

  /**
   * The row as the table will hold it, null if there is none, undefined if unknown here. A staged
   * row is put through the column conversions only when it is read again: most rows (a charge, a
   * hold) never are. One that cannot be converted is handed to `unstorable` to be written first.
   */
  get(key: string, unstorable: Row[]): Row | null | undefined {
    const s = this.staged.get(key);
    if (s) {
      if (s.row === null || s.stored) return s.row;
      const stored = this.asStored(s.row);
      if (stored) {
        s.row = stored;
        s.stored = true;
        return stored;
      }
      this.staged.delete(key);
      unstorable.push(s.row);
      this.markWritten(key);
      return undefined;
    }
    return this.written && !this.written.has(key) ? null : undefined;
  }

  /** A row's new value (null: deleted), written when it has not changed for a page. */
  stage(key: string, row: Row | null): void {
    this.staged.set(key, { row: row === null ? null : withKey(row, key), stored: false, page: this.page() });
  }

  /** Writes the staged rows last changed before `beforePage` and forgets them. */
  flush(tx: Queryable, schema: string, beforePage: number): Array<Promise<unknown>> {
    const changes = new RowChanges();
    for (const [key, s] of this.staged) {
      if (s.page >= beforePage) continue;
      this.staged.delete(key);
      const exists = this.written === null || this.written.has(key);
      if (s.row === null) {
        if (exists) changes.deletes.push(key);
        this.written?.delete(key);
      } else {
        (exists ? changes.upserts : changes.inserts).push(s.row);
        this.markWritten(key);
      }
    }
    return changes.send(tx, schema, this.name);
  }

  private markWritten(key: string): void {
    if (!this.written) return;
    this.written.add(key);
    if (this.written.size > this.maxKeys) this.written = null;
  }

  // Written as JSON through json_populate_recordset, read back by the driver and normaliseRow().
  private asStored(written: Row): Row | null {
    if (!this.columns) return null;
    const out: Row = {};
    for (const c of this.columns) {
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
