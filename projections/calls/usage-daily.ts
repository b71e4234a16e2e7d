// Usage per account, UTC day and model: calls, tokens by kind, images, billed and adjusted.
import type { Queryable } from '../../src/eventstore/db.ts';
import { dayOf, defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { countCharge, noUsage, type UsageCounts } from './usage-counts.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface UsageRow extends Row, UsageCounts {
  account_id: string;
  day: string;
  model: string;
  /** Within prompt_tokens: read from / written to the upstream's cache. Within completion_tokens: reasoning. */
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
}

export const usageDaily = defineProjection<UsageRow>({
  name: 'usage_daily',
  table: 'usage_daily',
  columns: `account_id text NOT NULL, day text NOT NULL, model text NOT NULL, requests bigint NOT NULL,
    prompt_tokens bigint NOT NULL, completion_tokens bigint NOT NULL, images bigint NOT NULL,
    billed bigint NOT NULL, adjustment bigint NOT NULL`,
  addedColumns: ['cached_tokens bigint NOT NULL DEFAULT 0', 'cache_write_tokens bigint NOT NULL DEFAULT 0', 'reasoning_tokens bigint NOT NULL DEFAULT 0'],
  indexes: ['account_id, day'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ChargeAdjusted']),
  keysOf(e) {
    const d = e.data as { accountId: string; model: string; chargedAt?: string };
    // An adjustment belongs to the day of the charge it corrects.
    const day = dayOf(e.type === 'ChargeAdjusted' ? String(d.chargedAt) : e.timestamp);
    return [`${d.accountId}|${day}|${d.model}`];
  },
  evolve(row, e, key) {
    const r = countCharge(row ?? newUsageRow(key), e);
    if (e.type !== 'ChatCharged') return r;
    const d = eventData<'ChatCharged'>(e);
    return {
      ...r,
      cached_tokens: r.cached_tokens + (d.cachedTokens ?? 0),
      cache_write_tokens: r.cache_write_tokens + (d.cacheWriteTokens ?? 0),
      reasoning_tokens: r.reasoning_tokens + (d.reasoningTokens ?? 0),
    };
  },
});

// Account ids and days cannot hold '|'; model ids may, so the model is everything after the second.
function newUsageRow(key: string): UsageRow {
  const a = key.indexOf('|');
  const b = key.indexOf('|', a + 1);
  return {
    account_id: key.slice(0, a),
    day: key.slice(a + 1, b),
    model: key.slice(b + 1),
    ...noUsage(),
    cached_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
  };
}

/** An account's usage on the days `from` to `to` (YYYY-MM-DD, both included), by day and model. */
export async function between(db: Queryable, schema: string, accountId: string, from: string, to: string): Promise<UsageRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, usageDaily.table)} WHERE account_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, model`, [
    accountId,
    from,
    to,
  ]);
  return rows.map((r) => fromTable<UsageRow>(r));
}
