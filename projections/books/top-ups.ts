// Auto top-ups, one row each from the charge that started it: pending until its charge succeeds or
// fails. The pending rows are the top-up runner's work (src/books/top-up-runner.ts); all of them
// are what GET /v1/auto-top-up lists.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface TopUpRow extends Row {
  top_up_id: string;
  account_id: string;
  pack_id: string;
  /** Where the charge that started it is in the log: pending top-ups are charged in that order. */
  source_position: number;
  started_at: string;
  tokens_left: number;
  threshold_tokens: number;
  status: 'pending' | 'succeeded' | 'failed';
  payment_id: string | null;
  reason: string | null;
  ended_at: string | null;
}

export const topUps = defineProjection<TopUpRow>({
  name: 'top_ups',
  table: 'top_ups',
  columns: `top_up_id text NOT NULL, account_id text NOT NULL, pack_id text NOT NULL, source_position bigint NOT NULL, started_at timestamptz NOT NULL,
    tokens_left bigint NOT NULL, threshold_tokens bigint NOT NULL, status text NOT NULL, payment_id text, reason text, ended_at timestamptz`,
  indexes: ['account_id, started_at', "source_position WHERE status = 'pending'"],
  handles: new Set(['AutoTopUpTriggered', 'AutoTopUpSucceeded', 'AutoTopUpFailed']),
  keysOf: (e) => [(e.data as { topUpId: string }).topUpId],
  evolve(row, e) {
    if (e.type === 'AutoTopUpTriggered') {
      const d = eventData<'AutoTopUpTriggered'>(e);
      return {
        top_up_id: d.topUpId,
        account_id: d.accountId,
        pack_id: d.packId,
        source_position: e.position,
        started_at: e.timestamp,
        tokens_left: d.tokensLeft,
        threshold_tokens: d.thresholdTokens,
        status: 'pending',
        payment_id: null,
        reason: null,
        ended_at: null,
      };
    }
    if (!row) return null;
    if (e.type === 'AutoTopUpSucceeded')
      return { ...row, status: 'succeeded', payment_id: eventData<'AutoTopUpSucceeded'>(e).paymentId, ended_at: e.timestamp };
    return { ...row, status: 'failed', reason: eventData<'AutoTopUpFailed'>(e).reason, ended_at: e.timestamp };
  },
});

const table = (schema: string) => q(schema, topUps.table);

/** Top-ups still to charge, in the order they started. */
export async function pendingTopUps(db: Queryable, schema: string, limit: number): Promise<TopUpRow[]> {
  return (await db.query(`SELECT * FROM ${table(schema)} WHERE status = 'pending' ORDER BY source_position LIMIT $1`, [limit])).map((r) =>
    fromTable<TopUpRow>(r),
  );
}

/** An account's top-ups, newest first. */
export async function topUpsOf(db: Queryable, schema: string, accountId: string, limit: number): Promise<TopUpRow[]> {
  return (await db.query(`SELECT * FROM ${table(schema)} WHERE account_id = $1 ORDER BY started_at DESC, top_up_id DESC LIMIT $2`, [accountId, limit])).map(
    (r) => fromTable<TopUpRow>(r),
  );
}
