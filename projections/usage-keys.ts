// Usage per account, UTC day and API key: calls, tokens, images, billed and adjusted. An
// adjustment counts for the key and the day of the charge it corrects; one from before
// adjustments named their key is counted under the key id '' (unknown).
import type { Queryable } from '../src/eventstore/db.ts';
import { dayOf, defineProjection, eventData, type Row } from './row-projection.ts';
import { fromTable, q } from './sql.ts';

export interface KeyUsageRow extends Row {
  account_id: string;
  day: string;
  key_id: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  images: number;
  billed: number;
  adjustment: number;
}

export const usageKeys = defineProjection<KeyUsageRow>({
  name: 'usage_keys',
  table: 'usage_keys',
  columns: `account_id text NOT NULL, day text NOT NULL, key_id text NOT NULL, requests bigint NOT NULL,
    prompt_tokens bigint NOT NULL, completion_tokens bigint NOT NULL, images bigint NOT NULL,
    billed bigint NOT NULL, adjustment bigint NOT NULL`,
  indexes: ['account_id, day'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ChargeAdjusted']),
  keysOf(e) {
    const d = e.data as { accountId: string; keyId?: string; chargedAt?: string };
    const day = dayOf(e.type === 'ChargeAdjusted' ? String(d.chargedAt) : e.timestamp);
    return [`${d.accountId}|${day}|${d.keyId ?? ''}`];
  },
  evolve(row, e, key) {
    const r = row ?? newRow(key);
    if (e.type === 'ChargeAdjusted') return { ...r, adjustment: r.adjustment + eventData<'ChargeAdjusted'>(e).delta };
    if (e.type === 'ChatCharged') {
      const d = eventData<'ChatCharged'>(e);
      return {
        ...r,
        requests: r.requests + 1,
        prompt_tokens: r.prompt_tokens + d.promptTokens,
        completion_tokens: r.completion_tokens + d.completionTokens,
        billed: r.billed + d.billed,
      };
    }
    const d = eventData<'ImageCharged'>(e);
    return { ...r, requests: r.requests + 1, images: r.images + d.images, billed: r.billed + d.billed };
  },
});

// Account ids, days and key ids cannot hold '|'.
function newRow(key: string): KeyUsageRow {
  const [account_id, day, key_id] = key.split('|');
  return { account_id, day, key_id, requests: 0, prompt_tokens: 0, completion_tokens: 0, images: 0, billed: 0, adjustment: 0 };
}

/** An account's usage on the days `from` to `to` (YYYY-MM-DD, both included), by day and key. */
export async function between(db: Queryable, schema: string, accountId: string, from: string, to: string): Promise<KeyUsageRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, usageKeys.table)} WHERE account_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, key_id`, [
    accountId,
    from,
    to,
  ]);
  return rows.map((r) => fromTable<KeyUsageRow>(r));
}
