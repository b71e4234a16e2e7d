// A rotated key's end: once its grace period is over it is revoked, by the sweeper or by the
// process that refused it. The gateway's sweeper and the admin API share this.
import type { Ledger } from '../ledger/ledger.ts';
import { fold } from '../ledger/decider.ts';
import { keyDecider, type KeyState } from './key-decider.ts';
import { DomainError } from '../ledger/errors.ts';
import { streams, type DomainEvent } from '../ledger/events.ts';
import * as keys from '../../projections/keys/keys.ts';
import { revokeKey } from './commands.ts';

/** A key as its own stream says: status, account, rotation, and the name it was issued with. */
export async function readKey(ledger: Ledger, keyId: string): Promise<KeyState & { name: string }> {
  const events = await ledger.events.readStream(streams.key(keyId));
  const state = fold(
    keyDecider,
    events.map((e) => ({ type: e.type, data: e.data }) as DomainEvent),
  );
  const issued = events.find((e) => e.type === 'KeyIssued');
  return { ...state, name: issued ? String(issued.data.name) : '' };
}

/** Revokes a rotated key whose grace period is over (the sweeper, or a process that refused it). */
export async function revokeRotatedKey(ledger: Ledger, keyId: string, now = new Date()): Promise<boolean> {
  const key = await readKey(ledger, keyId);
  if (key.status !== 'active' || !key.rotation || Date.parse(key.rotation.revokeAt) > now.getTime()) return false;
  try {
    await revokeKey(ledger, keyId, 'rotated', 'system:rotation');
    return true;
  } catch (err) {
    // Revoked meanwhile by another process: nothing left to do.
    if (err instanceof DomainError && err.code === 'conflict') return false;
    throw err;
  }
}

/** Every rotated key whose deadline has passed and that is not revoked yet. */
export async function revokeRotatedKeys(ledger: Ledger, now = new Date()): Promise<number> {
  let revoked = 0;
  for (const k of await keys.rotationsDue(ledger.readModels.db, ledger.rmSchema, now)) if (await revokeRotatedKey(ledger, k.key_id, now)) revoked++;
  return revoked;
}
