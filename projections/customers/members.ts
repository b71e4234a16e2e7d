// Members and sessions of the customers' side, for the lookups by address: which accounts a
// person belongs to or is invited to (at sign-in) and which sessions they have open.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface MembershipRow extends Row {
  account_id: string;
  member_id: string;
  email: string;
  role: string;
  status: 'invited' | 'active';
  since: string;
}

export const memberships = defineProjection<MembershipRow>({
  name: 'memberships',
  table: 'memberships',
  columns: `account_id text NOT NULL, member_id text NOT NULL, email text NOT NULL, role text NOT NULL, status text NOT NULL, since timestamptz NOT NULL`,
  indexes: ['email', 'account_id'],
  handles: new Set(['MemberInvited', 'MemberJoined', 'MemberRoleChanged', 'MemberRemoved']),
  keysOf: (e) => [`${String(e.data.accountId)}|${String(e.data.memberId)}`],
  evolve(row, e) {
    if (e.type === 'MemberRemoved') return null;
    if (e.type === 'MemberRoleChanged') return row ? { ...row, role: eventData<'MemberRoleChanged'>(e).to } : null;
    const d = eventData<'MemberInvited'>(e);
    const status = e.type === 'MemberJoined' ? 'active' : 'invited';
    return { account_id: d.accountId, member_id: d.memberId, email: d.email, role: d.role, status, since: e.timestamp };
  },
});

export interface SessionRow extends Row {
  session_id: string;
  email: string;
  method: string;
  started_at: string;
  expires_at: string;
}

/** Open sessions only: an ended one is deleted. */
export const sessions = defineProjection<SessionRow>({
  name: 'sessions',
  table: 'sessions',
  columns: `session_id text NOT NULL, email text NOT NULL, method text NOT NULL, started_at timestamptz NOT NULL, expires_at timestamptz NOT NULL`,
  indexes: ['email'],
  handles: new Set(['SessionStarted', 'SessionEnded']),
  keysOf: (e) => [String(e.data.sessionId)],
  evolve(_row, e) {
    if (e.type === 'SessionEnded') return null;
    const d = eventData<'SessionStarted'>(e);
    return { session_id: d.sessionId, email: d.email, method: d.method, started_at: e.timestamp, expires_at: d.expiresAt };
  },
});

/** The accounts an address belongs to or is invited to. */
export async function membershipsOf(db: Queryable, schema: string, email: string): Promise<MembershipRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, memberships.table)} WHERE email = $1 ORDER BY account_id`, [email]);
  return rows.map((r) => fromTable<MembershipRow>(r));
}

/** An address's sessions not ended and not expired at `now`, newest first. */
export async function openSessionsOf(db: Queryable, schema: string, email: string, now: Date): Promise<SessionRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, sessions.table)} WHERE email = $1 AND expires_at > $2 ORDER BY started_at DESC`, [
    email,
    now.toISOString(),
  ]);
  return rows.map((r) => fromTable<SessionRow>(r));
}
