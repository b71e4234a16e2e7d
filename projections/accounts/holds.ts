// Holds: quota reserved for a call that is not settled yet (charged or released).
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';

export interface HoldRow extends Row {
  hold_id: string;
  account_id: string;
  request_id: string;
  model: string;
  kind: string;
  amount: number;
  reserved_at: string;
  expires_at: string;
  process_id: string | null;
}

export const holds = defineProjection<HoldRow>({
  name: 'holds',
  table: 'holds',
  columns: `hold_id text NOT NULL, account_id text NOT NULL, request_id text NOT NULL, model text NOT NULL,
    kind text NOT NULL, amount bigint NOT NULL, reserved_at timestamptz NOT NULL, expires_at timestamptz NOT NULL`,
  addedColumns: ['process_id text'],
  indexes: ['expires_at'],
  handles: new Set(['QuotaReserved', 'ChatCharged', 'ImageCharged', 'ReservationReleased']),
  keysOf: (e) => [String(e.data.holdId)],
  evolve(_row, e) {
    if (e.type !== 'QuotaReserved') return null;
    const d = eventData<'QuotaReserved'>(e);
    return {
      hold_id: d.holdId,
      account_id: d.accountId,
      request_id: d.requestId,
      model: d.model,
      kind: d.kind,
      amount: d.amount,
      reserved_at: e.timestamp,
      expires_at: d.expiresAt,
      process_id: d.process ?? null,
    };
  },
});

/** The accounts with a hold that expired at `now` or before. */
export async function accountsWithExpired(db: Queryable, schema: string, now: Date): Promise<string[]> {
  const rows = await db.query<{ account_id: string }>(`SELECT DISTINCT account_id FROM ${q(schema, holds.table)} WHERE expires_at <= $1`, [now.toISOString()]);
  return rows.map((r) => r.account_id);
}

/**
 * The open holds' accounts whose holds were taken by a process without a live lease (in
 * `leaseTable`), with those processes: by account, the processes to release holds of.
 */
export async function orphaned(db: Queryable, schema: string, leaseTable: string, self = ''): Promise<Map<string, string[]>> {
  // A process never takes itself for dead (its lease may have lapsed while the database was away).
  const rows = await db.query<{ account_id: string; process_id: string }>(
    `SELECT DISTINCT h.account_id, h.process_id FROM ${q(schema, holds.table)} h
      WHERE h.process_id IS NOT NULL AND h.process_id <> $1
        AND NOT EXISTS (SELECT 1 FROM ${leaseTable} l WHERE l.process_id = h.process_id AND l.expires_at > now())`,
    [self],
  );
  const out = new Map<string, string[]>();
  for (const r of rows) out.set(r.account_id, [...(out.get(r.account_id) ?? []), r.process_id]);
  return out;
}

/** The open holds taken by `processId` at least `olderThanMs` ago. */
export async function ofProcess(db: Queryable, schema: string, processId: string, olderThanMs: number): Promise<Array<{ holdId: string; accountId: string }>> {
  const rows = await db.query<{ hold_id: string; account_id: string }>(
    `SELECT hold_id, account_id FROM ${q(schema, holds.table)} WHERE process_id = $1 AND reserved_at <= now() - $2::int * interval '1 millisecond'`,
    [processId, olderThanMs],
  );
  return rows.map((r) => ({ holdId: r.hold_id, accountId: r.account_id }));
}

/** Open holds, of every account. */
export async function count(db: Queryable, schema: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q(schema, holds.table)}`);
  return Number(row.n);
}
