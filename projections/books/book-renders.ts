// Each closed UTC day's finance answers, rendered and kept (src/books/day-renders.ts makes them):
// a table beside the books' read models, written by the day renderer, never by the projector.
// It is a cache, not a read model: a rebuild's fresh schema starts without it and the renderer
// fills it again, and verify does not compare it. A part is used only while its day is unchanged:
// it was rendered at the day's last change (book_day_changes, upstream_cost_day_changes) and in
// the books' current settlement currency.
import type { Queryable } from '../../src/eventstore/db.ts';
import { DEFAULT_CURRENCY } from '../../src/money/money.ts';
import type { Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';
import { upstreamCostDayChanges } from '../../src/catalogue/index.ts';
import { bookDayChanges } from './book-tables.ts';
import { books } from './books.ts';

// The table is named for the parts' format: a change of what a part holds (2: the tax columns of
// issue 43) starts a table of its own, so no part of the old format is ever joined to new ones.
const FORMAT = 2;
const TABLE = `book_renders_${FORMAT}`;
const OLDER_TABLES = ['book_renders'];

/** One day's parts of the finance answers (see src/books/day-renders.ts), with the change and currency they were rendered at. */
export interface DayParts {
  day: string;
  currency: string;
  reportJson: string;
  reportCsv: string;
  reportTotals: string;
  journalHledger: string;
  journalCsv: string;
  journalJson: string;
  journalBalances: string;
}

/** A part's texts (the fields a read asks for). */
export type PartField = Exclude<keyof DayParts, 'day' | 'currency'>;
/** Some of a day's parts: those asked for. */
export type SomeParts = Pick<DayParts, 'day'> & Partial<DayParts>;

const COLUMNS: Array<[keyof DayParts, string]> = [
  ['currency', 'currency'],
  ['reportJson', 'report_json'],
  ['reportCsv', 'report_csv'],
  ['reportTotals', 'report_totals'],
  ['journalHledger', 'journal_hledger'],
  ['journalCsv', 'journal_csv'],
  ['journalJson', 'journal_json'],
  ['journalBalances', 'journal_balances'],
];

export async function ensureRendersTable(db: Queryable, schema: string): Promise<void> {
  try {
    for (const older of OLDER_TABLES) await db.query(`DROP TABLE IF EXISTS ${q(schema, older)}`);
    await db.query(
      `CREATE TABLE IF NOT EXISTS ${q(schema, TABLE)} (day text PRIMARY KEY, stamp bigint NOT NULL, ${COLUMNS.map(([, c]) => `${c} text NOT NULL`).join(', ')})`,
    );
  } catch (err) {
    // Two gateways starting at once: IF NOT EXISTS does not stop the second from colliding with the first's new type.
    if (!['23505', '42P07'].includes((err as { code?: string }).code ?? '')) throw err;
  }
}

/** Each day's last change from `from` to `to` (either may be null: open), over both tables of changes. */
const changesSql = (schema: string, bounds: string) =>
  `SELECT key AS day, max(position) AS stamp FROM (
     SELECT key, position FROM ${q(schema, bookDayChanges.table)} WHERE ${bounds}
     UNION ALL SELECT key, position FROM ${q(schema, upstreamCostDayChanges.table)} WHERE ${bounds}) c GROUP BY key`;

const currentCurrency = (schema: string, param: string) => `coalesce((SELECT currency FROM ${q(schema, books.table)} WHERE key = 'book'), ${param})`;

const columnOf = new Map(COLUMNS);

/** Not there: a schema a rebuild swapped in before the renderer made the table (its days are rendered when read). */
const isMissingTable = (err: unknown) => (err as { code?: string }).code === '42P01';

/** The kept parts of the UTC days `from` to `to` that are still current: the fields asked for (a day's texts are read only where they are used). */
export async function keptParts(db: Queryable, schema: string, from: string, to: string, fields: PartField[]): Promise<Map<string, SomeParts>> {
  try {
    const rows = await db.query<Row>(
      `SELECT r.day${fields.map((f) => `, r.${columnOf.get(f)}`).join('')} FROM ${q(schema, TABLE)} r JOIN (${changesSql(schema, 'key >= $1 AND key <= $2')}) c ON c.day = r.day AND c.stamp = r.stamp
       WHERE r.day >= $1 AND r.day <= $2 AND r.currency = ${currentCurrency(schema, '$3')}`,
      [from, to, DEFAULT_CURRENCY],
    );
    return new Map(
      rows.map((r) => {
        const part: SomeParts = { day: String(r.day) };
        for (const f of fields) part[f] = String(r[columnOf.get(f)!]);
        return [part.day, part];
      }),
    );
  } catch (err) {
    if (isMissingTable(err)) return new Map();
    throw err;
  }
}

/** Up to `limit` days before `before` whose parts are missing or out of date, latest first, with their last change. */
export async function staleDays(db: Queryable, schema: string, before: string, limit: number): Promise<Array<{ day: string; stamp: number }>> {
  const rows = await db.query<Row>(
    `SELECT c.day, c.stamp FROM (${changesSql(schema, 'key < $1')}) c LEFT JOIN ${q(schema, TABLE)} r ON r.day = c.day
     WHERE r.day IS NULL OR r.stamp <> c.stamp OR r.currency <> ${currentCurrency(schema, '$3')}
     ORDER BY c.day DESC LIMIT $2`,
    [before, limit, DEFAULT_CURRENCY],
  );
  return rows.map((r) => ({ day: String(r.day), stamp: Number(r.stamp) }));
}

/** Keeps these parts, each rendered after its day's change `stamps` gives (a part of a later change is never replaced by an earlier one). */
export async function keepParts(db: Queryable, schema: string, parts: DayParts[], stamps: Map<string, number>): Promise<void> {
  if (parts.length === 0) return;
  const t = q(schema, TABLE);
  const rows = parts.map((p) => ({ day: p.day, stamp: stamps.get(p.day), ...Object.fromEntries(COLUMNS.map(([f, c]) => [c, p[f]])) }));
  await db.query(
    `INSERT INTO ${t} AS t SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)
     ON CONFLICT (day) DO UPDATE SET stamp = excluded.stamp, ${COLUMNS.map(([, c]) => `${c} = excluded.${c}`).join(', ')}
     WHERE t.stamp <= excluded.stamp`,
    [JSON.stringify(rows)],
  );
}
