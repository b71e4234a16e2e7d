// COPY: a replay's plain inserts on a PostgreSQL server, in PostgreSQL's COPY text format.
import { finished } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type { Queryable } from '../../src/eventstore/db.ts';
import type { Row } from './row-projection.ts';

/**
 * Rows as PostgreSQL's COPY text format, for plain inserts during a replay on a PostgreSQL server:
 * parsing it costs the server a fraction of json_populate_recordset. Each value is given exactly
 * as the JSON path would hand it to the column's input function; a row with a value this does not
 * model makes encode() return null, and the batch goes the JSON way instead.
 */
export class CopyFormat {
  readonly columnList: string;

  private constructor(
    names: string[],
    private readonly line: (key: string, row: Row) => string | null,
  ) {
    this.columnList = names.map((n) => `"${n}"`).join(', ');
  }

  static of(cols: Array<{ name: string; type: string }>): CopyFormat | null {
    const encoders = cols.map((c) => COPY_TEXT[c.type]);
    if (!encoders.every((e) => e)) return null;
    // One line per row, compiled for the table's columns: reading each column by a fixed name
    // keeps V8's property loads monomorphic, several times faster than a loop over the names.
    // Column names come from the catalogue and are embedded as JSON string literals.
    const body = cols
      .map((c, i) => {
        const v = c.name === 'key' ? 'key' : `row[${JSON.stringify(c.name)}]`;
        return `const v${i} = ${v}; const t${i} = v${i} === null || v${i} === undefined ? NULL : enc[${i}](v${i}); if (t${i} === null) return null;`;
      })
      .join('\n');
    const result = `return ${cols.map((_, i) => `t${i}`).join(' + TAB + ')} + NL;`;
    const line = new Function('enc', 'NULL', 'TAB', 'NL', `return function line(key, row) {\n${body}\n${result}\n};`)(encoders, '\\N', '\t', '\n');
    return new CopyFormat(
      cols.map((c) => c.name),
      line as (key: string, row: Row) => string | null,
    );
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
const copyEscape = (s: string) =>
  COPY_SPECIAL.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r')) : s;
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
export function copyInto(tx: Queryable, table: string, format: CopyFormat, text: string): Promise<unknown> {
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
