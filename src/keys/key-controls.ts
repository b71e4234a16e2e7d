// An operator's per-key controls and key rotation. The controls live on the ACCOUNT stream
// (KeyControlsSet), so every hold is decided with them (src/accounts/account-decider.ts); a rotation
// issues a new key with the same controls and spend, and gives the old key a deadline
// (KeyRotated on its own stream) after which it is revoked.
import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import {
  accountCommand,
  accountState,
  defaultKeyControls,
  isLimitPeriod,
  isModelEnabled,
  keyControlsOf,
  keyStanding,
  LIMIT_PERIODS,
  MAX_KEY_LIMIT,
  type SpendLimit,
} from '../accounts/index.ts';
import { DomainError } from '../ledger/errors.ts';
import type { KeyControls } from '../ledger/events.ts';
import { generateKeySecret, hashKey, lastFour, maskKey } from './secrets.ts';
import type { ModelCatalog } from '../catalogue/index.ts';
import * as keys from '../../projections/keys/keys.ts';
import { readKey, revokeRotatedKey } from './key-rotation.ts';
import { keyCommand, revokeKey } from './commands.ts';

/** A request's change of a key's controls: each field left out keeps its value; null removes it. */
export interface KeyControlsPatch {
  name?: string;
  spendLimit?: SpendLimit | null;
  models?: string[] | null;
  expiresAt?: string | null;
}

/** The longest grace period of a rotation: 90 days. */
export const MAX_GRACE_SECONDS = 90 * 86_400;
const MAX_KEY_MODELS = 500;
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const invalid = (message: string, param: string) => new DomainError('invalid', message, { param });

/** Reads a PATCH body (snake_case, as the API documents it); throws a 400 naming the field, nothing written. */
export function parseKeyControlsPatch(body: Record<string, unknown>): KeyControlsPatch {
  const known = new Set(['name', 'spend_limit', 'models', 'expires_at']);
  for (const k of Object.keys(body))
    if (!known.has(k)) throw invalid(`Unknown field '${k.slice(0, 100)}': a key's controls are name, spend_limit, models and expires_at.`, k.slice(0, 100));
  const out: KeyControlsPatch = {};
  if (body.name !== undefined) {
    if (typeof body.name !== 'string' || body.name.trim().length === 0 || body.name.length > 200)
      throw invalid("'name' must be a non-empty string of at most 200 characters.", 'name');
    out.name = body.name;
  }
  if (body.spend_limit !== undefined) {
    const l = body.spend_limit;
    if (l === null) out.spendLimit = null;
    else {
      if (typeof l !== 'object' || Array.isArray(l))
        throw invalid('\'spend_limit\' must be {"tokens": N, "period": "none|daily|weekly|monthly"}, or null to remove it.', 'spend_limit');
      const { tokens, period, ...rest } = l as Record<string, unknown>;
      if (Object.keys(rest).length)
        throw invalid(`Unknown field 'spend_limit.${Object.keys(rest)[0].slice(0, 100)}': a spend limit is tokens and period.`, 'spend_limit');
      if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0 || tokens > MAX_KEY_LIMIT) {
        throw invalid(`'spend_limit.tokens' must be a whole number of billed tokens from 0 to ${MAX_KEY_LIMIT}.`, 'spend_limit.tokens');
      }
      if (!isLimitPeriod(period))
        throw invalid(`'spend_limit.period' must be one of ${LIMIT_PERIODS.join(', ')} (UTC periods; weekly from Monday 00:00).`, 'spend_limit.period');
      out.spendLimit = { tokens, period };
    }
  }
  if (body.models !== undefined) {
    const m = body.models;
    if (m === null) out.models = null;
    else if (!Array.isArray(m) || m.length === 0 || m.length > MAX_KEY_MODELS || !m.every((x) => typeof x === 'string' && x.length > 0 && x.length <= 100)) {
      throw invalid(`'models' must list 1 to ${MAX_KEY_MODELS} model ids, or be null for every model of the plan.`, 'models');
    } else out.models = m as string[];
  }
  if (body.expires_at !== undefined) {
    const e = body.expires_at;
    if (e === null) out.expiresAt = null;
    else {
      const t = typeof e === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(e) ? Date.parse(e) : NaN;
      if (Number.isNaN(t) || t > LATEST)
        throw invalid("'expires_at' must be an ISO 8601 time (e.g. 2030-01-31T00:00:00Z), or null for no expiry.", 'expires_at');
      out.expiresAt = new Date(t).toISOString();
    }
  }
  return out;
}

/** The key, if it exists (and belongs to `accountId` when given): else a 404 that says nothing of other accounts. */
async function requireKey(ledger: Ledger, keyId: string, accountId?: string) {
  const key = await readKey(ledger, keyId);
  if (key.status === 'none' || (accountId !== undefined && key.accountId !== accountId)) {
    throw new DomainError('not_found', `key ${keyId} not found${accountId !== undefined ? ` in account ${accountId}` : ''}`, { param: 'key_id' });
  }
  return key;
}

/**
 * Applies a change of a key's controls. Model ids and aliases are checked against the price list
 * (priced, active, routed) and the plan, and stored as ids; an expiry must lie in the future.
 */
