// The account decider: subscription, extra tokens, and the hold/settle/release cycle of every
// metered call. Invariant: remaining main quota + remaining extra - open holds never goes below
// zero through a call, because a hold is only granted when it fits and a charge never exceeds it.
import type { Decider } from '../ledger/decider.ts';
import type { StreamEvents } from '../ledger/events.ts';
import {
  definedOnly,
  type CachePrice,
  type DomainEvent,
  type EventDataByType,
  type FailedChannel,
  type ReleaseReason,
  type UpstreamTrail,
  type UsageDetail,
} from '../ledger/events.ts';
import { DomainError, requireTokenAmount } from '../ledger/errors.ts';
import { cacheWeightsOf, chatCharge, imageCharge } from '../money/pricing.ts';
import { gcra, nextArrival } from '../ledger/call-rate.ts';
import * as balance from './balance.ts';
import { decideAutoTopUp, evolveAutoTopUp, topUpOnCharge, type AutoTopUpCommand } from './auto-top-up.ts';
import { alertsOnCharge, decideBalanceAlerts, evolveBalanceAlerts, type BalanceAlertCommand } from './balance-alerts.ts';
import {
  availableTokens,
  balanceOf,
  initialAccountState,
  isModelEnabled,
  requireOpen,
  reviveAccountState,
  type AccountState,
  type Hold,
} from './account-state.ts';
import {
  decideKeyControls,
  isKeyExpired,
  isModelAllowedForKey,
  keyAvailableTokens,
  keyControlsOf,
  keyExpired,
  keyLimitExceeded,
  keyPool,
  keySpendOf,
  type SetKeyControlsCommand,
} from './key-limits.ts';
import { decideAdjust, decideAdjustPage, evolveAdjusted, type AdjustCommand, type AdjustPageCommand } from './account-adjust.ts';
import { decideCredits, evolveExpired, evolveGranted, withExtraMoved, type CreditCommand } from './credit-rules.ts';
import { decidePayment, evolvePayment, suspendedByDispute, withPaidPeriod, type PaymentCommand } from './payment-rules.ts';

export type { AdjustCommand, AdjustPageCommand } from './account-adjust.ts';

export type AccountCommand =
  | { type: 'Open'; accountId: string; name: string }
  | {
      type: 'Subscribe';
      accountId: string;
      plan: { planId: string; name: string; quota: number; validityDays: number; requestsPerMinute: number; models: string[] };
      now: Date;
    }
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
  | AdjustCommand
  | AdjustPageCommand
  | PaymentCommand
  | AutoTopUpCommand
  | BalanceAlertCommand
  | CreditCommand;

/** The most a charge of this hold may bill by its key's limit (see balance.keyChargeCap). */
function keyCap(s: AccountState, hold: Hold): number {
  return balance.keyChargeCap(keyControlsOf(s, hold.keyId)?.spendLimit ?? null, keySpendOf(s, hold.keyId), hold.amount, hold.at ? new Date(hold.at) : null);
}

/** What every charge names first: the account, its hold as it was opened, and the price multiplier. */
function chargeHead(s: AccountState, c: { holdId: string; multiplierMilli: number }, hold: Hold) {
  return {
    accountId: s.accountId,
    holdId: c.holdId,
    requestId: hold.requestId,
    keyId: hold.keyId,
    model: hold.model,
    multiplierMilli: c.multiplierMilli,
    reserved: hold.amount,
  };
}

/** A charge's split: the main plan, then the lots the hold's model may draw at the hold's time. */
const splitOf = (s: AccountState, hold: Hold, billed: number) =>
  balance.splitCharge(balanceOf(s), hold.amount, billed, hold.model, hold.at ? new Date(hold.at) : null);

/** The upstream that answered a charged call (what is set of it; a failover list only when there was one). */
const upstreamOf = (c: UpstreamTrail) => ({
  channel: c.channel,
  upstreamModel: c.upstreamModel,
  upstreamId: c.upstreamId,
  failovers: c.failovers?.length ? c.failovers : undefined,
});

function requireHold(s: AccountState, holdId: string): Hold {
  const hold = s.holds.get(holdId);
  if (!hold) throw new DomainError('conflict', `hold ${holdId} is not open (already settled, released or unknown)`);
  return hold;
}

/** A charge's events, with the top-up and the balance alerts it starts by taking the tokens left below their thresholds. */
function withTopUp(s: AccountState, hold: Hold, holdId: string, charged: number, events: StreamEvents['account'][]): StreamEvents['account'][] {
  const at = hold.at ? new Date(hold.at) : null;
  const topUp = topUpOnCharge(s, charged, holdId, at);
  return [...events, ...(topUp ? [topUp] : []), ...alertsOnCharge(s, charged, holdId, at)];
}

