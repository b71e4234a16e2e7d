// The commands of API keys, sent through the base ledger with the key decider.
import { randomUUID } from 'node:crypto';
import type { EventMetadata } from '../eventstore/port.ts';
import { DomainError } from '../ledger/errors.ts';
import { streams } from '../ledger/events.ts';
import { metadataFor, requireId, type Ledger } from '../ledger/ledger.ts';
import { accountState } from '../accounts/index.ts';
import { keyDecider, type KeyCommand } from './key-decider.ts';
import { generateKeySecret, hashKey, lastFour } from './secrets.ts';

/** A key command through the key decider (issueKey is the way to issue one with a fresh secret). */
export const keyCommand = (ledger: Ledger, keyId: string, command: KeyCommand, md: EventMetadata) =>
  ledger.command(keyDecider, streams.key(keyId), command, md);

/** Issues a key on an open account; the secret is returned once and stored only as its hash. */
export async function issueKey(ledger: Ledger, accountId: string, name: string, actor: string): Promise<{ keyId: string; secret: string; last4: string }> {
  const acct = await accountState(ledger, accountId);
  if (!acct.opened) throw new DomainError('not_found', `account ${accountId} not found`);
  const secret = generateKeySecret();
  const keyId = `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  await keyCommand(ledger, keyId, { type: 'Issue', keyId, accountId, name, hash: hashKey(secret), last4: lastFour(secret) }, metadataFor(actor));
  return { keyId, secret, last4: lastFour(secret) };
}

export function revokeKey(ledger: Ledger, keyId: string, reason: string, actor: string) {
  requireId(keyId, 'key_id');
  return keyCommand(ledger, keyId, { type: 'Revoke', reason }, metadataFor(actor));
}
