// The account decider: subscription, extra tokens, and the hold/settle/release cycle of every
// metered call. Invariant: remaining main quota + remaining extra - open holds never goes below
// zero through a call, because a hold is only granted when it fits and a charge never exceeds it.
import { Map as ImmutableMap } from 'immutable';
import type { Decider } from './decider.ts';
import type { DomainEvent, EventDataByType, ReleaseReason, SubscriptionTerms } from './events.ts';
import { DomainError, requireTokenAmount } from './errors.ts';
import { chatCharge, imageCharge } from './pricing.ts';
import { gcra, nextArrival } from './call-rate.ts';

export interface Hold {
  amount: number;
  kind: 'chat' | 'image';
  model: string;
  keyId: string;
  requestId: string;
  expiresAt: string;
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
}

export type AccountCommand =
  | { type: 'Open'; accountId: string; name: string }
  | { type: 'Subscribe'; accountId: string; plan: { planId: string; name: string; quota: number; validityDays: number; requestsPerMinute: number; models: string[] }; now: Date }
  | { type: 'GrantExtra'; accountId: string; amount: number; reason: string }
  | { type: 'Reserve'; holdId: string; requestId: string; keyId: string; model: string; kind: 'chat' | 'image'; amount: number; now: Date; ttlMs: number }
  | { type: 'SettleChat'; holdId: string; multiplierMilli: number; promptTokens: number; completionTokens: number; reasoningEffort: string | null; api: EventDataByType['ChatCharged']['api']; streamed: boolean; aborted: boolean }
  | { type: 'SettleImage'; holdId: string; multiplierMilli: number; images: number; tokensPerImage: number; size: string; edit: boolean }
  | { type: 'Release'; holdId: string; reason: ReleaseReason }
  | { type: 'ExpireHolds'; now: Date }
  | { type: 'Adjust'; correctionId: string; chargeEventId: string; requestId: string; model: string; chargedAt: string; billedBefore: number; billedCorrected: number; multiplierMilliBefore: number; multiplierMilliCorrected: number; fromQuotaBefore: number };

export const initialAccountState = (): AccountState => ({
  opened: false, accountId: '', name: '', subscription: null, quotaUsed: 0, extraGranted: 0, extraUsed: 0, holds: ImmutableMap(), reserved: 0,
});

export const reservedTokens = (s: AccountState): number => s.reserved;

/** The state from its JSON form (a snapshot): holds come back as the persistent map. */
export function reviveAccountState(json: unknown): AccountState {
  const j = json as Omit<AccountState, 'holds'> & { holds: Record<string, Hold> };
  return { ...j, holds: ImmutableMap(Object.entries(j.holds)) };
}

export const isPlanActive = (s: AccountState, now: Date): boolean =>
  !!s.subscription && now.getTime() < Date.parse(s.subscription.expiresAt) && now.getTime() >= Date.parse(s.subscription.startsAt);

export const isModelEnabled = (s: AccountState, model: string): boolean =>
  !!s.subscription && (s.subscription.models.includes('*') || s.subscription.models.includes(model));

export const mainRemaining = (s: AccountState): number => Math.max(0, (s.subscription?.quota ?? 0) - s.quotaUsed);
export const extraRemaining = (s: AccountState): number => Math.max(0, s.extraGranted - s.extraUsed);

/** Tokens a new hold may take now. The main plan counts only while it is active. */
export function availableTokens(s: AccountState, now: Date): number {
  const main = isPlanActive(s, now) ? mainRemaining(s) : 0;
  return Math.max(0, main + extraRemaining(s) - reservedTokens(s));
}

function requireOpen(s: AccountState): void {
  if (!s.opened) throw new DomainError('not_found', 'account not found');
}

function requireHold(s: AccountState, holdId: string): Hold {
  const hold = s.holds.get(holdId);
  if (!hold) throw new DomainError('conflict', `hold ${holdId} is not open (already settled, released or unknown)`);
  return hold;
}