export async function setKeyControls(
  ledger: Ledger,
  catalog: ModelCatalog,
  keyId: string,
  patch: KeyControlsPatch,
  actor: string,
  opts: { accountId?: string; now?: Date } = {},
) {
  const key = await requireKey(ledger, keyId, opts.accountId);
  if (key.status === 'revoked') throw new DomainError('conflict', `key ${keyId} is revoked: its controls can no longer change`);
  const now = opts.now ?? new Date();
  // Decided on the account's stream as it is now, not as this process last saw it.
  const state = await accountState(ledger, key.accountId);
  let models = patch.models;
  if (models) {
    const ids: string[] = [];
    for (const m of models) {
      const model = catalog.resolve(m);
      if (!model)
        throw invalid(`Unknown model '${m}' in 'models': it is not priced, not active or not routed (GET /admin/v1/models lists the models).`, 'models');
      if (!isModelEnabled(state, model.id)) throw invalid(`Model '${m}' is not in the account's plan: a key's models are a subset of its plan's.`, 'models');
      if (!ids.includes(model.id)) ids.push(model.id);
    }
    models = ids;
  }
  if (patch.expiresAt && Date.parse(patch.expiresAt) <= now.getTime())
    throw invalid(`'expires_at' must be in the future (it is now ${now.toISOString()}).`, 'expires_at');
  const current = keyControlsOf(state, keyId) ?? defaultKeyControls(key.name);
  const controls: KeyControls = {
    name: patch.name ?? current.name,
    spendLimit: patch.spendLimit !== undefined ? patch.spendLimit : current.spendLimit,
    models: models !== undefined ? models : current.models,
    expiresAt: patch.expiresAt !== undefined ? patch.expiresAt : current.expiresAt,
  };
  const r = await accountCommand(ledger, key.accountId, { type: 'SetKeyControls', keyId, controls, now, issuedName: key.name }, metadataFor(actor));
  return { accountId: key.accountId, controls, changed: r.events.length ? (r.events[0].data as { changed: string[] }).changed : [] };
}

/**
 * Rotates a key: a new key with the same name, controls and spend (its secret returned once),
 * and the old key working on for `graceSeconds`, then revoked (reason 'rotated'). The new key is
 * issued first but its secret is only shown once every step is recorded: if the old key cannot
 * be rotated (it was revoked or rotated meanwhile), the new key is revoked and nothing is shown.
 */
export async function rotateKey(ledger: Ledger, keyId: string, graceSeconds: number, actor: string, opts: { accountId?: string; now?: Date } = {}) {
  const old = await requireKey(ledger, keyId, opts.accountId);
  if (old.status === 'revoked') throw new DomainError('conflict', `key ${keyId} is revoked: only an active key can be rotated`);
  if (old.rotation) throw new DomainError('conflict', `key ${keyId} was already rotated (replaced by ${old.rotation.replacedBy})`);
  const now = opts.now ?? new Date();
  const revokeAt = new Date(now.getTime() + graceSeconds * 1000).toISOString();
  const md = metadataFor(actor);
  const state = await accountState(ledger, old.accountId);
  const controls = keyControlsOf(state, keyId) ?? defaultKeyControls(old.name);
  // An expiry already passed is not carried over: the new key would be born expired.
  const carried: KeyControls = { ...controls, expiresAt: controls.expiresAt && Date.parse(controls.expiresAt) > now.getTime() ? controls.expiresAt : null };
  const secret = generateKeySecret();
  const newKeyId = `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  await keyCommand(
    ledger,
    newKeyId,
    { type: 'Issue', keyId: newKeyId, accountId: old.accountId, name: carried.name, hash: hashKey(secret), last4: lastFour(secret) },
    md,
  );
  try {
    await accountCommand(
      ledger,
      old.accountId,
      { type: 'SetKeyControls', keyId: newKeyId, controls: carried, now, rotatedFrom: keyId, issuedName: carried.name },
      md,
    );
    await keyCommand(ledger, keyId, { type: 'Rotate', replacedBy: newKeyId, revokeAt }, md);
  } catch (err) {
    await revokeKey(ledger, newKeyId, 'rotation_failed', actor).catch(() => undefined);
    throw err;
  }
  // No grace: the old key is revoked at once.
  if (graceSeconds === 0) await revokeRotatedKey(ledger, keyId).catch(() => undefined);
  return { accountId: old.accountId, keyId: newKeyId, secret, last4: lastFour(secret), replaces: keyId, revokeAt, controls: carried };
}

/** An account's keys as the admin API lists them: the key, its controls, and its period's spend. */
export async function listKeys(ledger: Ledger, accountId: string, now = new Date()) {
  await ledger.readYourWrites();
  const rows = await keys.ofAccount(ledger.readModels.db, ledger.rmSchema, accountId);
  const state = await accountState(ledger, accountId);
  return rows.map((k) => {
    const controls = keyControlsOf(state, k.key_id);
    const standing = keyStanding(state, k.key_id, now);
    return {
      key_id: k.key_id,
      name: k.name,
      masked: maskKey(k.last4),
      status: k.status,
      issued_at: k.issued_at,
      revoked_at: k.revoked_at,
      revoke_reason: k.revoke_reason,
      last_used_at: k.last_used_at,
      spend_limit: controls?.spendLimit ?? null,
      models: controls?.models ?? null,
      expires_at: controls?.expiresAt ?? null,
      expired: !!controls?.expiresAt && now.getTime() >= Date.parse(controls.expiresAt),
      spend: {
        period: standing.limit?.period ?? 'none',
        period_start: standing.periodStart,
        resets_at: standing.resetsAt,
        spent: standing.spent,
        reserved: standing.reserved,
        remaining: standing.available,
      },
      rotation: k.rotated_to ? { replaced_by: k.rotated_to, revoke_at: k.rotation_deadline } : null,
    };
  });
}
