// A member's keys: the operator's key functions (src/keys/key-controls.ts, the ledger's
// issueKey/revokeKey) used for one account only, with the member as the actor.
import type { Ledger } from '../ledger/ledger.ts';
import type { ModelCatalog } from '../catalogue/index.ts';
import { DomainError } from '../ledger/errors.ts';
import { readKey } from './key-rotation.ts';
import { parseKeyControlsPatch, setKeyControls } from './key-controls.ts';
import { issueKey, revokeKey } from './commands.ts';

/** A new key for an application: its name and controls checked first, its secret returned once. */
export async function createKey(ledger: Ledger, catalog: ModelCatalog, accountId: string, body: Record<string, unknown>, actor: string) {
  const patch = parseKeyControlsPatch(body);
  const name = patch.name ?? 'default';
  const key = await issueKey(ledger, accountId, name, actor);
  try {
    const set = await setKeyControls(ledger, catalog, key.keyId, { ...patch, name }, actor, { accountId });
    return { ...key, controls: set.controls };
  } catch (err) {
    // Controls the plan refuses (a model outside it, an expiry passed): the key never works.
    await revokeKey(ledger, key.keyId, 'controls_refused', actor).catch(() => undefined);
    throw err;
  }
}

/** Revokes a key of this account (a key of another account is as unknown as none). */
export async function revokeAccountKey(ledger: Ledger, accountId: string, keyId: string, actor: string) {
  const key = await readKey(ledger, keyId);
  if (key.status === 'none' || key.accountId !== accountId)
    throw new DomainError('not_found', `key ${keyId} not found in account ${accountId}`, { param: 'key_id' });
  await revokeKey(ledger, keyId, 'revoked_by_member', actor);
}
