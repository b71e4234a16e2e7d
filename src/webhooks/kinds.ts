// What an account is notified of, as pure functions. A kind looks at one change of the account —
// its state before an event, the event, its state after (folded with the account decider's own
// evolve) — and returns the notices it gives rise to; a time-based kind looks at the state and the
// clock. The money figures come from the money rule (balanceOf + src/accounts/balance.ts), never
// recomputed here. A new kind is one more entry in NOTIFICATION_KINDS.
//
// Every notice has a `key` naming the fact it reports (an event, or a plan period's threshold):
// the notification id is derived from it, and the outbox keeps one delivery per webhook and id, so
// the same fact found again (a threshold crossed twice in one plan period, the expiry check run
// every minute, a replay after a restart) is never sent twice.
import { type AccountState, balance, balanceOf, isKeyExpired, keyControlsOf, keyStanding } from '../accounts/index.ts';
import type { DomainEvent, SubscriptionTerms } from '../ledger/events.ts';

export const NOTIFICATION_TYPES = [
  'quota.threshold',
  'key_limit.threshold',
  'plan.expiring',
  'plan.expired',
  'key.revoked',
  'key.expired',
  'extra_tokens.granted',
  'correction.applied',
  'auto_top_up.succeeded',
  'auto_top_up.failed',
  'balance.alert',
] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

/** An event as the dispatcher reads it from the log. */
export interface LoggedEvent {
  id: string;
  timestamp: string;
  event: DomainEvent;
}

/** One change of an account: the state before the event and after it (equal for events of other streams, e.g. KeyRevoked). */
export interface AccountChange {
  before: AccountState;
  logged: LoggedEvent;
  after: AccountState;
}

/** A webhook's settings, as far as a kind needs them. */
export interface WebhookOptions {
  /** Percentages of the main plan (1..100), ascending. */
  thresholds: readonly number[];
  /** plan.expiring is sent this many days before the plan expires. */
  expiringDays: number;
  /** When the webhook was registered (ISO 8601): a plan that expired before is not reported. */
  registeredAt: string;
}

export interface Notice {
  type: NotificationType;
  /** Names the fact: the notification id is derived from it (same fact, same id). */
  key: string;
  accountId: string;
  /** When it happened (ISO 8601). */
  createdAt: string;
  data: Record<string, unknown>;
  /** Notices with the same merge key found in one pass are sent as one (see NotificationKind.merge). */
  mergeKey?: string;
}

export interface NotificationKind {
  type: NotificationType;
  onEvent?(change: AccountChange, options: WebhookOptions): Notice[];
  onTime?(state: AccountState, now: Date, options: WebhookOptions): Notice[];
  /** Folds a later notice into an earlier one with the same merge key. */
  merge?(earlier: Notice, later: Notice): Notice;
}

const DAY_MS = 86_400_000;

/** A plan period: the subscription's window (a renewal starts a new one). */
const periodOf = (s: SubscriptionTerms) => `${s.planId}|${s.startsAt}|${s.expiresAt}`;
const samePeriod = (a: SubscriptionTerms | null, b: SubscriptionTerms | null) => !!a && !!b && periodOf(a) === periodOf(b);

/** Tokens of the main plan used, by the money rule: its quota less what remains of it. */
function mainUsed(s: AccountState): number {
  const b = balanceOf(s);
  return b.quota - balance.mainRemaining(b);
}

function planData(s: SubscriptionTerms): Record<string, unknown> {
  return { plan_id: s.planId, plan_name: s.planName, period_start: s.startsAt, expires_at: s.expiresAt };
}

/** The account's money after the change, as the money rule gives it. */
function balanceData(s: AccountState): Record<string, unknown> {
  const b = balanceOf(s);
  return { quota: b.quota, quota_used: mainUsed(s), quota_remaining: balance.mainRemaining(b), extra_remaining: balance.extraRemaining(b) };
}

/** Thresholds (percent of `total`) that `from` was below and `to` reaches. */
export function crossedThresholds(thresholds: readonly number[], total: number, from: number, to: number): number[] {
  if (total <= 0) return [];
  return thresholds.filter((t) => from * 100 < t * total && to * 100 >= t * total);
}

/** The main plan's usage crossing 80, 90, 100 % (or the webhook's thresholds); once per plan period. */
const quotaThreshold: NotificationKind = {
  type: 'quota.threshold',
  onEvent({ before, logged, after }, options) {
    const sub = after.subscription;
    if (!sub) return [];
    // A new period (a renewal) starts from nothing used.
    const from = samePeriod(before.subscription, sub) ? mainUsed(before) : 0;
    const to = mainUsed(after);
    return crossedThresholds(options.thresholds, sub.quota, from, to).map((threshold) => ({
      type: 'quota.threshold',
      key: `quota.threshold|${after.accountId}|${periodOf(sub)}|${threshold}`,
      accountId: after.accountId,
      createdAt: logged.timestamp,
      data: { threshold, ...planData(sub), ...balanceData(after) },
    }));
  },
};

