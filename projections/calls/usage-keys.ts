// Usage per account, UTC day and API key: calls, tokens, images, billed and adjusted. An
// adjustment counts for the key and the day of the charge it corrects; one from before
// adjustments named their key is counted under the key id '' (unknown).
import type { Queryable } from '../../src/eventstore/db.ts';
import { dayOf, defineProjection, type Row } from '../runner/row-projection.ts';
import { countCharge, noUsage, type UsageCounts } from './usage-counts.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface KeyUsageRow extends Row, UsageCounts {
  account_id: string;
  day: string;
  key_id: string;
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
  evolve: (row, e, key) => countCharge(row ?? newRow(key), e),
});

// Account ids, days and key ids cannot hold '|'.
function newRow(key: string): KeyUsageRow {
  const [account_id, day, key_id] = key.split('|');
  return { account_id, day, key_id, ...noUsage() };
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
