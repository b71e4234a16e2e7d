// The account decider: subscription, extra tokens, and the hold/settle/release cycle of every
// metered call. Invariant: remaining main quota + remaining extra - open holds never goes below
// zero through a call, because a hold is only granted when it fits and a charge never exceeds it.
import { Map as ImmutableMap } from 'immutable';
import type { Decider } from './decider.ts';
import {
  definedOnly,
  type CachePrice,
  type DomainEvent,
  type EventDataByType,
  type FailedChannel,
  type KeyControlField,
  type KeyControls,
  type ReleaseReason,
  type SubscriptionTerms,
  type UpstreamTrail,
  type UsageDetail,
} from './events.ts';
import { DomainError, invalid, requireTokenAmount } from './errors.ts';
import { cacheWeightsOf, chatCharge, imageCharge } from './pricing.ts';
import { gcra, nextArrival } from './call-rate.ts';
import * as balance from './balance.ts';
import type { Balance, KeySpend } from './balance.ts';

export interface Hold {
  amount: number;
  kind: 'chat' | 'image';
  model: string;
  keyId: string;
  requestId: string;
  expiresAt: string;
  /** When it was taken (absent on holds from before that was recorded): its charge counts in the key's period of this time. */
  at?: string;
  /** The gateway process that took it (absent on holds from before processes held leases). */
  process?: string;
}

/** A key's controls as the account knows them, and whose spend it counts with (itself, or the key it was rotated from). */
export interface AccountKey {
  controls: KeyControls;
  pool: string;
}

export interface AccountState {
  opened: boolean;
  accountId: string;
  name: string;
  subscription: SubscriptionTerms | null;
  quotaUsed: number;
  extraGranted: number;
  extraUsed: number;
  /**
   * Open holds by hold id. A persistent map: adding or removing one hold shares the rest, so a
   * busy account with hundreds of calls in flight does not copy all of them on every event.
   */
  holds: ImmutableMap<string, Hold>;
  /** Sum of the open holds' amounts, kept with them. */
  reserved: number;
  /** The call rate's theoretical arrival time (ms since the epoch) after the holds so far. */
  rateTat?: number;
  /**
   * What is billed now for each charge a correction has adjusted (the charge plus every
   * adjustment of it), by the charge's event id; a charge not here is billed as it was charged.
   */
  adjusted: ImmutableMap<string, AdjustedCharge>;
  /** Keys with controls set (KeyControlsSet), by key id. */
  keys: ImmutableMap<string, AccountKey>;
  /**
   * What each key has spent and holds, by pool: a key's own id, or, for a key that replaced
   * another by rotation, that key's pool. Kept for every key, with controls or not, so a limit
   * set mid-period counts the period's spend so far.
   */
  keySpend: ImmutableMap<string, KeySpend>;
}

/** A charge's figure after its adjustments so far. */
export interface AdjustedCharge {
  /** Billed now: the charge plus every adjustment of it. */
  billed: number;
  /** Sum of the adjustments' quotaDelta (what they returned to or took from the main plan). */
  quotaDelta: number;
  /** The multiplier of the latest adjustment. */
  multiplierMilli: number;
  /** Model stream revision of the correction that decided the figure (-1: before corrections were ordered). */
  rank: number;
}

