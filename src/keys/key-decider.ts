// The API key decider: a key is issued once (hash and last 4 only), may be rotated once (replaced
// by a new key, working on until a deadline) and is revoked at most once.
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, StreamEvents } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';

export interface KeyState {
  status: 'none' | 'active' | 'revoked';
  keyId: string;
  accountId: string;
  /** Set once the key is rotated: its replacement and when the key stops working. */
  rotation?: { replacedBy: string; revokeAt: string };
}

export type KeyCommand =
  | { type: 'Issue'; keyId: string; accountId: string; name: string; hash: string; last4: string }
  | { type: 'Rotate'; replacedBy: string; revokeAt: string }
  | { type: 'Revoke'; reason: string };

export const keyDecider: Decider<KeyState, KeyCommand, StreamEvents['key']> = {
  initialState: () => ({ status: 'none', keyId: '', accountId: '' }),
  decide(c, s) {
    if (c.type === 'Issue') {
      if (s.status !== 'none') throw new DomainError('already_exists', `key ${c.keyId} exists`);
      return [{ type: 'KeyIssued', data: { keyId: c.keyId, accountId: c.accountId, name: c.name, hash: c.hash, last4: c.last4 } }];
    }
    if (s.status === 'none') throw new DomainError('not_found', 'key not found');
    if (s.status === 'revoked') throw new DomainError('conflict', `key ${s.keyId} is already revoked`);
    if (c.type === 'Rotate') {
      if (s.rotation)
        throw new DomainError('conflict', `key ${s.keyId} was already rotated (replaced by ${s.rotation.replacedBy}, working until ${s.rotation.revokeAt})`);
      return [{ type: 'KeyRotated', data: { keyId: s.keyId, accountId: s.accountId, replacedBy: c.replacedBy, revokeAt: c.revokeAt } }];
    }
    return [{ type: 'KeyRevoked', data: { keyId: s.keyId, accountId: s.accountId, reason: c.reason } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'KeyIssued') return { status: 'active', keyId: e.data.keyId, accountId: e.data.accountId };
    if (e.type === 'KeyRotated') return { ...s, rotation: { replacedBy: e.data.replacedBy, revokeAt: e.data.revokeAt } };
    if (e.type === 'KeyRevoked') return { ...s, status: 'revoked' };
    return s;
  },
};