/** The key an event spends or sets controls of (charges, KeyControlsSet). */
function keyOf(e: DomainEvent): string | null {
  switch (e.type) {
    case 'ChatCharged':
    case 'ImageCharged':
    case 'KeyControlsSet':
      return e.data.keyId;
    default:
      return null;
  }
}

/**
 * A key's spend crossing 80, 90, 100 % (the webhook's thresholds) of its own limit, in the
 * limit's period (the key's standing as the account decider gives it, keyStanding). Once per
 * period and limit: a limit set or changed counts from nothing, so a key already past a
 * threshold of its new limit is reported at once.
 */
const keyLimitThreshold: NotificationKind = {
  type: 'key_limit.threshold',
  onEvent({ before, logged, after }, options) {
    const e = logged.event;
    const keyId = keyOf(e);
    const limit = keyId === null ? null : (keyControlsOf(after, keyId)?.spendLimit ?? null);
    if (keyId === null || !limit) return [];
    // A charge counts in the period its hold was let in.
    const hold = e.type === 'ChatCharged' || e.type === 'ImageCharged' ? before.holds.get(e.data.holdId) : undefined;
    const at = new Date(hold?.at ?? logged.timestamp);
    const was = keyStanding(before, keyId, at);
    const is = keyStanding(after, keyId, at);
    const sameLimit = was.limit?.tokens === limit.tokens && was.limit?.period === limit.period;
    return crossedThresholds(options.thresholds, limit.tokens, sameLimit ? was.spent : 0, is.spent).map((threshold) => ({
      type: 'key_limit.threshold',
      accountId: after.accountId,
      createdAt: logged.timestamp,
      key: `key_limit.threshold|${after.accountId}|${keyId}|${limit.tokens}|${limit.period}|${is.periodStart ?? 'all'}|${threshold}`,
      data: {
        key_id: keyId,
        threshold,
        limit: limit.tokens,
        period: limit.period,
        spent: is.spent,
        reserved: is.reserved,
        available: is.available,
        period_start: is.periodStart,
        resets_at: is.resetsAt,
      },
    }));
  },
};

/** A key's own expiry (its controls' expires_at) passed. */
const keyExpired: NotificationKind = {
  type: 'key.expired',
  onTime(state, now, options) {
    const out: Notice[] = [];
    for (const [keyId, k] of state.keys) {
      const expiresAt = k.controls.expiresAt;
      if (!expiresAt || !isKeyExpired(state, keyId, now) || Date.parse(options.registeredAt) >= Date.parse(expiresAt)) continue;
      out.push({
        type: 'key.expired',
        key: `key.expired|${state.accountId}|${keyId}|${expiresAt}`,
        accountId: state.accountId,
        createdAt: now.toISOString(),
        data: { key_id: keyId, name: k.controls.name, expires_at: expiresAt },
      });
    }
    return out;
  },
};

/** N days (the webhook's expiring_days) before the main plan expires, while it is still active. */
const planExpiring: NotificationKind = {
  type: 'plan.expiring',
  onTime(state, now, options) {
    const sub = state.subscription;
    if (!sub || !balance.isPlanActive(balanceOf(state), now)) return [];
    const expires = Date.parse(sub.expiresAt);
    if (now.getTime() < expires - options.expiringDays * DAY_MS) return [];
    return [
      {
        type: 'plan.expiring',
        key: `plan.expiring|${state.accountId}|${periodOf(sub)}|${options.expiringDays}`,
        accountId: state.accountId,
        createdAt: now.toISOString(),
        data: { ...planData(sub), days_before: options.expiringDays, days_left: Math.ceil((expires - now.getTime()) / DAY_MS), ...balanceData(state) },
      },
    ];
  },
};

function expired(accountId: string, sub: SubscriptionTerms, at: string, state: AccountState): Notice {
  return {
    type: 'plan.expired',
    key: `plan.expired|${accountId}|${periodOf(sub)}`,
    accountId,
    createdAt: at,
    data: { ...planData(sub), ...balanceData(state) },
  };
}

/** The main plan expired (found by the clock, or by a renewal that came after the expiry). */
const planExpired: NotificationKind = {
  type: 'plan.expired',
  onTime(state, now, options) {
    const sub = state.subscription;
    if (!sub) return [];
    const expires = Date.parse(sub.expiresAt);
    if (now.getTime() < expires || Date.parse(options.registeredAt) >= expires) return [];
    return [expired(state.accountId, sub, now.toISOString(), state)];
  },
  onEvent({ before, logged, after }, options) {
    const old = before.subscription;
    if (logged.event.type !== 'SubscriptionRenewed' || !old) return [];
    const expires = Date.parse(old.expiresAt);
    if (Date.parse(logged.timestamp) < expires || Date.parse(options.registeredAt) >= expires) return [];
    return [expired(after.accountId, old, logged.timestamp, before)];
  },
};