function decide(c: AccountCommand, s: AccountState): StreamEvents['account'][] {
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
    case 'ExpireCredits':
      return decideCredits(c, s);
    case 'Reserve': {
      requireOpen(s);
      if (suspendedByDispute(s)) throw new DomainError('account_suspended', "this account's keys are suspended while a payment dispute is open");
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
      const available = availableTokens(s, c.now, c.model);
      if (c.amount > available) {
        throw new DomainError('insufficient_quota', 'insufficient quota', {
          available,
          needed: c.amount,
          planActive: balance.isPlanActive(balanceOf(s), c.now),
          mainRemaining: balance.mainRemaining(balanceOf(s)),
          extraRemaining: balance.extraRemaining(balanceOf(s), c.now, c.model),
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
      const split = splitOf(s, hold, Math.min(keyCap(s, hold), chatCharge(c.promptTokens, c.completionTokens, c.multiplierMilli, c, cacheWeightsOf(c))));
      return withTopUp(s, hold, c.holdId, split.billed, [
        {
          type: 'ChatCharged',
          data: {
            ...chargeHead(s, c, hold),
            promptTokens: c.promptTokens,
            completionTokens: c.completionTokens,
            // The request's schema admits only the event's values; the event's schema checks them again at the append.
            reasoningEffort: c.reasoningEffort as EventDataByType['ChatCharged']['reasoningEffort'],
            api: c.api,
            streamed: c.streamed,
            aborted: c.aborted,
            ...split,
            ...definedOnly({
              cachedTokens: c.cachedTokens || undefined,
              cacheWriteTokens: c.cacheWriteTokens || undefined,
              cacheWrite1hTokens: c.cacheWrite1hTokens || undefined,
              reasoningTokens: c.reasoningTokens || undefined,
              cacheReadMilli: c.cacheReadMilli,
              cacheWriteMilli: c.cacheWriteMilli,
              ...upstreamOf(c),
            }),
          },
        },
      ]);
    }
    case 'SettleImage': {
      const hold = requireHold(s, c.holdId);
      const split = splitOf(s, hold, Math.min(keyCap(s, hold), imageCharge(c.multiplierMilli, c.images, c.tokensPerImage)));
      return withTopUp(s, hold, c.holdId, split.billed, [
        {
          type: 'ImageCharged',
          data: {
            ...chargeHead(s, c, hold),
            images: c.images,
            tokensPerImage: c.tokensPerImage,
            size: c.size as EventDataByType['ImageCharged']['size'],
            edit: c.edit,
            ...split,
            ...definedOnly({
              ...upstreamOf(c),
            }),
          },
        },
      ]);
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
    case 'SavePaymentMethod':
    case 'SetAutoTopUp':
    case 'TurnOffAutoTopUp':
    case 'SettleTopUp':
      return decideAutoTopUp(c, s);
    case 'SetBalanceAlerts':
    case 'ClaimNotice':
    case 'RecordNoticeEmailed':
      return decideBalanceAlerts(c, s);
    case 'SetKeyControls':
      return decideKeyControls(c, s);
    case 'RecordPayment':
    case 'RefundPayment':
    case 'OpenDispute':
    case 'CloseDispute':
    case 'CancelSubscription':
    case 'ResumeSubscription':
      return decidePayment(c, s, (grant) => decide(grant, s));
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
    case 'Adjust':
      return decideAdjust(c, s);
    case 'AdjustPage':
      return decideAdjustPage(c, s);
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
      return withPaidPeriod({ ...s, subscription: { ...e.data }, quotaUsed: 0 }, e.data.paymentId, e.data.startsAt);
    case 'ExtraTokensGranted':
      return evolveGranted(s, e.data);
    case 'CreditsExpired':
      return evolveExpired(s, e.data);
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
        ...withExtraMoved(s, e.data.fromExtra, e.data.credits),
      };
    case 'ReservationReleased':
      return { ...s, ...withoutHold(s, e.data.holdId) };
    case 'ChargeAdjusted':
      return evolveAdjusted(s, e.data);
    case 'KeyControlsSet': {
      const d = e.data;
      const { accountId: _a, keyId: _k, changed: _c, rotatedFrom, ...controls } = d;
      // A key keeps its pool; a new key rotated from another joins that key's pool.
      const pool = s.keys.get(d.keyId)?.pool ?? (rotatedFrom ? keyPool(s, rotatedFrom) : d.keyId);
      return { ...s, keys: s.keys.set(d.keyId, { controls, pool }) };
    }
    case 'PaymentReceived':
    case 'PaymentRefunded':
    case 'PaymentDisputed':
    case 'DisputeClosed':
    case 'SubscriptionCancelled':
    case 'SubscriptionResumed':
      return evolvePayment(s, e);
    case 'PaymentMethodSaved':
    case 'AutoTopUpSet':
    case 'AutoTopUpTurnedOff':
    case 'AutoTopUpTriggered':
    case 'AutoTopUpSucceeded':
      return evolveAutoTopUp(s, e);
    case 'AutoTopUpFailed':
      // A failed top-up is also a notice to email.
      return evolveBalanceAlerts(evolveAutoTopUp(s, e), e);
    case 'BalanceAlertsSet':
    case 'BalanceAlertCrossed':
    case 'NoticeClaimed':
    case 'NoticeEmailed':
      return evolveBalanceAlerts(s, e);
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

export const accountDecider: Decider<AccountState, AccountCommand, StreamEvents['account']> = {
  initialState: initialAccountState,
  decide,
  evolve: evolveChecked,
  revive: reviveAccountState,
};
