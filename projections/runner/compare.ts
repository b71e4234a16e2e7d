// Two read-model schemas compared row by row (verify: the live read models against a rebuild).
// The database does the work: a digest of each range of keys on both sides first (a count and a
// sum of 64-bit row hashes, read in one pass and compared in node), and only a range whose
// digests differ is compared row by row (a full join on the key, each row as jsonb) to list what
// differs. The rows never cross to node unless they differ.
import { queryByIndex, type Database, type Queryable } from '../../src/eventstore/db.ts';
import { allReadModels } from './registry.ts';
import { rowHashSql } from './change-capture.ts';
import { q } from './sql.ts';

export interface RowDifference {
  table: string;
  key: string;
  live: unknown;
  rebuilt: unknown;
}

/**
 * Rows of a table in one digest statement: each side's digest of a range is one statement on a
 * connection of its own, well inside a serving process's statement timeout (~0.6 s per 150k rows
 * of the largest table on a quiet machine).
 */
const DIGESTED_PER_STATEMENT = 100_000;
/** Rows of a table compared by one row-by-row statement (a jsonb join costs ~3x a digest). */
const COMPARED_PER_STATEMENT = 20_000;

/** A range of keys; `through`: an event-keyed log's rows only up to this event position. */
type KeyRange = { after: string | null; upTo: string | null; through?: number };

/** The SQL condition and parameters of a range of keys. */
function rangeSql({ after, upTo, through }: KeyRange): { where: string; params: string[] } {
  const params = [after, upTo].filter((x): x is string => x !== null);
  if (through !== undefined && !Number.isSafeInteger(through)) throw new Error(`not a position: ${through}`);
  const where =
    [after === null ? null : 'key > $1', upTo === null ? null : `key <= $${after === null ? 1 : 2}`, through === undefined ? null : `position <= ${through}`]
      .filter(Boolean)
      .join(' AND ') || 'true';
  return { where, params };
}

/** The key ending the next `size` keys of `table` after `after` and not beyond `bound` (null: the rest, up to `bound`). */
async function nextEdge(db: Database, table: string, after: string | null, size: number, bound: string | null): Promise<string | null> {
  const { where, params } = rangeSql({ after, upTo: bound });
  const [edge] = await db.query<{ key: string }>(`SELECT key FROM ${table} WHERE ${where} ORDER BY key OFFSET ${size - 1} LIMIT 1`, params);
  return edge?.key ?? bound;
}

/**
 * The table's columns, in name order, when both sides have the same ones (null otherwise: the
 * row-by-row comparison then shows the columns that differ).
 */
async function sharedColumns(db: Database, live: string, rebuilt: string, table: string): Promise<string[] | null> {
  const rows = await db.query<{ schema: string; columns: string[] }>(
    `SELECT table_schema AS schema, array_agg(column_name::text ORDER BY column_name) AS columns FROM information_schema.columns
      WHERE table_schema = ANY($1::text[]) AND table_name = $2 GROUP BY table_schema`,
    [[live, rebuilt], table],
  );
  const [a, b] = [live, rebuilt].map((s) => rows.find((r) => r.schema === s)?.columns.join(','));
  return a !== undefined && a === b ? rows[0].columns : null;
}

/**
 * A row's 64-bit hash (rowHashSql): the named columns as one record, the same order on both
 * sides whatever each table's own, hashed by each column type's own hash function (no text is
 * made of the row: a third of the cost of hashing its text). A change of any column of any row
 * moves a range's sum, but for a 2^-64 chance: this checks for drift, not for rows forged to
 * collide (the chains of the log are what verify guards against tampering with).
 */
const rowHash = (columns: string[]) => rowHashSql(columns);

/** A table's digest: how many rows it has and the sum of their hashes (rowHashSql), exact. */
export interface TableDigest {
  rows: bigint;
  sum: bigint;
}

/** Adds rows (or takes them away, with negative figures) to a table's digest. */
export function addDigest(digests: Map<string, TableDigest>, table: string, rows: bigint, sum: bigint): void {
  const d = digests.get(table) ?? { rows: 0n, sum: 0n };
  digests.set(table, { rows: d.rows + rows, sum: d.sum + sum });
}

/**
 * The hashes of the rows with these keys (absent keys are missing from the answer), on either
 * schema: the live one read inside a snapshot, the kept copy outside it.
 */
export async function rowHashes(db: Queryable, schema: string, table: string, columns: string[], keys: string[]): Promise<Map<string, string>> {
  const rows = await db.query<{ key: string; h: string }>(`SELECT key, ${rowHash(columns)}::text AS h FROM ${q(schema, table)} t WHERE key = ANY($1::text[])`, [
    keys,
  ]);
  return new Map(rows.map((r) => [r.key, r.h]));
}

/** The rows with these keys as JSON (a difference's two sides). */
export async function rowsAsJson(db: Queryable, schema: string, table: string, keys: string[]): Promise<Map<string, unknown>> {
  const rows = await db.query<{ key: string; row: unknown }>(`SELECT key, to_jsonb(t) AS row FROM ${q(schema, table)} t WHERE key = ANY($1::text[])`, [keys]);
  return new Map(rows.map((r) => [r.key, r.row]));
}

/** A range's digest: the count of its rows and the sum of their hashes. */
interface Digest {
  n: string;
  h: string;
}

/**
 * The digest of the next `size` rows of the rebuilt side after `after`, and the key ending them
 * (null when fewer are left: the range then runs to the end of the table, on both sides).
 */