const keyRevoked: NotificationKind = {
  type: 'key.revoked',
  onEvent({ logged, after }) {
    const e = logged.event;
    // A key revoked because its rotation failed was never shown to anyone (its secret is only
    // handed out once the rotation is recorded): the customer has nothing to be told about.
    if (e.type !== 'KeyRevoked' || e.data.reason === 'rotation_failed') return [];
    return [
      {
        type: 'key.revoked',
        key: `key.revoked|${e.data.keyId}`,
        accountId: e.data.accountId,
        createdAt: logged.timestamp,
        data: { key_id: e.data.keyId, reason: e.data.reason, ...balanceData(after) },
      },
    ];
  },
};

const extraTokensGranted: NotificationKind = {
  type: 'extra_tokens.granted',
  onEvent({ logged, after }) {
    const e = logged.event;
    if (e.type !== 'ExtraTokensGranted') return [];
    return [
      {
        type: 'extra_tokens.granted',
        key: `extra_tokens.granted|${logged.id}`,
        accountId: e.data.accountId,
        createdAt: logged.timestamp,
        data: { amount: e.data.amount, reason: e.data.reason, ...balanceData(after) },
      },
    ];
  },
};

/** A top-up ended: its pack bought with the saved card, or the charge failed (and auto top-up waits for the customer). */
const autoTopUpEnded = (type: 'auto_top_up.succeeded' | 'auto_top_up.failed'): NotificationKind => ({
  type,
  onEvent({ logged, after }) {
    const e = logged.event;
    if (type === 'auto_top_up.succeeded' ? e.type !== 'AutoTopUpSucceeded' : e.type !== 'AutoTopUpFailed') return [];
    const d = e.data as { accountId: string; topUpId: string; paymentId?: string; reason?: string };
    return [
      {
        type,
        key: `${type}|${d.topUpId}`,
        accountId: d.accountId,
        createdAt: logged.timestamp,
        data: { top_up_id: d.topUpId, ...(d.paymentId ? { payment_id: d.paymentId } : { reason: d.reason }), ...balanceData(after) },
      },
    ];
  },
});

/** A charge took the tokens left below a threshold the customer set (src/accounts/balance-alerts.ts): once per crossing. */
const balanceAlert: NotificationKind = {
  type: 'balance.alert',
  onEvent({ logged, after }) {
    const e = logged.event;
    if (e.type !== 'BalanceAlertCrossed') return [];
    return [
      {
        type: 'balance.alert',
        key: `balance.alert|${e.data.alertId}`,
        accountId: e.data.accountId,
        createdAt: logged.timestamp,
        data: { alert_id: e.data.alertId, threshold_tokens: e.data.thresholdTokens, tokens_left: e.data.tokensLeft, ...balanceData(after) },
      },
    ];
  },
};

/** How many adjusted requests a correction notice names (the statement lists them all). */
const MAX_LISTED_REQUESTS = 100;

/** A correction's adjustments of this account's charges; the adjustments of one correction found together are one notice. */
const correctionApplied: NotificationKind = {
  type: 'correction.applied',
  onEvent({ logged, after }) {
    const e = logged.event;
    if (e.type !== 'ChargeAdjusted') return [];
    const d = e.data;
    return [
      {
        type: 'correction.applied',
        key: `correction.applied|${d.accountId}|${d.correctionId}|${logged.id}`,
        accountId: d.accountId,
        createdAt: logged.timestamp,
        mergeKey: `correction|${d.accountId}|${d.correctionId}`,
        data: {
          correction_id: d.correctionId,
          adjustments: 1,
          delta: d.delta,
          quota_delta: d.quotaDelta,
          extra_delta: d.extraDelta,
          request_ids: [d.requestId],
          ...balanceData(after),
        },
      },
    ];
  },
  merge(earlier, later) {
    const a = earlier.data;
    const b = later.data;
    const sum = (k: string) => (a[k] as number) + (b[k] as number);
    return {
      ...earlier,
      data: {
        ...b,
        adjustments: sum('adjustments'),
        delta: sum('delta'),
        quota_delta: sum('quota_delta'),
        extra_delta: sum('extra_delta'),
        request_ids: [...(a.request_ids as string[]), ...(b.request_ids as string[])].slice(0, MAX_LISTED_REQUESTS),
      },
    };
  },
};

/** Every kind, in the order their notices for one event are sent. */
export const NOTIFICATION_KINDS: readonly NotificationKind[] = [
  quotaThreshold,
  keyLimitThreshold,
  planExpiring,
  planExpired,
  keyRevoked,
  keyExpired,
  extraTokensGranted,
  correctionApplied,
  autoTopUpEnded('auto_top_up.succeeded'),
  autoTopUpEnded('auto_top_up.failed'),
  balanceAlert,
];

/** Merges notices that share a merge key into the first of them (order otherwise kept). */
export function mergeNotices(notices: Notice[]): Notice[] {
  const out: Notice[] = [];
  const at = new Map<string, number>();
  for (const n of notices) {
    const i = n.mergeKey === undefined ? undefined : at.get(n.mergeKey);
    const kind = NOTIFICATION_KINDS.find((k) => k.type === n.type);
    if (i !== undefined && kind?.merge) {
      out[i] = kind.merge(out[i], n);
      continue;
    }
    if (n.mergeKey !== undefined) at.set(n.mergeKey, out.length);
    out.push(n);
  }
  return out;
}
