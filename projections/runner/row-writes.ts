// The writes of changed rows to a read-model table: deletes, plain inserts (JSON, or COPY during
// a replay on a PostgreSQL server) and upserts.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { Row } from './row-projection.ts';
import { copyInto, type CopyFormat } from './copy.ts';
import { q } from './sql.ts';

// Key first when row lacks it: V8 builds {...row, key} on a slow path then.
export const withKey = (row: Row, key: string): Row => (row.key === key ? row : Object.hasOwn(row, 'key') ? { ...row, key } : { key, ...row });

/** The writes one projection's batch needs: at most one DELETE, one INSERT and one upsert. */
export class RowChanges {
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
      sent.push(
        tx.query(`INSERT INTO ${t} ${source} ON CONFLICT (key) DO UPDATE SET ${cols.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`, [
          JSON.stringify(this.upserts),
        ]),
      );
    }
    // Awaited by the caller; a failure must not count as unhandled meanwhile.
    for (const w of sent) w.catch(() => undefined);
    return sent;
  }
}
