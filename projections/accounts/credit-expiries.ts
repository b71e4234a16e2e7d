// When each account's lots of credit expire: one row per account with the expiries still to come
// (a lot's, until CreditsExpired closes it). The sweeper asks which accounts have one due, and
// the account decider decides which lots expire (src/accounts/credit-rules.ts).
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';

export interface CreditExpiryRow extends Row {
  account_id: string;
  /** The open lots' expiries (ISO 8601), earliest first. */
  expiries: string[];
  next_expiry: string | null;
}

export const creditExpiries = defineProjection<CreditExpiryRow>({
  name: 'credit_expiries',
  table: 'credit_expiries',
  columns: `account_id text NOT NULL, expiries jsonb NOT NULL, next_expiry timestamptz`,
  indexes: ['next_expiry'],
  handles: new Set(['ExtraTokensGranted', 'CreditsExpired']),
  keysOf: (e) => [String(e.data.accountId)],
  evolve(row, e) {
    const expiries = [...(row?.expiries ?? [])];
    if (e.type === 'ExtraTokensGranted') {
      const d = eventData<'ExtraTokensGranted'>(e);
      if (!d.expiresAt) return row ?? null;
      expiries.push(d.expiresAt);
    } else {
      const gone = expiries.indexOf(eventData<'CreditsExpired'>(e).expiresAt);
      if (gone >= 0) expiries.splice(gone, 1);
    }
    expiries.sort();
    return { account_id: String(e.data.accountId), expiries, next_expiry: expiries[0] ?? null };
  },
});

/** Accounts with a lot of credit past its expiry and not closed yet. */
export async function accountsWithCreditsDue(db: Queryable, schema: string, now: Date): Promise<string[]> {
  const rows = await db.query<{ account_id: string }>(
    `SELECT account_id FROM ${q(schema, creditExpiries.table)} WHERE next_expiry <= $1 ORDER BY next_expiry LIMIT 1000`,
    [now.toISOString()],
  );
  return rows.map((r) => r.account_id);
}
