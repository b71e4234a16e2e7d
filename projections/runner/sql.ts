// What every module that reads or writes read-model tables shares: table names and rows as a
// SELECT hands them back.
import type { Row } from './row-projection.ts';

/** A table of a read-model schema, quoted. */
export const q = (schema: string, table: string) => `"${schema}"."${table}"`;

// Timestamps come back as Date; rows compare and fold as ISO strings.
export function normaliseRow(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) out[k] = v instanceof Date ? v.toISOString() : v;
  return out;
}

/**
 * A row as a read model's row type gives it: timestamps as ISO strings, without the `key`
 * column every table has (the projection's own).
 */
export function fromTable<R extends Row>(row: Row): R {
  const { key: _key, ...rest } = normaliseRow(row);
  return rest as R;
}