/** Spend the main plan first, then extra tokens; a charge is capped at what the account holds. */
function splitCharge(s: AccountState, hold: Hold, billed: number): { billed: number; fromQuota: number; fromExtra: number } {
  const othersReserved = reservedTokens(s) - hold.amount;
  const coverable = Math.max(hold.amount, mainRemaining(s) + extraRemaining(s) - othersReserved);
  const charged = Math.min(billed, coverable);
  const fromQuota = Math.min(charged, mainRemaining(s));
  return { billed: charged, fromQuota, fromExtra: charged - fromQuota };
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
        accountId: s.accountId, planId: c.plan.planId, planName: c.plan.name, quota: c.plan.quota,
        requestsPerMinute: c.plan.requestsPerMinute, models: c.plan.models, startsAt, expiresAt,
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
      // The call rate first: a call over it is refused whatever the quota, and costs nothing.
      const perMinute = s.subscription?.requestsPerMinute;
      if (perMinute) {
        const { decision } = gcra(s.rateTat, perMinute, c.now.getTime());
        if (!decision.allowed) throw new DomainError('rate_limited', `over the plan's call rate of ${perMinute} per minute`, { ...decision });
      }
      const available = availableTokens(s, c.now);
      if (c.amount > available) {
        throw new DomainError('insufficient_quota', 'insufficient quota', {
          available, needed: c.amount, planActive: isPlanActive(s, c.now),
          mainRemaining: mainRemaining(s), extraRemaining: extraRemaining(s),
        });
      }
      return [{
        type: 'QuotaReserved',
        data: {
          accountId: s.accountId, holdId: c.holdId, requestId: c.requestId, keyId: c.keyId, model: c.model,
          kind: c.kind, amount: c.amount, expiresAt: new Date(c.now.getTime() + c.ttlMs).toISOString(), at: c.now.toISOString(),
        },
      }];
    }
    case 'SettleChat': {
      const hold = requireHold(s, c.holdId);
      const split = splitCharge(s, hold, chatCharge(c.promptTokens, c.completionTokens, c.multiplierMilli));
      return [{
        type: 'ChatCharged',
        data: {
          accountId: s.accountId, holdId: c.holdId, requestId: hold.requestId, keyId: hold.keyId, model: hold.model,
          multiplierMilli: c.multiplierMilli, reserved: hold.amount, promptTokens: c.promptTokens, completionTokens: c.completionTokens,
          reasoningEffort: c.reasoningEffort, api: c.api, streamed: c.streamed, aborted: c.aborted, ...split,
        },
      }];
    }
    case 'SettleImage': {
      const hold = requireHold(s, c.holdId);
      const split = splitCharge(s, hold, imageCharge(c.multiplierMilli, c.images, c.tokensPerImage));
      return [{
        type: 'ImageCharged',
        data: {
          accountId: s.accountId, holdId: c.holdId, requestId: hold.requestId, keyId: hold.keyId, model: hold.model,
          multiplierMilli: c.multiplierMilli, reserved: hold.amount, images: c.images, tokensPerImage: c.tokensPerImage, size: c.size,
          edit: c.edit, ...split,
        },
      }];
    }
    case 'Release': {
      const hold = requireHold(s, c.holdId);
      return [{ type: 'ReservationReleased', data: { accountId: s.accountId, holdId: c.holdId, requestId: hold.requestId, amount: hold.amount, reason: c.reason } }];
    }
    case 'ExpireHolds':
      return [...s.holds.entries()]
        .filter(([, h]) => Date.parse(h.expiresAt) <= c.now.getTime())
        .map(([holdId, h]) => ({ type: 'ReservationReleased', data: { accountId: s.accountId, holdId, requestId: h.requestId, amount: h.amount, reason: 'expired' } }));
    case 'Adjust': {
      requireOpen(s);
      const delta = c.billedCorrected - c.billedBefore;
      if (delta === 0) return [];
      // A refund goes back to the main plan up to what that charge took from it; an extra charge
      // is taken like any charge: main plan first, then extra tokens.
      const quotaDelta = delta < 0
        ? -Math.min(-delta, c.fromQuotaBefore, s.quotaUsed)
        : Math.min(delta, mainRemaining(s));
      return [{
        type: 'ChargeAdjusted',
        data: {
          accountId: s.accountId, correctionId: c.correctionId, chargeEventId: c.chargeEventId, requestId: c.requestId,
          model: c.model, chargedAt: c.chargedAt, billedBefore: c.billedBefore, billedCorrected: c.billedCorrected,
          multiplierMilliBefore: c.multiplierMilliBefore, multiplierMilliCorrected: c.multiplierMilliCorrected,
          delta, quotaDelta, extraDelta: delta - quotaDelta,
        },
      }];
    }
  }
}

function withoutHold(s: AccountState, holdId: string): Pick<AccountState, 'holds' | 'reserved'> {
  const hold = s.holds.get(holdId);
  return hold ? { holds: s.holds.delete(holdId), reserved: s.reserved - hold.amount } : { holds: s.holds, reserved: s.reserved };
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
      const previous = s.holds.get(d.holdId)?.amount ?? 0;
      return {
        ...s, holds: s.holds.set(d.holdId, { amount: d.amount, kind: d.kind, model: d.model, keyId: d.keyId, requestId: d.requestId, expiresAt: d.expiresAt }),
        reserved: s.reserved - previous + d.amount,
        // Holds recorded before the call rate moved into the ledger carry no time.
        rateTat: d.at && s.subscription?.requestsPerMinute ? nextArrival(s.rateTat, s.subscription.requestsPerMinute, Date.parse(d.at)) : s.rateTat,
      };
    }
    case 'ChatCharged':
    case 'ImageCharged':
      return {
        ...s, ...withoutHold(s, e.data.holdId),
        quotaUsed: s.quotaUsed + e.data.fromQuota, extraUsed: s.extraUsed + e.data.fromExtra,
      };
    case 'ReservationReleased':
      return { ...s, ...withoutHold(s, e.data.holdId) };
    case 'ChargeAdjusted':
      return { ...s, quotaUsed: s.quotaUsed + e.data.quotaDelta, extraUsed: s.extraUsed + e.data.extraDelta };
    default:
      return s;
  }
}

export const accountDecider: Decider<AccountState, AccountCommand> = { initialState: initialAccountState, decide, evolve, revive: reviveAccountState };