async function nextRebuiltDigest(
  db: Database,
  table: string,
  columns: string[],
  after: string | null,
  size: number,
  through: number | undefined,
): Promise<Digest & { upTo: string | null }> {
  const { where, params } = rangeSql({ after, upTo: null, through });
  // Through the key's index (queryByIndex): without statistics the planner scanned the whole
  // table for each range, which made the comparison quadratic in the table's size.
  const [row] = await queryByIndex<{ n: number; h: string; last: string | null }>(
    db,
    `SELECT count(*)::int AS n, coalesce(sum(h), 0)::text AS h, max(key) AS last
      FROM (SELECT key, ${rowHash(columns)} AS h FROM ${table} t WHERE ${where} ORDER BY key LIMIT ${size}) s`,
    params,
  );
  return { n: String(row.n), h: row.h, upTo: row.n < size ? null : row.last };
}

/** The digest of a range of keys of the live side. */
async function liveDigest(db: Database, table: string, columns: string[], range: KeyRange): Promise<Digest> {
  const { where, params } = rangeSql(range);
  const [row] = await queryByIndex<Digest>(
    db,
    `SELECT count(*)::text AS n, coalesce(sum(${rowHash(columns)}), 0)::text AS h FROM ${table} t WHERE ${where}`,
    params,
  );
  return row;
}

/** The rows of a range that differ, row by row, at most `limit`, in ranges of COMPARED_PER_STATEMENT. */
async function rowsThatDiffer(
  db: Database,
  live: string,
  rebuilt: string,
  table: string,
  range: KeyRange,
  limit: number,
  perStatement: number,
): Promise<RowDifference[]> {
  const out: RowDifference[] = [];
  for (let after = range.after; out.length < limit;) {
    const upTo = await nextEdge(db, q(rebuilt, table), after, perStatement, range.upTo);
    const { where, params } = rangeSql({ after, upTo, through: range.through });
    const rows = await db.query<{ key: string; live: Record<string, unknown> | null; rebuilt: Record<string, unknown> | null }>(
      `SELECT coalesce(a.key, b.key) AS key, CASE WHEN a.key IS NULL THEN NULL ELSE to_jsonb(a) END AS live,
        CASE WHEN b.key IS NULL THEN NULL ELSE to_jsonb(b) END AS rebuilt
      FROM (SELECT * FROM ${q(live, table)} WHERE ${where}) a FULL JOIN (SELECT * FROM ${q(rebuilt, table)} WHERE ${where}) b ON a.key = b.key
      WHERE a.key IS NULL OR b.key IS NULL OR to_jsonb(a) <> to_jsonb(b) ORDER BY 1 LIMIT ${limit - out.length}`,
      params,
    );
    for (const r of rows) out.push({ table, key: r.key, live: r.live, rebuilt: r.rebuilt });
    if (upTo === null || upTo === range.upTo) break;
    after = upTo;
  }
  return out;
}

/**
 * The rows that differ between two read-model schemas (a row missing on one side is null there),
 * at most `limit` per table, in key order. A range of keys at a time (one statement over a table
 * of millions of rows would outlast the statement timeout), so the check holds no table in memory.
 */
export async function differingRows(
  db: Database,
  live: string,
  rebuilt: string,
  limit: number,
  /** Rows per statement (tests make them small to cross many ranges). */
  perStatement = { digested: DIGESTED_PER_STATEMENT, compared: COMPARED_PER_STATEMENT },
  /**
   * The position both sides have reached. An event-keyed log's row is written once, by its event,
   * so the rows of later events are left out on both sides: live traffic appends them meanwhile,
   * and each would otherwise send its whole range of keys to the row-by-row comparison.
   */
  settledAt?: number,
  /** Hears each table's digest of the rebuilt side (the sum over its ranges), when both sides have its columns. */
  rebuiltDigests?: Map<string, TableDigest>,
): Promise<RowDifference[]> {
  const out: RowDifference[] = [];
  for (const p of allReadModels()) {
    const columns = await sharedColumns(db, live, rebuilt, p.table);
    const through = p.keyedByEvent ? settledAt : undefined;
    let found = 0;
    if (!columns) {
      // Not the same columns: every row differs, and the row-by-row comparison shows how.
      out.push(...(await rowsThatDiffer(db, live, rebuilt, p.table, { after: null, upTo: null, through }, limit, perStatement.compared)));
      continue;
    }
    // Range after range: the rebuilt side's next range is digested (one pass of its index gives
    // the rows and the key ending them) while the live side digests the current one.
    let next = nextRebuiltDigest(db, q(rebuilt, p.table), columns, null, perStatement.digested, through);
    for (let after: string | null = null; found < limit;) {
      const rebuiltDigest = await next;
      if (rebuiltDigests) addDigest(rebuiltDigests, p.table, BigInt(rebuiltDigest.n), BigInt(rebuiltDigest.h));
      const range: KeyRange = { after, upTo: rebuiltDigest.upTo, through };
      if (range.upTo !== null) next = nextRebuiltDigest(db, q(rebuilt, p.table), columns, range.upTo, perStatement.digested, through);
      const liveSide = await liveDigest(db, q(live, p.table), columns, range);
      if (liveSide.n !== rebuiltDigest.n || liveSide.h !== rebuiltDigest.h) {
        const rows = await rowsThatDiffer(db, live, rebuilt, p.table, range, limit - found, perStatement.compared);
        out.push(...rows);
        found += rows.length;
      }
      if (range.upTo === null) break;
      after = range.upTo;
    }
    // Left unawaited when the limit was reached: settled here so that no failure goes unheard.
    await next.catch(() => undefined);
  }
  return out;
}
