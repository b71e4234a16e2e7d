// API keys: one row per key, its status and when it was last used, its expiry and its rotation.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface KeyRow extends Row {
  key_id: string;
  account_id: string;
  name: string;
  hash: string;
  last4: string;
  status: 'active' | 'revoked';
  issued_at: string;
  revoked_at: string | null;
  revoke_reason: string | null;
  last_used_at: string | null;
  /** The key's own expiry (KeyControlsSet); null: none. */
  expires_at: string | null;
  /** Set once the key is rotated: its replacement, and when it stops working (then it is revoked). */
  rotated_to: string | null;
  rotation_deadline: string | null;
}

export const keys = defineProjection<KeyRow>({
  name: 'keys',
  table: 'keys',
  columns: `key_id text NOT NULL, account_id text NOT NULL, name text NOT NULL, hash text NOT NULL UNIQUE,
    last4 text NOT NULL, status text NOT NULL, issued_at timestamptz NOT NULL, revoked_at timestamptz,
    revoke_reason text, last_used_at timestamptz`,
  // Null is right for every key from before keys had controls and rotations.
  addedColumns: ['expires_at timestamptz', 'rotated_to text', 'rotation_deadline timestamptz'],
  indexes: ['account_id'],
  handles: new Set(['KeyIssued', 'KeyRevoked', 'ChatCharged', 'ImageCharged', 'KeyControlsSet', 'KeyRotated']),
  keysOf: (e) => [String(e.data.keyId)],
  evolve(row, e) {
    if (e.type === 'KeyIssued') {
      const d = eventData<'KeyIssued'>(e);
      return {
        key_id: d.keyId,
        account_id: d.accountId,
        name: d.name,
        hash: d.hash,
        last4: d.last4,
        status: 'active',
        issued_at: e.timestamp,
        revoked_at: null,
        revoke_reason: null,
        last_used_at: null,
        expires_at: null,
        rotated_to: null,
        rotation_deadline: null,
      };
    }
    if (!row) return null;
    if (e.type === 'KeyRevoked') return { ...row, status: 'revoked', revoked_at: e.timestamp, revoke_reason: eventData<'KeyRevoked'>(e).reason };
    if (e.type === 'KeyControlsSet') {
      const d = eventData<'KeyControlsSet'>(e);
      return { ...row, name: d.name, expires_at: d.expiresAt };
    }
    if (e.type === 'KeyRotated') {
      const d = eventData<'KeyRotated'>(e);
      return { ...row, rotated_to: d.replacedBy, rotation_deadline: d.revokeAt };
    }
    return { ...row, last_used_at: e.timestamp };
  },
});

/** The key whose secret has this hash, revoked or not. */
export async function byHash(db: Queryable, schema: string, hash: string): Promise<KeyRow | null> {
  const [row] = await db.query<Row>(`SELECT * FROM ${q(schema, keys.table)} WHERE hash = $1`, [hash]);
  return row ? fromTable<KeyRow>(row) : null;
}

/** An account's keys, in the order they were issued. */
export async function ofAccount(db: Queryable, schema: string, accountId: string): Promise<KeyRow[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${q(schema, keys.table)} WHERE account_id = $1 ORDER BY issued_at`, [accountId]);
  return rows.map((r) => fromTable<KeyRow>(r));
}

/** One key by id, or null. */
export async function byId(db: Queryable, schema: string, keyId: string): Promise<KeyRow | null> {
  const [row] = await db.query<Row>(`SELECT * FROM ${q(schema, keys.table)} WHERE key_id = $1`, [keyId]);
  return row ? fromTable<KeyRow>(row) : null;
}

/** Rotated keys still active whose deadline has passed at `now`: to be revoked (reason 'rotated'). */
export async function rotationsDue(db: Queryable, schema: string, now: Date): Promise<Array<{ key_id: string; account_id: string }>> {
  return db.query<{ key_id: string; account_id: string }>(
    `SELECT key_id, account_id FROM ${q(schema, keys.table)} WHERE status = 'active' AND rotation_deadline IS NOT NULL AND rotation_deadline <= $1 ORDER BY key_id`,
    [now.toISOString()],
  );
}
