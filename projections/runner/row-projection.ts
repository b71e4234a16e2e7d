// A read model kept as rows keyed by one text key. Each event names the rows it touches and a
// pure evolve() computes their new value; the runner loads touched rows once per batch, folds the
// batch in memory and writes every changed row in one statement. That keeps a rebuild at a few
// statements per thousand events instead of one per event.
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import type { Queryable } from '../../src/eventstore/db.ts';
import type { EventDataByType } from '../../src/ledger/events.ts';

export type Row = Record<string, unknown>;

export interface RowProjection<R extends Row = Row> {
  name: string;
  /** Table name inside the read-model schema. */
  table: string;
  /** Column definitions after the `key text PRIMARY KEY` column. */
  columns: string;
  /**
   * Columns added after the table first shipped (each with a default that is right for every
   * older event): created with the table, and added in place to a table that lacks them.
   */
  addedColumns?: string[];
  /** Secondary indexes: `columns`, or `columns WHERE condition` for a partial index. */
  indexes?: string[];
  /**
   * Each event writes one row under its own event id (keysOf returns [event.id]) and evolve()
   * ignores the row it is given: a replay never needs to read a row back, so it loads the table
   * without its primary key and builds that once at the end.
   */
  keyedByEvent?: boolean;
  handles: ReadonlySet<string>;
  /** Row keys this event changes (usually one). */
  keysOf(event: ProjectedEvent): string[];
  /** The row after the event; null deletes it. Pure. */
  evolve(row: R | undefined, event: ProjectedEvent, key: string): R | null;
  /**
   * A read model whose state spans several tables (the books: lots, accounts, days) folds a page
   * itself: given the page's events it handles, in log order, it reads and writes its tables in
   * the caller's transaction (statements in order, as every projection's). keysOf and evolve are
   * then not called. Its other tables are declared as projections that handle nothing, so the
   * schema, a rebuild and verify know them.
   */
  applyPage?(tx: Queryable, schema: string, events: ProjectedEvent[]): Promise<void>;
}

export function defineProjection<R extends Row>(p: RowProjection<R>): RowProjection<R> {
  return p;
}

export const dayOf = (iso: string): string => iso.slice(0, 10);

/** An event's data as its type's schema gives it. */
export const eventData = <T extends keyof EventDataByType>(e: ProjectedEvent) => e.data as unknown as EventDataByType[T];

/**
 * A table a page fold (applyPage) writes: it handles no event itself, and is declared so the
 * schema, a rebuild and verify know it. `keyedByEvent`: rows written once under their event id
 * (see RowProjection), so a rebuild keeps its secondary indexes while it loads.
 */
export const foldedTable = (
  table: string,
  columns: string,
  indexes: string[] = [],
  opts: { keyedByEvent?: boolean; addedColumns?: string[] } = {},
): RowProjection =>
  defineProjection<Row>({
    name: table,
    table,
    columns,
    indexes,
    keyedByEvent: opts.keyedByEvent,
    addedColumns: opts.addedColumns,
    handles: new Set(),
    keysOf: () => [],
    evolve: (row) => row ?? null,
  });
