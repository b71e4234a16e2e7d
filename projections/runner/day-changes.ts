// The last event that changed each UTC day of a read model (a table of the day and that event's
// position): what a day's rendered answers are kept against (src/books/day-renders.ts). The
// position is the event's, not the page's, so a replay in other pages writes the same rows.
import type { Queryable } from '../../src/eventstore/db.ts';
import { q } from './sql.ts';

/** The columns of such a table after its key (the day). */
export const DAY_CHANGE_COLUMNS = 'position bigint NOT NULL';

/** Records the last event that changed each of these days (a later page's position only ever raises it). */
export async function noteDayChanges(tx: Queryable, schema: string, table: string, changed: Map<string, number>): Promise<void> {
  if (changed.size === 0) return;
  const t = q(schema, table);
  await tx.query(
    `INSERT INTO ${t} AS t SELECT * FROM json_populate_recordset(NULL::${t}, $1::json)
     ON CONFLICT (key) DO UPDATE SET position = greatest(t.position, excluded.position)`,
    [JSON.stringify([...changed].map(([key, position]) => ({ key, position })))],
  );
}
