// Imported upstream bills, one row per bill, UTC day and upstream model (the bill's channel named
// by the operator on import). For a day, channel and upstream model the latest bill that covers it
// is the one that counts: a corrected export imported later replaces the earlier figure.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';

export interface BillLineRow extends Row {
  event_id: string;
  position: number;
  bill_id: string;
  provider: string;
  channel: string;
  day: string;
  upstream_model: string;
  cost_minor: number;
}

export const upstreamBillLines = defineProjection<BillLineRow>({
  name: 'upstream_bill_lines',
  table: 'upstream_bill_lines',
  columns: `event_id text NOT NULL, position bigint NOT NULL, bill_id text NOT NULL, provider text NOT NULL, channel text NOT NULL,
    day text NOT NULL, upstream_model text NOT NULL, cost_minor bigint NOT NULL`,
  indexes: ['day, channel, upstream_model'],
  handles: new Set(['UpstreamBillImported']),
  keysOf: (e) => eventData<'UpstreamBillImported'>(e).lines.map((l) => JSON.stringify([e.id, l.day, l.upstreamModel])),
  evolve(_row, e, key) {
    const d = eventData<'UpstreamBillImported'>(e);
    const [, day, model] = JSON.parse(key) as [string, string, string];
    const line = d.lines.find((l) => l.day === day && l.upstreamModel === model);
    return line
      ? {
          event_id: e.id,
          position: e.position,
          bill_id: d.billId,
          provider: d.provider,
          channel: d.channel,
          day,
          upstream_model: model,
          cost_minor: line.costMinor,
        }
      : null;
  },
});

/** The bill lines that count for the UTC days `fromDay` to `toDay`: per day, channel and upstream model, the latest imported. */
export async function billLinesBetween(db: Queryable, schema: string, fromDay: string, toDay: string): Promise<BillLineRow[]> {
  const rows = await db.query<Row>(
    `SELECT DISTINCT ON (day, channel, upstream_model) event_id, position, bill_id, provider, channel, day, upstream_model, cost_minor
     FROM ${q(schema, upstreamBillLines.table)} WHERE day >= $1 AND day <= $2
     ORDER BY day, channel, upstream_model, position DESC`,
    [fromDay, toDay],
  );
  return rows.map((r) => ({ ...r, position: Number(r.position), cost_minor: Number(r.cost_minor) }) as BillLineRow);
}