export type AccountCommand =
  | { type: 'Open'; accountId: string; name: string }
  | {
      type: 'Subscribe';
      accountId: string;
      plan: { planId: string; name: string; quota: number; validityDays: number; requestsPerMinute: number; models: string[] };
      now: Date;
    }
  | { type: 'GrantExtra'; accountId: string; amount: number; reason: string }
  | {
      type: 'Reserve';
      holdId: string;
      requestId: string;
      keyId: string;
      model: string;
      kind: 'chat' | 'image';
      amount: number;
      now: Date;
      ttlMs: number;
      /** The gateway process taking the hold, whose lease vouches for it. */
      process?: string;
    }
  | ({
      type: 'SettleChat';
      holdId: string;
      multiplierMilli: number;
      promptTokens: number;
      completionTokens: number;
      reasoningEffort: string | null;
      api: EventDataByType['ChatCharged']['api'];
      streamed: boolean;
      aborted: boolean;
    } & UsageDetail &
      CachePrice &
      UpstreamTrail)
  | ({ type: 'SettleImage'; holdId: string; multiplierMilli: number; images: number; tokensPerImage: number; size: string; edit: boolean } & UpstreamTrail)
  | { type: 'Release'; holdId: string; reason: ReleaseReason; failovers?: FailedChannel[] }
  | { type: 'ExpireHolds'; now: Date }
  /** Releases the open holds taken by these processes, whose leases lapsed (they died mid-call). */
  | { type: 'ReleaseOrphaned'; processes: string[] }
  | SetKeyControlsCommand
  | AdjustCommand;

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

/**
 * Re-price one charge to `billedCorrected`. billedBefore, multiplierMilliBefore and fromQuotaBefore
 * are the charge as it was charged (its event); what is billed now is the account's own state
 * (the charge plus earlier adjustments), so the adjustment is always the difference from it.
 * With `correctionRevision`, a correction older than the one that last decided the charge is
 * refused (nothing appended): a later-applied older correction never overrides a newer one.
 */
export interface AdjustCommand {
  type: 'Adjust';
  correctionId: string;
  chargeEventId: string;
  requestId: string;
  model: string;
  chargedAt: string;
  billedBefore: number;
  billedCorrected: number;
  multiplierMilliBefore: number;
  multiplierMilliCorrected: number;
  fromQuotaBefore: number;
  correctionRevision?: number;
  cacheReadMilliCorrected?: number;
  cacheWriteMilliCorrected?: number;
  tokensPerImageCorrected?: number;
  /** The key of the charge (kept on the adjustment, for usage per key). */
  keyId?: string;
}

export const initialAccountState = (): AccountState => ({
  opened: false,
  accountId: '',
  name: '',
  subscription: null,
  quotaUsed: 0,
  extraGranted: 0,
  extraUsed: 0,
  holds: ImmutableMap(),
  reserved: 0,
  adjusted: ImmutableMap(),
  keys: ImmutableMap(),
  keySpend: ImmutableMap(),
});

export const reservedTokens = (s: AccountState): number => s.reserved;

/** The state from its JSON form (a snapshot): holds come back as the persistent map. */
export function reviveAccountState(json: unknown): AccountState {
  const j = json as Omit<AccountState, 'holds' | 'adjusted' | 'keys' | 'keySpend'> & {
    holds: Record<string, Hold>;
    adjusted?: Record<string, AdjustedCharge>;
    keys?: Record<string, AccountKey>;
    keySpend?: Record<string, KeySpend>;
  };
  return {
    ...j,
    holds: ImmutableMap(Object.entries(j.holds)),
    adjusted: ImmutableMap(Object.entries(j.adjusted ?? {})),
    keys: ImmutableMap(Object.entries(j.keys ?? {})),
    keySpend: ImmutableMap(Object.entries(j.keySpend ?? {})),
  };
}

/** The account's money as the money rule (balance.ts) reads it. */
export function balanceOf(s: AccountState): Balance {
  return {
    quota: s.subscription?.quota ?? 0,
    quotaUsed: s.quotaUsed,
    extraGranted: s.extraGranted,
    extraUsed: s.extraUsed,
    reserved: s.reserved,
    startsAt: s.subscription?.startsAt ?? null,
    expiresAt: s.subscription?.expiresAt ?? null,
  };
}

export const isModelEnabled = (s: AccountState, model: string): boolean =>
  !!s.subscription && (s.subscription.models.includes('*') || s.subscription.models.includes(model));

/** Tokens a new hold may take now (the money rule, on this account's state). */
export const availableTokens = (s: AccountState, now: Date): number => balance.availableTokens(balanceOf(s), now);

