// Plans: quota, validity, call rate and models, as last defined or updated.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface PlanRow extends Row {
  plan_id: string;
  name: string;
  quota: number;
  validity_days: number;
  requests_per_minute: number;
  models: string[];
  updated_at: string;
}

export const plans = defineProjection<PlanRow>({
  name: 'plans',
  table: 'plans',
  columns: `plan_id text NOT NULL, name text NOT NULL, quota bigint NOT NULL, validity_days integer NOT NULL,
    requests_per_minute integer NOT NULL, models jsonb NOT NULL, updated_at timestamptz NOT NULL`,
  handles: new Set(['PlanDefined', 'PlanUpdated']),
  keysOf: (e) => [String(e.data.planId)],
  evolve(_row, e) {
    const d = eventData<'PlanDefined'>(e);
    return {
      plan_id: d.planId,
      name: d.name,
      quota: d.quota,
      validity_days: d.validityDays,
      requests_per_minute: d.requestsPerMinute,
      models: d.models,
      updated_at: e.timestamp,
    };
  },
});

/** Every plan, by id. */
export async function list(db: Queryable, schema: string): Promise<PlanRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, plans.table)} ORDER BY plan_id`);
  return rows.map((r) => fromTable<PlanRow>(r));
}

export async function count(db: Queryable, schema: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q(schema, plans.table)}`);
  return Number(row.n);
}
