// Management keys as the session API, the operator and the key-management API use them: issued
// (the secret returned once), listed, revoked, each an event naming its actor; and the check of a
// presented secret, read from the log each time (so a revoked key stops on every gateway at once).
import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import {
  accountOfManagementSecret,
  generateManagementSecret,
  managementKeyOpenedBy,
  managementKeysDecider,
  maskManagementKey,
  type ManagementKey,
} from './management-key-decider.ts';
import { accountState } from '../accounts/index.ts';

/** How a management key is named as the actor of what it does. */
export const managementActor = (keyId: string): string => `management-key:${keyId}`;

const read = (ledger: Ledger, accountId: string) => ledger.streamState(managementKeysDecider, streams.managementKeys(accountId));

const shown = (k: ManagementKey) => ({ key_id: k.keyId, name: k.name, masked: maskManagementKey(k.last4), status: k.status, issued_at: k.issuedAt });

export async function issueManagementKey(ledger: Ledger, accountId: string, rawName: unknown, actor: string) {
  const name = rawName === undefined ? 'key manager' : rawName;
  if (typeof name !== 'string' || name.trim().length === 0 || name.length > 200)
    throw new DomainError('invalid', "'name' must be a non-empty string of at most 200 characters.", { param: 'name' });
  if (!(await accountState(ledger, accountId)).opened) throw new DomainError('not_found', `account ${accountId} not found`);
  const keyId = `mk_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  const { secret, hash, last4 } = generateManagementSecret(accountId);
  const issuedAt = new Date().toISOString();
  await ledger.command(
    managementKeysDecider,
    streams.managementKeys(accountId),
    { type: 'Issue', accountId, keyId, name, hash, last4, issuedAt },
    metadataFor(actor),
  );
  return { ...shown({ keyId, name, hash, last4, issuedAt, status: 'active' }), key: secret };
}

export async function listManagementKeys(ledger: Ledger, accountId: string) {
  return Object.values((await read(ledger, accountId)).keys).map(shown);
}

export async function revokeManagementKey(ledger: Ledger, accountId: string, keyId: string, actor: string) {
  await ledger.command(managementKeysDecider, streams.managementKeys(accountId), { type: 'Revoke', accountId, keyId }, metadataFor(actor));
}

/** The account and key a presented management secret opens now, or null (unknown, revoked, malformed). */
export async function managementKeyOf(ledger: Ledger, secret: string): Promise<{ accountId: string; keyId: string } | null> {
  const accountId = accountOfManagementSecret(secret);
  if (!accountId || !/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$/.test(accountId)) return null;
  const key = managementKeyOpenedBy(await read(ledger, accountId), secret);
  return key ? { accountId, keyId: key.keyId } : null;
}
