// Priced models: multiplier, alias, status and cache weights, as last priced.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface ModelRow extends Row {
  model_id: string;
  alias: string | null;
  multiplier_milli: number;
  status: 'ACTIVE' | 'INACTIVE';
  updated_at: string;
  cache_read_milli: number | null;
  cache_write_milli: number | null;
}

export const models = defineProjection<ModelRow>({
  name: 'models',
  table: 'models',
  columns: `model_id text NOT NULL, alias text, multiplier_milli integer NOT NULL, status text NOT NULL, updated_at timestamptz NOT NULL`,
  addedColumns: ['cache_read_milli integer', 'cache_write_milli integer'],
  handles: new Set(['ModelPriced']),
  keysOf: (e) => [String(e.data.modelId)],
  evolve(_row, e) {
    const d = eventData<'ModelPriced'>(e);
    return {
      model_id: d.modelId,
      alias: d.alias,
      multiplier_milli: d.multiplierMilli,
      status: d.status,
      updated_at: e.timestamp,
      cache_read_milli: d.cacheReadMilli ?? null,
      cache_write_milli: d.cacheWriteMilli ?? null,
    };
  },
});

/** Every priced model, active or not, by id. */
export async function all(db: Queryable, schema: string): Promise<ModelRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, models.table)} ORDER BY model_id`);
  return rows.map((r) => fromTable<ModelRow>(r));
}
