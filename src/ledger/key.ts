// The API key decider: a key is issued once (hash and last 4 only) and revoked at most once.
import type { Decider } from './decider.ts';
import type { DomainEvent } from './events.ts';
import { DomainError } from './errors.ts';

export interface KeyState {
  status: 'none' | 'active' | 'revoked';
  keyId: string;
  accountId: string;
}

export type KeyCommand =
  | { type: 'Issue'; keyId: string; accountId: string; name: string; hash: string; last4: string }
  | { type: 'Revoke'; reason: string };

export const keyDecider: Decider<KeyState, KeyCommand> = {
  initialState: () => ({ status: 'none', keyId: '', accountId: '' }),
  decide(c, s) {
    if (c.type === 'Issue') {
      if (s.status !== 'none') throw new DomainError('already_exists', `key ${c.keyId} exists`);
      return [{ type: 'KeyIssued', data: { keyId: c.keyId, accountId: c.accountId, name: c.name, hash: c.hash, last4: c.last4 } }];
    }
    if (s.status === 'none') throw new DomainError('not_found', 'key not found');
    if (s.status === 'revoked') throw new DomainError('conflict', `key ${s.keyId} is already revoked`);
    return [{ type: 'KeyRevoked', data: { keyId: s.keyId, accountId: s.accountId, reason: c.reason } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'KeyIssued') return { status: 'active', keyId: e.data.keyId, accountId: e.data.accountId };
    if (e.type === 'KeyRevoked') return { ...s, status: 'revoked' };
    return s;
  },
};
