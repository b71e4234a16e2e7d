// The account notices to email, one row each: a balance alert crossed, or an auto top-up that
// failed. Emailed once NoticeEmailed names it. The rows not emailed yet are the notice mailer's work
// (src/customers/notice-mailer.ts); an account's recent alerts are what GET /v1/balance-alerts lists.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface NoticeRow extends Row {
  notice_id: string;
  account_id: string;
  kind: 'balance_alert' | 'top_up_failed';
  /** Where the event that raised it is in the log: notices are emailed in that order. */
  source_position: number;
  raised_at: string;
  /** A balance alert's threshold and the tokens left after the charge that crossed it. */
  threshold_tokens: number | null;
  tokens_left: number | null;
  /** A failed top-up's reason. */
  reason: string | null;
  emailed_at: string | null;
  recipients: number | null;
}

export const notices = defineProjection<NoticeRow>({
  name: 'account_notices',
  table: 'account_notices',
  columns: `notice_id text NOT NULL, account_id text NOT NULL, kind text NOT NULL, source_position bigint NOT NULL, raised_at timestamptz NOT NULL,
    threshold_tokens bigint, tokens_left bigint, reason text, emailed_at timestamptz, recipients integer`,
  indexes: ['account_id, raised_at', 'source_position WHERE emailed_at IS NULL'],
  handles: new Set(['BalanceAlertCrossed', 'AutoTopUpFailed', 'NoticeEmailed']),
  keysOf: (e) => {
    const d = e.data as { alertId?: string; topUpId?: string; noticeId?: string };
    return [(d.alertId ?? d.topUpId ?? d.noticeId)!];
  },
  evolve(row, e) {
    const raised = { source_position: e.position, raised_at: e.timestamp, emailed_at: null, recipients: null };
    if (e.type === 'BalanceAlertCrossed') {
      const d = eventData<'BalanceAlertCrossed'>(e);
      return {
        notice_id: d.alertId,
        account_id: d.accountId,
        kind: 'balance_alert',
        threshold_tokens: d.thresholdTokens,
        tokens_left: d.tokensLeft,
        reason: null,
        ...raised,
      };
    }
    if (e.type === 'AutoTopUpFailed') {
      const d = eventData<'AutoTopUpFailed'>(e);
      return { notice_id: d.topUpId, account_id: d.accountId, kind: 'top_up_failed', threshold_tokens: null, tokens_left: null, reason: d.reason, ...raised };
    }
    return row ? { ...row, emailed_at: e.timestamp, recipients: eventData<'NoticeEmailed'>(e).recipients } : null;
  },
});

const table = (schema: string) => q(schema, notices.table);

/** Notices still to email, in the order they were raised. */
export async function unmailedNotices(db: Queryable, schema: string, limit: number): Promise<NoticeRow[]> {
  return (await db.query(`SELECT * FROM ${table(schema)} WHERE emailed_at IS NULL ORDER BY source_position LIMIT $1`, [limit])).map((r) =>
    fromTable<NoticeRow>(r),
  );
}

/** An account's notices of one kind, newest first. */
export async function noticesOf(db: Queryable, schema: string, accountId: string, kind: NoticeRow['kind'], limit: number): Promise<NoticeRow[]> {
  return (
    await db.query(`SELECT * FROM ${table(schema)} WHERE account_id = $1 AND kind = $2 ORDER BY raised_at DESC, notice_id DESC LIMIT $3`, [
      accountId,
      kind,
      limit,
    ])
  ).map((r) => fromTable<NoticeRow>(r));
}
