// Replay staging: a replay's changed rows held in memory until they settle (see ReplayMemory).
import type { Queryable } from '../../src/eventstore/db.ts';
import type { Row } from './row-projection.ts';
import { CopyFormat } from './copy.ts';
import { RowChanges, withKey } from './row-writes.ts';
import { q } from './sql.ts';

/**
 * What a replay into a schema nobody else reads until it is swapped in (a rebuild target) keeps
 * in memory: rows it changed but has not written yet, and which keys exist in the table. A row
 * is written once it has not changed for a page, so a hot row (an account, a key, a day's usage)
 * is written a handful of times instead of once per page, and a hold opened and settled between
 * two writes is never written at all. Rows of an event-keyed log never change: they are written
 * while the next page is folded (with COPY when `copy` is set). Staged rows are kept as a SELECT
 * would return them (each value put through what writing it as JSON and reading it back does to
 * its column type), so a fold sees the same input whether a row came from here or from the
 * table; a row with a column type this does not model is written at once. Bounded: past `maxStaged` rows everything staged
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
         WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
        [q(schema, table)],
      );
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

class TableMemory {
  /** Changed rows not yet written (null: to be deleted), with the page that last changed them. */
  private staged = new Map<string, { row: Row | null; stored: boolean; page: number }>();
  // Every key that exists in the table (null: not tracked, so a key not staged must be read).
  private written: Set<string> | null = new Set();
  private columns: Column[] | null;

  constructor(
    readonly name: string,
    cols: Array<{ name: string; type: string }>,
    private readonly maxKeys: number,
    private readonly page: () => number,
    private readonly copy: CopyFormat | null = null,
    readonly keyedByEvent = false,
  ) {
    if (keyedByEvent) this.written = null;
    const modelled = cols.map((c) => ({ name: c.name, stored: STORED[c.type] }));
    this.columns = modelled.every((c) => c.stored) ? (modelled as Column[]) : null;
  }

  get stagedCount(): number {
    return this.staged.size;
  }

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
