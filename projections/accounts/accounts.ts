// Accounts: their plan, quota (used, reserved by open holds), extra tokens and call rate.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface AccountRow extends Row {
  account_id: string;
  name: string;
  plan_id: string | null;
  plan_name: string | null;
  quota_total: number;
  quota_used: number;
  reserved: number;
  open_holds: number;
  extra_granted: number;
  extra_used: number;
  requests_per_minute: number | null;
  models: string[];
  starts_at: string | null;
  expires_at: string | null;
  opened_at: string;
}

export const accounts = defineProjection<AccountRow>({
  name: 'accounts',
  table: 'accounts',
  columns: `account_id text NOT NULL, name text NOT NULL, plan_id text, plan_name text,
    quota_total bigint NOT NULL, quota_used bigint NOT NULL, reserved bigint NOT NULL, open_holds integer NOT NULL,
    extra_granted bigint NOT NULL, extra_used bigint NOT NULL, requests_per_minute integer, models jsonb NOT NULL,
    starts_at timestamptz, expires_at timestamptz, opened_at timestamptz NOT NULL`,
  handles: new Set([
    'AccountOpened',
    'SubscriptionStarted',
    'SubscriptionRenewed',
    'ExtraTokensGranted',
    'QuotaReserved',
    'ChatCharged',
    'ImageCharged',
    'ReservationReleased',
    'ChargeAdjusted',
    'PaymentRefunded',
    'CreditsExpired',
  ]),
  keysOf: (e) => [String(e.data.accountId)],
  evolve(row, e) {
    if (e.type === 'AccountOpened') {
      const d = eventData<'AccountOpened'>(e);
      return {
        account_id: d.accountId,
        name: d.name,
        plan_id: null,
        plan_name: null,
        quota_total: 0,
        quota_used: 0,
        reserved: 0,
        open_holds: 0,
        extra_granted: 0,
        extra_used: 0,
        requests_per_minute: null,
        models: [],
        starts_at: null,
        expires_at: null,
        opened_at: e.timestamp,
      };
    }
    if (!row) return null;
    switch (e.type) {
      case 'SubscriptionStarted':
      case 'SubscriptionRenewed': {
        const d = eventData<'SubscriptionStarted'>(e);
        return {
          ...row,
          plan_id: d.planId,
          plan_name: d.planName,
          quota_total: d.quota,
          quota_used: 0,
          requests_per_minute: d.requestsPerMinute,
          models: d.models,
          starts_at: d.startsAt,
          expires_at: d.expiresAt,
        };
      }
      case 'ExtraTokensGranted':
        return { ...row, extra_granted: row.extra_granted + eventData<'ExtraTokensGranted'>(e).amount };
      case 'QuotaReserved':
        return { ...row, reserved: row.reserved + eventData<'QuotaReserved'>(e).amount, open_holds: row.open_holds + 1 };
      case 'ReservationReleased':
        return { ...row, reserved: row.reserved - eventData<'ReservationReleased'>(e).amount, open_holds: row.open_holds - 1 };
      case 'ChatCharged':
      case 'ImageCharged': {
        const d = eventData<'ChatCharged'>(e);
        return {
          ...row,
          reserved: row.reserved - d.reserved,
          open_holds: row.open_holds - 1,
          quota_used: row.quota_used + d.fromQuota,
          extra_used: row.extra_used + d.fromExtra,
        };
      }
      case 'ChargeAdjusted': {
        const d = eventData<'ChargeAdjusted'>(e);
        return {
          ...row,
          quota_used: row.quota_used + d.quotaDelta,
          extra_used: row.extra_used + d.extraDelta,
          extra_granted: row.extra_granted + (d.extraCredited ?? 0),
        };
      }
      case 'CreditsExpired':
        // Expired tokens leave the extra tokens granted, as a refund's withdrawn ones do.
        return { ...row, extra_granted: row.extra_granted - eventData<'CreditsExpired'>(e).tokens };
      case 'PaymentRefunded': {
        // A refund withdraws the unused tokens its money bought, from the pool they were granted to.
        const d = eventData<'PaymentRefunded'>(e);
        return d.pool === 'main'
          ? { ...row, quota_total: row.quota_total - d.tokensWithdrawn }
          : { ...row, extra_granted: row.extra_granted - d.tokensWithdrawn };
      }
      default:
        return row;
    }
  },
});

export async function byId(db: Queryable, schema: string, accountId: string): Promise<AccountRow | null> {
  const [row] = await db.query<Row>(`SELECT * FROM ${q(schema, accounts.table)} WHERE account_id = $1`, [accountId]);
  return row ? fromTable<AccountRow>(row) : null;
}

/** One page of accounts in id order: those after `after` (an account id), at most `limit`. */
export async function page(db: Queryable, schema: string, opts: { limit: number; after?: string }): Promise<AccountRow[]> {
  const rows =
    opts.after === undefined
      ? await db.query<Row>(`SELECT * FROM ${q(schema, accounts.table)} ORDER BY key LIMIT $1`, [opts.limit])
      : await db.query<Row>(`SELECT * FROM ${q(schema, accounts.table)} WHERE key > $1 ORDER BY key LIMIT $2`, [opts.after, opts.limit]);
  return rows.map((r) => fromTable<AccountRow>(r));
}