// ---------------------------------------------------------------- per-key controls

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

function changedControls(before: KeyControls | null, after: KeyControls): KeyControlField[] {
  const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const out: KeyControlField[] = [];
  if (!before || before.name !== after.name) out.push('name');
  if (!same(before?.spendLimit, after.spendLimit)) out.push('spend_limit');
  if (!same(before?.models, after.models)) out.push('models');
  if (!same(before?.expiresAt, after.expiresAt)) out.push('expires_at');
  return out;
}

function decideKeyControls(c: SetKeyControlsCommand, s: AccountState): DomainEvent[] {
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

function requireOpen(s: AccountState): void {
  if (!s.opened) throw new DomainError('not_found', 'account not found');
}

/** The most a charge of this hold may bill by its key's limit (see balance.keyChargeCap). */
function keyCap(s: AccountState, hold: Hold): number {
  return balance.keyChargeCap(keyControlsOf(s, hold.keyId)?.spendLimit ?? null, keySpendOf(s, hold.keyId), hold.amount, hold.at ? new Date(hold.at) : null);
}

function requireHold(s: AccountState, holdId: string): Hold {
  const hold = s.holds.get(holdId);
  if (!hold) throw new DomainError('conflict', `hold ${holdId} is not open (already settled, released or unknown)`);
  return hold;
}

function decide(c: AccountCommand, s: AccountState): DomainEvent[] {
  switch (c.type) {
    case 'Open':
      if (s.opened) throw new DomainError('already_exists', `account ${c.accountId} already exists`);
      return [{ type: 'AccountOpened', data: { accountId: c.accountId, name: c.name } }];
    case 'Subscribe': {
      requireOpen(s);
      const startsAt = c.now.toISOString();
      const expiresAt = new Date(c.now.getTime() + c.plan.validityDays * 86_400_000).toISOString();
      const data = {
        accountId: s.accountId,
        planId: c.plan.planId,
        planName: c.plan.name,
        quota: c.plan.quota,
        requestsPerMinute: c.plan.requestsPerMinute,
        models: c.plan.models,
        startsAt,
        expiresAt,
      };
      return [s.subscription ? { type: 'SubscriptionRenewed', data } : { type: 'SubscriptionStarted', data }];
    }
    case 'GrantExtra':
      requireOpen(s);
      requireTokenAmount(c.amount, 'amount');
      return [{ type: 'ExtraTokensGranted', data: { accountId: s.accountId, amount: c.amount, reason: c.reason } }];
    case 'Reserve': {
      requireOpen(s);
      requireTokenAmount(c.amount, 'amount');
      if (s.holds.has(c.holdId)) throw new DomainError('conflict', `hold ${c.holdId} exists`);
      if (!isModelEnabled(s, c.model)) throw new DomainError('model_not_enabled', `model ${c.model} is not enabled in this account's plan`);
      // The key's own controls, exact at the hold's time: expiry and model list.
      if (isKeyExpired(s, c.keyId, c.now)) throw keyExpired(s, c.keyId);
      if (!isModelAllowedForKey(s, c.keyId, c.model))
        throw new DomainError('model_not_enabled', `model ${c.model} is not enabled for this key`, { model: c.model });
      // The call rate first: a call over it is refused whatever the quota, and costs nothing.
      const perMinute = s.subscription?.requestsPerMinute;
      if (perMinute) {
        const { decision } = gcra(s.rateTat, perMinute, c.now.getTime());
        if (!decision.allowed) throw new DomainError('rate_limited', `over the plan's call rate of ${perMinute} per minute`, { ...decision });
      }
      const available = availableTokens(s, c.now);
      if (c.amount > available) {
        throw new DomainError('insufficient_quota', 'insufficient quota', {
          available,
          needed: c.amount,
          planActive: balance.isPlanActive(balanceOf(s), c.now),
          mainRemaining: balance.mainRemaining(balanceOf(s)),
          extraRemaining: balance.extraRemaining(balanceOf(s)),
        });
      }
      // The key's limit: the hold must fit in what the key's period leaves, its open holds counted.
      if (c.amount > keyAvailableTokens(s, c.keyId, c.now)) throw keyLimitExceeded(s, c.keyId, c.now, c.amount);
      return [
        {
          type: 'QuotaReserved',
          data: {
            accountId: s.accountId,
            holdId: c.holdId,
            requestId: c.requestId,
            keyId: c.keyId,
            model: c.model,
            kind: c.kind,
            amount: c.amount,
            expiresAt: new Date(c.now.getTime() + c.ttlMs).toISOString(),
            at: c.now.toISOString(),
            ...definedOnly({ process: c.process }),
          },
        },
      ];
    }
    case 'SettleChat': {
      const hold = requireHold(s, c.holdId);
      const split = balance.splitCharge(
        balanceOf(s),
        hold.amount,
        Math.min(keyCap(s, hold), chatCharge(c.promptTokens, c.completionTokens, c.multiplierMilli, c, cacheWeightsOf(c))),
      );
      return [
        {
          type: 'ChatCharged',
          data: {
            accountId: s.accountId,
            holdId: c.holdId,
            requestId: hold.requestId,
            keyId: hold.keyId,
            model: hold.model,
            multiplierMilli: c.multiplierMilli,
            reserved: hold.amount,
            promptTokens: c.promptTokens,
            completionTokens: c.completionTokens,
            reasoningEffort: c.reasoningEffort,
            api: c.api,
            streamed: c.streamed,
            aborted: c.aborted,
            ...split,
            ...definedOnly({
              cachedTokens: c.cachedTokens || undefined,
              cacheWriteTokens: c.cacheWriteTokens || undefined,
              reasoningTokens: c.reasoningTokens || undefined,
              cacheReadMilli: c.cacheReadMilli,
              cacheWriteMilli: c.cacheWriteMilli,
              channel: c.channel,
              upstreamModel: c.upstreamModel,
              upstreamId: c.upstreamId,
              failovers: c.failovers?.length ? c.failovers : undefined,
            }),
          },
        },
      ];
    }
    case 'SettleImage': {
      const hold = requireHold(s, c.holdId);
      const split = balance.splitCharge(balanceOf(s), hold.amount, Math.min(keyCap(s, hold), imageCharge(c.multiplierMilli, c.images, c.tokensPerImage)));
      return [
        {
          type: 'ImageCharged',
          data: {
            accountId: s.accountId,
            holdId: c.holdId,
            requestId: hold.requestId,
            keyId: hold.keyId,
            model: hold.model,
            multiplierMilli: c.multiplierMilli,
            reserved: hold.amount,
            images: c.images,
            tokensPerImage: c.tokensPerImage,
            size: c.size,
            edit: c.edit,
            ...split,
            ...definedOnly({
              channel: c.channel,
              upstreamModel: c.upstreamModel,
              upstreamId: c.upstreamId,
              failovers: c.failovers?.length ? c.failovers : undefined,
            }),
          },
        },
      ];
    }
    case 'Release': {
      const hold = requireHold(s, c.holdId);
      return [
        {
          type: 'ReservationReleased',
          data: {
            accountId: s.accountId,
            holdId: c.holdId,
            requestId: hold.requestId,
            amount: hold.amount,
            reason: c.reason,
            ...definedOnly({ failovers: c.failovers?.length ? c.failovers : undefined }),
          },
        },
      ];
    }
    case 'SetKeyControls':
      return decideKeyControls(c, s);
    case 'ExpireHolds':
      return [...s.holds.entries()]
        .filter(([, h]) => Date.parse(h.expiresAt) <= c.now.getTime())
        .map(([holdId, h]) => ({
          type: 'ReservationReleased',
          data: { accountId: s.accountId, holdId, requestId: h.requestId, amount: h.amount, reason: 'expired' },
        }));
    case 'ReleaseOrphaned': {
      // Only holds still open are released: one whose charge committed is no longer among them.
      const lapsed = new Set(c.processes);
      return [...s.holds.entries()]
        .filter(([, h]) => h.process !== undefined && lapsed.has(h.process))
        .map(([holdId, h]) => ({
          type: 'ReservationReleased',
          data: { accountId: s.accountId, holdId, requestId: h.requestId, amount: h.amount, reason: 'process_lost' },
        }));
    }
    case 'Adjust': {
      requireOpen(s);
      requireTokenAmount(c.billedCorrected, 'billed_corrected', { allowZero: true });
      const now = s.adjusted.get(c.chargeEventId);
      // A newer correction (or this one) already decided this charge.
      if (now && c.correctionRevision !== undefined && c.correctionRevision <= now.rank) return [];
      const billedNow = now?.billed ?? c.billedBefore;
      const delta = c.billedCorrected - billedNow;
      if (delta === 0) return [];
      // A refund goes back to the main plan up to what that charge (net of its adjustments so far)
      // took from it; an extra charge is taken like any charge: main plan first, then extra tokens.
      const fromQuotaNow = Math.max(0, c.fromQuotaBefore + (now?.quotaDelta ?? 0));
      const quotaDelta = delta < 0 ? -Math.min(-delta, fromQuotaNow, s.quotaUsed) : Math.min(delta, balance.mainRemaining(balanceOf(s)));
      // The rest of a refund goes back to extra tokens used; what they cannot take (the charge was
      // made on a plan period since renewed) is credited as extra tokens, never a negative use.
      const rest = delta - quotaDelta;
      const extraDelta = rest < 0 ? -Math.min(-rest, s.extraUsed) : rest;
      const extraCredited = rest < 0 ? -rest + extraDelta : 0;
      return [
        {
          type: 'ChargeAdjusted',
          data: {
            accountId: s.accountId,
            correctionId: c.correctionId,
            chargeEventId: c.chargeEventId,
            requestId: c.requestId,
            model: c.model,
            chargedAt: c.chargedAt,
            billedBefore: billedNow,
            billedCorrected: c.billedCorrected,
            multiplierMilliBefore: now?.multiplierMilli ?? c.multiplierMilliBefore,
            multiplierMilliCorrected: c.multiplierMilliCorrected,
            delta,
            quotaDelta,
            extraDelta,
            ...definedOnly({
              extraCredited: extraCredited || undefined,
              keyId: c.keyId,
              correctionRevision: c.correctionRevision,
              cacheReadMilliCorrected: c.cacheReadMilliCorrected,
              cacheWriteMilliCorrected: c.cacheWriteMilliCorrected,
              tokensPerImageCorrected: c.tokensPerImageCorrected,
            }),
          },
        },
      ];
    }
  }
}

/** The state without an open hold, its key's held tokens less its amount, and its charge (if any) spent by the key. */
function withoutHold(s: AccountState, holdId: string, billed = 0): Pick<AccountState, 'holds' | 'reserved' | 'keySpend'> {
  const hold = s.holds.get(holdId);
  if (!hold) return { holds: s.holds, reserved: s.reserved, keySpend: s.keySpend };
  const pool = keyPool(s, hold.keyId);
  const spend = s.keySpend.get(pool) ?? balance.noSpend();
  const after = balance.addKeySpend({ ...spend, reserved: spend.reserved - hold.amount }, billed, hold.at ? new Date(hold.at) : null);
  return { holds: s.holds.delete(holdId), reserved: s.reserved - hold.amount, keySpend: s.keySpend.set(pool, after) };
}

function withHold(s: AccountState, holdId: string, hold: Hold): Pick<AccountState, 'holds' | 'reserved' | 'keySpend'> {
  const before = s.holds.get(holdId);
  const base = before ? withoutHold(s, holdId) : s;
  const pool = keyPool(s, hold.keyId);
  const spend = base.keySpend.get(pool) ?? balance.noSpend();
  return {
    holds: base.holds.set(holdId, hold),
    reserved: base.reserved + hold.amount,
    keySpend: base.keySpend.set(pool, { ...spend, reserved: spend.reserved + hold.amount }),
  };
}

function evolve(s: AccountState, e: DomainEvent): AccountState {
  switch (e.type) {
    case 'AccountOpened':
      return { ...s, opened: true, accountId: e.data.accountId, name: e.data.name };
    case 'SubscriptionStarted':
    case 'SubscriptionRenewed':
      return { ...s, subscription: { ...e.data }, quotaUsed: 0 };
    case 'ExtraTokensGranted':
      return { ...s, extraGranted: s.extraGranted + e.data.amount };
    case 'QuotaReserved': {
      const d = e.data;
      const hold: Hold = { amount: d.amount, kind: d.kind, model: d.model, keyId: d.keyId, requestId: d.requestId, expiresAt: d.expiresAt };
      if (d.at) hold.at = d.at;
      if (d.process) hold.process = d.process;
      return {
        ...s,
        ...withHold(s, d.holdId, hold),
        // Holds recorded before the call rate moved into the ledger carry no time.
        rateTat: d.at && s.subscription?.requestsPerMinute ? nextArrival(s.rateTat, s.subscription.requestsPerMinute, Date.parse(d.at)) : s.rateTat,
      };
    }
    case 'ChatCharged':
    case 'ImageCharged':
      return {
        ...s,
        ...withoutHold(s, e.data.holdId, e.data.billed),
        quotaUsed: s.quotaUsed + e.data.fromQuota,
        extraUsed: s.extraUsed + e.data.fromExtra,
      };
    case 'ReservationReleased':
      return { ...s, ...withoutHold(s, e.data.holdId) };
    case 'ChargeAdjusted': {
      const d = e.data;
      const before = s.adjusted.get(d.chargeEventId);
      const adjusted = s.adjusted.set(d.chargeEventId, {
        billed: d.billedCorrected,
        quotaDelta: (before?.quotaDelta ?? 0) + d.quotaDelta,
        multiplierMilli: d.multiplierMilliCorrected,
        rank: Math.max(before?.rank ?? -1, d.correctionRevision ?? -1),
      });
      return {
        ...s,
        quotaUsed: s.quotaUsed + d.quotaDelta,
        extraUsed: s.extraUsed + d.extraDelta,
        extraGranted: s.extraGranted + (d.extraCredited ?? 0),
        adjusted,
      };
    }
    case 'KeyControlsSet': {
      const d = e.data;
      const { accountId: _a, keyId: _k, changed: _c, rotatedFrom, ...controls } = d;
      // A key keeps its pool; a new key rotated from another joins that key's pool.
      const pool = s.keys.get(d.keyId)?.pool ?? (rotatedFrom ? keyPool(s, rotatedFrom) : d.keyId);
      return { ...s, keys: s.keys.set(d.keyId, { controls, pool }) };
    }
    default:
      return s;
  }
}

/** evolve, with the money invariants asserted on every state it produces. */
function evolveChecked(s: AccountState, e: DomainEvent): AccountState {
  const next = evolve(s, e);
  if (next !== s) {
    balance.assertBalance(
      balanceOf(next),
      next.holds.reduce((sum, h) => sum + h.amount, 0),
    );
    // Every key's held tokens are its open holds' (and nothing spent or held below zero).
    if (next.keySpend !== s.keySpend) {
      const held = new Map<string, number>();
      for (const h of next.holds.values()) {
        const pool = keyPool(next, h.keyId);
        held.set(pool, (held.get(pool) ?? 0) + h.amount);
      }
      for (const [pool, spend] of next.keySpend) balance.assertKeySpend(pool, spend, held.get(pool) ?? 0);
    }
  }
  return next;
}

export const accountDecider: Decider<AccountState, AccountCommand> = {
  initialState: initialAccountState,
  decide,
  evolve: evolveChecked,
  revive: reviveAccountState,
};
