// The rows of a read-model schema that changed since a moment, as the database itself saw them
// (verify's kept copy, src/audit/verify-since.ts): statement triggers on every table note each
// key written or deleted, with the hash its row had before its first change. Projections that
// fold a page themselves (the books, upstream cost) do not say which rows they touch; the
// triggers see those writes as they see every other.
import type { Queryable } from '../../src/eventstore/db.ts';
import { allReadModels } from './registry.ts';
import type { RowProjection } from './row-projection.ts';
import { q } from './sql.ts';

const CHANGED = 'changed_rows';

/** The SQL of a row's 64-bit hash from its columns in name order (the same on any schema with those columns). */
export function rowHashSql(columns: string[], alias = 't'): string {
  return `hash_record_extended(ROW(${columns.map((c) => `${alias}."${c.replace(/"/g, '""')}"`).join(', ')}), 0)`;
}

/** A table's columns in name order, the key included. */
export async function columnsOf(db: Queryable, schema: string, table: string): Promise<string[]> {
  const rows = await db.query<{ name: string }>(
    `SELECT column_name::text AS name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY column_name`,
    [schema, table],
  );
  return rows.map((r) => r.name);
}

/**
 * A log whose rows are each written once, by their own event, and never again (keysOf names the
 * event's id; no page fold writes it): its new rows are found by position, without notes (half
 * of a day's row writes are such rows, and a note would double each).
 */
export const writtenOnce = (p: RowProjection) => Boolean(p.keyedByEvent && p.handles.size > 0 && !p.applyPage);

/**
 * Starts noting the changes of every read-model table of `schema` (after its bulk load: a
 * replay's writes are not noted), and indexes the logs written once by position. Idempotent:
 * the triggers are replaced, the notes kept.
 */
export async function captureChanges(db: Queryable, schema: string): Promise<void> {
  await db.query(`CREATE TABLE IF NOT EXISTS ${q(schema, CHANGED)} (tbl text NOT NULL, key text NOT NULL, old_hash bigint, PRIMARY KEY (tbl, key))`);
  for (const p of allReadModels()) {
    if (writtenOnce(p)) {
      await db.query(`CREATE INDEX IF NOT EXISTS "${p.table}_written_at" ON ${q(schema, p.table)} (position)`);
      continue;
    }
    const columns = await columnsOf(db, schema, p.table);
    const fn = q(schema, `capture_${p.table}`);
    const table = `'${p.table}'`;
    // The first note of a key wins: it holds the row as it was before this round's first change
    // (NULL: the row did not exist). plpgsql plans each branch when it first runs, so one
    // function serves the triggers whose transition table has either name.
    await db.query(`CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO ${q(schema, CHANGED)} SELECT ${table}, n.key, NULL FROM new_rows n ON CONFLICT DO NOTHING;
        ELSE
          INSERT INTO ${q(schema, CHANGED)} SELECT ${table}, o.key, ${rowHashSql(columns, 'o')} FROM old_rows o ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
      END $f$`);
    const t = q(schema, p.table);
    for (const [op, transition] of [
      ['INSERT', 'NEW TABLE AS new_rows'],
      ['UPDATE', 'OLD TABLE AS old_rows'],
      ['DELETE', 'OLD TABLE AS old_rows'],
    ]) {
      const name = `capture_${op.toLowerCase()}`;
      await db.query(`DROP TRIGGER IF EXISTS ${name} ON ${t}`);
      await db.query(`CREATE TRIGGER ${name} AFTER ${op} ON ${t} REFERENCING ${transition} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`);
    }
  }
  // A bulk-loaded table has no planner statistics until autovacuum comes by (never, where it is
  // off): look-ups by key were planned as scans of the whole table. A sample: quick at any size.
  for (const p of allReadModels()) await db.query(`ANALYZE ${q(schema, p.table)}`);
}

/** Rows noted per read: bounded memory whatever a round changed. */
const NOTES_PER_PAGE = 20_000;

export interface ChangedRow {
  key: string;
  /** The row's hash before its first change (text: a 64-bit integer), null when it did not exist. */
  oldHash: string | null;
}

/** The noted changes of one table, a page at a time in key order. */
export async function* changedRows(db: Queryable, schema: string, table: string): AsyncGenerator<ChangedRow[]> {
  for (let after = ''; ;) {
    const page = await db.query<{ key: string; old_hash: string | null }>(
      `SELECT key, old_hash::text AS old_hash FROM ${q(schema, CHANGED)} WHERE tbl = $1 AND key > $2 ORDER BY key LIMIT ${NOTES_PER_PAGE}`,
      [table, after],
    );
    if (page.length === 0) return;
    yield page.map((r) => ({ key: r.key, oldHash: r.old_hash }));
    after = page[page.length - 1].key;
  }
}

/** The rows of a log written once (writtenOnce) after `position`, a page at a time in position order. */
export async function* rowsWrittenAfter(db: Queryable, schema: string, table: string, position: number): AsyncGenerator<ChangedRow[]> {
  for (let after = position; ;) {
    const page = await db.query<{ key: string; position: number }>(
      `SELECT key, position FROM ${q(schema, table)} WHERE position > $1 ORDER BY position LIMIT ${NOTES_PER_PAGE}`,
      [after],
    );
    if (page.length === 0) return;
    yield page.map((r) => ({ key: r.key, oldHash: null }));
    after = Number(page[page.length - 1].position);
  }
}

/** Forgets the notes (a new round begins at the checkpoint just recorded). */
/** Of `keys` (table and key), those the notes name. */
export async function notedAmong(db: Queryable, schema: string, keys: ReadonlyArray<{ table: string; key: string }>): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const rows = await db.query<{ tbl: string; key: string }>(
    `SELECT c.tbl, c.key FROM ${q(schema, CHANGED)} c JOIN unnest($1::text[], $2::text[]) AS k(tbl, key) ON c.tbl = k.tbl AND c.key = k.key`,
    [keys.map((k) => k.table), keys.map((k) => k.key)],
  );
  return new Set(rows.map((r) => `${r.tbl}\u0000${r.key}`));
}

export async function forgetChanges(db: Queryable, schema: string): Promise<void> {
  await db.query(`TRUNCATE ${q(schema, CHANGED)}`);
}
