// Per-key controls inside an account: a key's spend limit, model list and expiry, what it has
// spent and holds (by pool: a rotated key counts with the key it replaced), and the decision of a
// KeyControlsSet. Read by the account decider, the gateway, the admin API and the webhooks.
import { isDeepStrictEqual } from 'node:util';
import { definedOnly, type KeyControlField, type KeyControls, type StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import * as balance from './balance.ts';
import type { KeySpend } from './balance.ts';
import { isModelEnabled, requireOpen, type AccountState } from './account-state.ts';

/**
 * Sets a key's controls. `controls` is the whole set from now on (the fields not changed carry
 * their present values); nothing is appended when nothing differs. An expiry newly set must lie
 * after `now`; a model list must lie within the plan's. `rotatedFrom`: the key replaces that
 * one (its spend is counted with the old key's).
 */
export interface SetKeyControlsCommand {
  type: 'SetKeyControls';
  keyId: string;
  controls: KeyControls;
  now: Date;
  rotatedFrom?: string;
  /** The name the key was issued with: what its name is until controls are first set (for `changed`). */
  issuedName?: string;
}

/** The pool a key's spend and holds count in. */
export const keyPool = (s: AccountState, keyId: string): string => s.keys.get(keyId)?.pool ?? keyId;
export const keyControlsOf = (s: AccountState, keyId: string): KeyControls | null => s.keys.get(keyId)?.controls ?? null;
export const keySpendOf = (s: AccountState, keyId: string): KeySpend => s.keySpend.get(keyPool(s, keyId)) ?? balance.noSpend();

/** Whether the key may call the model (its own list; the plan is asked separately, isModelEnabled). */
export const isModelAllowedForKey = (s: AccountState, keyId: string, model: string): boolean => {
  const models = keyControlsOf(s, keyId)?.models;
  return !models || models.includes(model);
};

/** Whether the key has expired at `now`. */
export const isKeyExpired = (s: AccountState, keyId: string, now: Date): boolean => {
  const expiresAt = keyControlsOf(s, keyId)?.expiresAt;
  return !!expiresAt && now.getTime() >= Date.parse(expiresAt);
};

/** Tokens a new hold of this key may take now by its own limit (unbounded without one). */
export const keyAvailableTokens = (s: AccountState, keyId: string, now: Date): number =>
  balance.keyAvailableTokens(keyControlsOf(s, keyId)?.spendLimit ?? null, keySpendOf(s, keyId), now);

/** A key's standing in its period: its limit, what it spent and holds, what is left and when it resets. */
export function keyStanding(s: AccountState, keyId: string, now: Date) {
  const limit = keyControlsOf(s, keyId)?.spendLimit ?? null;
  const spend = keySpendOf(s, keyId);
  const period = limit?.period ?? 'none';
  return {
    limit,
    spent: balance.spentInPeriod(spend, period, now),
    reserved: spend.reserved,
    available: limit ? balance.keyAvailableTokens(limit, spend, now) : null,
    periodStart: balance.periodOf(period, now).start?.toISOString() ?? null,
    resetsAt: balance.periodOf(period, now).end?.toISOString() ?? null,
  };
}

/** The refusal of a hold that does not fit in the key's limit: names the limit and when it resets. */
export function keyLimitExceeded(s: AccountState, keyId: string, now: Date, needed: number): DomainError {
  const k = keyStanding(s, keyId, now);
  const limit = k.limit!;
  const per = limit.period === 'none' ? 'in all' : `per ${limit.period === 'daily' ? 'day' : limit.period === 'weekly' ? 'week' : 'month'} (UTC)`;
  return new DomainError('key_limit_exceeded', `this key's spend limit of ${limit.tokens} billed tokens ${per} is reached`, {
    keyId,
    limit: limit.tokens,
    period: limit.period,
    spent: k.spent,
    reserved: k.reserved,
    available: k.available,
    needed,
    resetsAt: k.resetsAt,
  });
}

export function keyExpired(s: AccountState, keyId: string): DomainError {
  return new DomainError('key_expired', 'this API key has expired', { keyId, expiresAt: keyControlsOf(s, keyId)?.expiresAt ?? null });
}

/** The controls of a key that has none set: no limit, every model of the plan, no expiry. */
export const defaultKeyControls = (name: string): KeyControls => ({ name, spendLimit: null, models: null, expiresAt: null });

/**
 * The fields whose values differ: by value, not by serialisation (a limit read back from a
 * snapshot may list its fields in another order), a model list as a set, an expiry as an instant.
 */
function changedControls(before: KeyControls | null, after: KeyControls): KeyControlField[] {
  const models = (m: string[] | null | undefined) => (m ? [...new Set(m)].sort() : null);
  const instant = (t: string | null | undefined) => (t ? Date.parse(t) : null);
  const limit = (l: KeyControls['spendLimit'] | undefined) => (l ? { tokens: l.tokens, period: l.period } : null);
  const out: KeyControlField[] = [];
  if (!before || before.name !== after.name) out.push('name');
  if (!isDeepStrictEqual(limit(before?.spendLimit), limit(after.spendLimit))) out.push('spend_limit');
  if (!isDeepStrictEqual(models(before?.models), models(after.models))) out.push('models');
  if (instant(before?.expiresAt) !== instant(after.expiresAt)) out.push('expires_at');
  return out;
}

/** The KeyControlsSet a SetKeyControls command decides (none when nothing differs). */
export function decideKeyControls(c: SetKeyControlsCommand, s: AccountState): StreamEvents['account'][] {
  requireOpen(s);
  const k = c.controls;
  if (typeof k.name !== 'string' || k.name.length === 0 || k.name.length > 200) throw invalid('name must be 1-200 characters', { param: 'name' });
  if (k.spendLimit !== null) {
    requireTokenAmount(k.spendLimit.tokens, 'spend_limit.tokens', { allowZero: true });
    if (k.spendLimit.tokens > MAX_KEY_LIMIT) throw invalid(`spend_limit.tokens must be at most ${MAX_KEY_LIMIT}`, { param: 'spend_limit.tokens' });
    if (!balance.isLimitPeriod(k.spendLimit.period))
      throw invalid(`spend_limit.period must be one of ${balance.LIMIT_PERIODS.join(', ')}`, { param: 'spend_limit.period' });
  }
  if (k.models !== null) {
    if (k.models.length === 0) throw invalid('models must name at least one model, or be null for every model of the plan', { param: 'models' });
    const outside = k.models.filter((m) => !isModelEnabled(s, m));
    if (outside.length) throw invalid(`models not in the account's plan: ${outside.join(', ')}`, { param: 'models' });
  }
  const before = s.keys.get(c.keyId)?.controls ?? (c.issuedName !== undefined ? defaultKeyControls(c.issuedName) : null);
  if (k.expiresAt !== null && k.expiresAt !== (before?.expiresAt ?? null) && Date.parse(k.expiresAt) <= c.now.getTime()) {
    throw invalid('expires_at must be in the future', { param: 'expires_at' });
  }
  const changed = changedControls(before, k);
  if (changed.length === 0 && !c.rotatedFrom) return [];
  return [
    {
      type: 'KeyControlsSet',
      data: {
        accountId: s.accountId,
        keyId: c.keyId,
        name: k.name,
        spendLimit: k.spendLimit ? { tokens: k.spendLimit.tokens, period: k.spendLimit.period } : null,
        models: k.models ? [...k.models] : null,
        expiresAt: k.expiresAt,
        changed,
        ...definedOnly({ rotatedFrom: c.rotatedFrom }),
      },
    },
  ];
}

/** The largest spend limit a key can have (the KeyControlsSet schema's bound). */
export const MAX_KEY_LIMIT = 1_000_000_000_000_000;
