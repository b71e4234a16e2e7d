// Reads and writes the rows of row projections in one read-model schema.
import { finished } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type { Queryable } from '../src/eventstore/db.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import type { Row, RowProjection } from './row-projection.ts';

export const q = (schema: string, table: string) => `"${schema}"."${table}"`;

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
}

export function projectionDdl(schema: string, projections: RowProjection[], opts: DdlOptions = {}): string[] {
  const table = opts.bulk ? 'UNLOGGED TABLE' : 'TABLE';
  const out = [
    `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
    `CREATE ${table} IF NOT EXISTS ${q(schema, 'checkpoint')} (name text PRIMARY KEY, position bigint NOT NULL, updated_at timestamptz NOT NULL)`,
    `INSERT INTO ${q(schema, 'checkpoint')} VALUES ('main', 0, now()) ON CONFLICT DO NOTHING`,
  ];
  for (const p of projections) {
    if (opts.bulk && p.keyedByEvent) out.push(`CREATE TABLE IF NOT EXISTS ${q(schema, p.table)} (key text NOT NULL, ${p.columns})`);
    else out.push(`CREATE ${table} IF NOT EXISTS ${q(schema, p.table)} (key text PRIMARY KEY, ${p.columns})`);
    if (!opts.bulk || p.keyedByEvent) out.push(...indexDdl(schema, p));
  }
  return out;
}

function indexDdl(schema: string, p: RowProjection): string[] {
  return (p.indexes ?? []).map((cols) => {
    const name = `${p.table}_${cols.replace(/[^a-z0-9]+/g, '_')}_idx`;
    return `CREATE INDEX IF NOT EXISTS "${name}" ON ${q(schema, p.table)} (${cols})`;
  });
}

/**
 * After a bulk load, in three steps: make the UNLOGGED tables durable (one sequential rewrite
 * each); build the indexes left out, the primary keys of event-keyed logs included (each
 * statement may run on a connection of its own, side by side); attach those primary keys, named
 * as CREATE TABLE names them (the same schema as a live one, index for index).
 */
export function finishDdl(schema: string, projections: RowProjection[]): { durable: string[]; indexes: string[]; keys: string[] } {
  const logs = projections.filter((p) => p.keyedByEvent);
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
  };
}

/**
 * Applies a batch of events to one projection: load touched rows, fold, write changes. With
 * `writes`, the writes are only sent (their promises pushed there, for the caller to await before
 * committing), so the next projection is folded while the database applies them. With `memory`
 * (a replay into a schema of its own) changed rows are staged there instead and written when
 * they stop changing (see ReplayMemory).
 */
export async function applyBatch(tx: Queryable, schema: string, p: RowProjection, events: ProjectedEvent[], memory?: ReplayMemory, writes?: Array<Promise<unknown>>): Promise<void> {
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
      const row = normalise(r);
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

// Key first when row lacks it: V8 builds {...row, key} on a slow path then.
const withKey = (row: Row, key: string): Row => (row.key === key ? row : Object.hasOwn(row, 'key') ? { ...row, key } : { key, ...row });

/** The writes one projection's batch needs: at most one DELETE, one INSERT and one upsert. */
class RowChanges {
  deletes: string[] = [];
  /** Rows known not to be in the table (plain inserts), and their keys (a row may lack its key). */
  inserts: Row[] = [];
  insertKeys: string[] = [];
  upserts: Row[] = [];

  send(tx: Queryable, schema: string, table: string, copy?: CopyFormat | null): Array<Promise<unknown>> {
    const sent: Array<Promise<unknown>> = [];
    const t = q(schema, table);
    if (this.deletes.length) sent.push(tx.query(`DELETE FROM ${t} WHERE key = ANY($1::text[])`, [this.deletes]));
    // json, not jsonb: the rows are parsed once, straight into the record.
    const source = `SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)`;
    const text = copy && this.inserts.length ? copy.encode(this.insertKeys, this.inserts) : null;
    if (text !== null) sent.push(copyInto(tx, t, copy!, text));
    else if (this.inserts.length) {
      const rows = this.inserts.map((row, i) => withKey(row, this.insertKeys[i]));
      sent.push(tx.query(`INSERT INTO ${t} ${source}`, [JSON.stringify(rows)]));
    }
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
 * two writes is never written at all. Rows of an event-keyed log never change: they are written
 * while the next page is folded (with COPY when `copy` is set). Staged rows are kept as a SELECT would return them (each
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

  /** copy: write new rows with COPY (only on a PostgreSQL server, not on PGlite). */
  constructor(private readonly opts: { maxStaged?: number; maxKeys?: number; copy?: boolean } = {}) {}

  /** keyedByEvent: see RowProjection (every key is new, so none is tracked nor read). */
  async table(tx: Queryable, schema: string, table: string, keyedByEvent = false): Promise<TableMemory> {
    if (this.broken) throw new Error('replay memory lost staged rows after a failed page; start the replay again');
    let t = this.tables.get(table);
    if (!t) {
      const cols = await tx.query<{ name: string; type: string }>(
        `SELECT a.attname AS name, t.typname AS type FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, [q(schema, table)]);
      t = new TableMemory(table, cols, this.opts.maxKeys ?? 1_000_000, () => this.page, this.opts.copy ? CopyFormat.of(cols) : null, keyedByEvent);
      this.tables.set(table, t);
    }
    return t;
  }

  /**
   * Before a page's folds: writes the rows that did not change in the previous page (all of them
   * when too many are staged), so the server writes them while this page is folded.
   */
  beginPage(tx: Queryable, schema: string, writes: Array<Promise<unknown>>): void {
    const staged = [...this.tables.values()].reduce((n, t) => n + t.stagedCount, 0);
    const all = staged > (this.opts.maxStaged ?? 200_000);
    // An event-keyed log's rows never change again: all of them go.
    for (const t of this.tables.values()) writes.push(...t.flush(tx, schema, all || t.keyedByEvent ? Infinity : this.page - 1));
  }

  /** After a page's folds. */
  endPage(): void {
    this.page++;
  }

  /** Writes everything staged: the target is complete after this. */
  async flushAll(tx: Queryable, schema: string): Promise<void> {
    // Queued at once, sent one after another: the next table's rows are encoded while the server
    // writes the last's.
    let tail: Promise<unknown> = Promise.resolve();
    const inOrder: Queryable = {
      query(text, params) {
        const result = tail.then(() => tx.query(text, params));
        tail = result.catch(() => undefined);
        return result as never;
      },
    };
    const writes: Array<Promise<unknown>> = [];
    for (const t of this.tables.values()) writes.push(...t.flush(inOrder, schema, Infinity));
    // All settled before the transaction ends: none may reach the connection after it is released.
    const failed = (await Promise.allSettled(writes)).find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
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

  constructor(readonly name: string, cols: Array<{ name: string; type: string }>, private readonly maxKeys: number, private readonly page: () => number, private readonly copy: CopyFormat | null = null, readonly keyedByEvent = false) {
    if (keyedByEvent) this.written = null;
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
      const stored = this.asStored(s.row, key);
      if (stored) {
        s.row = stored;
        s.stored = true;
        return stored;
      }
      this.staged.delete(key);
      unstorable.push(withKey(s.row, key));
      this.markWritten(key);
      return undefined;
    }
    return this.keyedByEvent || (this.written && !this.written.has(key)) ? null : undefined;
  }

  /** A row's new value (null: deleted), written when it has not changed for a page. */
  stage(key: string, row: Row | null): void {
    // The row is kept as evolve() made it (maybe without its key), an entry reused as it changes.
    const s = this.staged.get(key);
    if (s) {
      s.row = row;
      s.stored = false;
      s.page = this.page();
    } else this.staged.set(key, { row, stored: false, page: this.page() });
  }

  /** Writes the staged rows last changed before `beforePage` and forgets them. */
  flush(tx: Queryable, schema: string, beforePage: number): Array<Promise<unknown>> {
    const changes = new RowChanges();
    for (const [key, s] of this.staged) {
      if (s.page >= beforePage) continue;
      this.staged.delete(key);
      const exists = !this.keyedByEvent && (this.written === null || this.written.has(key));
      if (s.row === null) {
        if (exists) changes.deletes.push(key);
        this.written?.delete(key);
      } else {
        if (exists) changes.upserts.push(withKey(s.row, key));
        else {
          changes.inserts.push(s.row);
          changes.insertKeys.push(key);
        }
        this.markWritten(key);
      }
    }
    return changes.send(tx, schema, this.name, this.copy);
  }

  private markWritten(key: string): void {
    if (!this.written) return;
    this.written.add(key);
    if (this.written.size > this.maxKeys) this.written = null;
  }

  // Written as JSON through json_populate_recordset, read back by the driver and normaliseRow().
  private asStored(written: Row, key: string): Row | null {
    if (!this.columns) return null;
    const out: Row = {};
    for (const c of this.columns) {
      const v = c.name === 'key' ? key : c.stored(written[c.name]);
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

/**
 * Rows as PostgreSQL's COPY text format, for plain inserts during a replay on a PostgreSQL server:
 * parsing it costs the server a fraction of json_populate_recordset. Each value is given exactly
 * as the JSON path would hand it to the column's input function; a row with a value this does not
 * model makes encode() return null, and the batch goes the JSON way instead.
 */
export class CopyFormat {
  readonly columnList: string;

  private constructor(names: string[], private readonly line: (key: string, row: Row) => string | null) {
    this.columnList = names.map((n) => `"${n}"`).join(', ');
  }

  static of(cols: Array<{ name: string; type: string }>): CopyFormat | null {
    const encoders = cols.map((c) => COPY_TEXT[c.type]);
    if (!encoders.every((e) => e)) return null;
    // One line per row, compiled for the table's columns: reading each column by a fixed name
    // keeps V8's property loads monomorphic, several times faster than a loop over the names.
    // Column names come from the catalogue and are embedded as JSON string literals.
    const body = cols.map((c, i) => {
      const v = c.name === 'key' ? 'key' : `row[${JSON.stringify(c.name)}]`;
      return `const v${i} = ${v}; const t${i} = v${i} === null || v${i} === undefined ? NULL : enc[${i}](v${i}); if (t${i} === null) return null;`;
    }).join('\n');
    const result = `return ${cols.map((_, i) => `t${i}`).join(' + TAB + ')} + NL;`;
    const line = new Function('enc', 'NULL', 'TAB', 'NL', `return function line(key, row) {\n${body}\n${result}\n};`)(encoders, '\\N', '\t', '\n');
    return new CopyFormat(cols.map((c) => c.name), line as (key: string, row: Row) => string | null);
  }

  encode(keys: string[], rows: Row[]): string | null {
    let out = '';
    for (let r = 0; r < rows.length; r++) {
      const text = this.line(keys[r], rows[r]);
      if (text === null) return null;
      out += text;
    }
    return out;
  }
}

const COPY_SPECIAL = /[\\\t\n\r]/;
const copyEscape = (s: string) => (COPY_SPECIAL.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r')) : s);
// Not null here (that is \N); null back means "not modelled".
const COPY_TEXT: Record<string, ((v: unknown) => string | null) | undefined> = {
  text: (v) => (typeof v === 'string' ? copyEscape(v) : (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean' ? JSON.stringify(v) : null),
  int8: (v) => (Number.isSafeInteger(v) ? String(v) : null),
  int4: (v) => (Number.isSafeInteger(v) && Math.abs(v as number) <= 2 ** 31 - 1 ? String(v) : null),
  bool: (v) => (typeof v === 'boolean' ? (v ? 't' : 'f') : null),
  timestamptz: (v) => (typeof v === 'string' ? copyEscape(v) : null),
  jsonb: (v) => {
    const text = JSON.stringify(v);
    return text === undefined ? null : copyEscape(text);
  },
};

/** Sends rows (COPY text) to `table` on the transaction's connection, in order with its other statements. */
function copyInto(tx: Queryable, table: string, format: CopyFormat, text: string): Promise<unknown> {
  const stream = pgCopy.from(`COPY ${table} (${format.columnList}) FROM STDIN`);
  // node-postgres takes a submittable query object in place of SQL text and hands it back, which
  // the transaction's query() awaits: made thenable, settling (as a result without rows) when the
  // COPY is over, it holds the statements queued after it until then and reports its error.
  const over = finished(stream).then(() => ({ rows: [] }));
  over.catch(() => undefined);
  Object.assign(stream, { then: over.then.bind(over) });
  const sent = tx.query(stream as unknown as string);
  // The data waits in the stream until the server asks for it.
  stream.end(text);
  sent.catch(() => undefined);
  return sent;
}
