// Management keys: an account's keys for its own software that issues API keys to its users. A
// management key creates, lists, updates and revokes the account's API keys over HTTP and can
// call no model (its secret has another prefix, which /v1's model routes refuse). The account's
// management keys live on one stream; the secret names the account (hex), so a gateway finds the
// stream from the secret alone and reads it fresh: a revocation holds on every gateway at once.
import { randomBytes } from 'node:crypto';
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, StreamEvents } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { hashKey, lastFour, sameHash } from './secrets.ts';

export const MANAGEMENT_KEY_PREFIX = 'sk_mgmt_';
const SHAPE = /^sk_mgmt_([0-9a-f]{2,200})_([A-Za-z0-9]{43})$/;
/** Active management keys an account may hold (each is a standing power over its keys). */
export const MAX_MANAGEMENT_KEYS = 10;

export interface ManagementKey {
  keyId: string;
  name: string;
  hash: string;
  last4: string;
  issuedAt: string;
  status: 'active' | 'revoked';
}

export interface ManagementKeysState {
  keys: Record<string, ManagementKey>;
}

export type ManagementKeysCommand =
  | { type: 'Issue'; accountId: string; keyId: string; name: string; hash: string; last4: string; issuedAt: string }
  | { type: 'Revoke'; accountId: string; keyId: string };

export const managementKeysDecider: Decider<ManagementKeysState, ManagementKeysCommand, StreamEvents['managementKeys']> = {
  initialState: () => ({ keys: {} }),
  decide(c, s) {
    if (c.type === 'Issue') {
      if (s.keys[c.keyId]) throw new DomainError('already_exists', `management key ${c.keyId} exists`);
      if (Object.values(s.keys).filter((k) => k.status === 'active').length >= MAX_MANAGEMENT_KEYS)
        throw new DomainError('conflict', `an account holds at most ${MAX_MANAGEMENT_KEYS} active management keys: revoke one first`);
      const { type: _, ...data } = c;
      return [{ type: 'ManagementKeyIssued', data }];
    }
    const k = s.keys[c.keyId];
    if (!k) throw new DomainError('not_found', `management key ${c.keyId} not found in account ${c.accountId}`, { param: 'key_id' });
    if (k.status === 'revoked') return [];
    return [{ type: 'ManagementKeyRevoked', data: { accountId: c.accountId, keyId: c.keyId } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'ManagementKeyIssued') {
      const { accountId: _, ...k } = e.data;
      return { keys: { ...s.keys, [k.keyId]: { ...k, status: 'active' } } };
    }
    if (e.type === 'ManagementKeyRevoked' && s.keys[e.data.keyId])
      return { keys: { ...s.keys, [e.data.keyId]: { ...s.keys[e.data.keyId], status: 'revoked' } } };
    return s;
  },
};

/** A new secret for the account: the prefix, the account id in hex, 43 random characters. */
export function generateManagementSecret(accountId: string): { secret: string; hash: string; last4: string } {
  const secret = `${MANAGEMENT_KEY_PREFIX}${Buffer.from(accountId, 'utf8').toString('hex')}_${randomBytes(32).toString('base64url').replace(/[-_]/g, 'x')}`;
  return { secret, hash: hashKey(secret), last4: lastFour(secret) };
}

/** The account a well-formed management secret names, or null. */
export function accountOfManagementSecret(secret: string): string | null {
  const m = SHAPE.exec(secret);
  return m ? Buffer.from(m[1], 'hex').toString('utf8') : null;
}

/** The active key of this state that the secret opens, or null. */
export function managementKeyOpenedBy(s: ManagementKeysState, secret: string): ManagementKey | null {
  const hash = hashKey(secret);
  return Object.values(s.keys).find((k) => k.status === 'active' && sameHash(k.hash, hash)) ?? null;
}

export const maskManagementKey = (last4: string): string => `${MANAGEMENT_KEY_PREFIX}…${last4}`;
