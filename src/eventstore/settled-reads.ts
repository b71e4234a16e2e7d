// Reads of a settled part of the log (below a readable head taken earlier), for a replay's and a
// verify's workers: each on connections of its own, with no store object, so opening one runs no DDL.
import { queryByIndex, type Database } from './db.ts';
import { readPageSql } from './postgres-schema.ts';
import { EVENT_COLUMNS, PROJECTED_COLUMNS, toStored, type EventRow } from './event-rows.ts';
import type { ProjectedEvent, StoredEvent } from './port.ts';

/**
 * A page of the log after `afterPosition` and at or below `upTo`, in position order, with only
 * what projections read; with `types`, only events of those types. `upTo` must be settled (a
 * readableHead() taken earlier): nothing can still commit below it, so unlike readAll this never
 * waits. For a replay's workers, each on connections of its own (parallel-replay.ts); needs no
 * store object, so opening it runs no DDL.
 */
export async function readSettledPage(
  db: Database,
  schema: string,
  afterPosition: number,
  upTo: number,
  limit: number,
  types?: readonly string[],
): Promise<ProjectedEvent[]> {
  // The primary key's order is the page's order: a type filter read as rare to the planner, which
  // then sorted the whole rest of the log for each page (a 1M-event replay: 40 s instead of 10 s).
  return queryByIndex<ProjectedEvent>(
    db,
    readPageSql(schema, PROJECTED_COLUMNS, 'position <= $3', types ? '$4' : undefined),
    types ? [afterPosition, limit, upTo, types] : [afterPosition, limit, upTo],
  );
}

/**
 * A settled page (see readSettledPage) with every column, hash chain included: what verify's
 * chain check reads on a thread of its own.
 */
export async function readSettledEvents(db: Database, schema: string, afterPosition: number, upTo: number, limit: number): Promise<StoredEvent[]> {
  const rows = await db.query<EventRow>(readPageSql(schema, EVENT_COLUMNS, 'position <= $3'), [afterPosition, limit, upTo]);
  return rows.map(toStored);
}
