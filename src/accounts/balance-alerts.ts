// Balance alerts on the account stream (pure: part of the account decider). The customer sets up to
// five tokens-left thresholds; the charge that takes the tokens left from at or above one to below
// it appends a BalanceAlertCrossed with itself. Charges on one account are decided one after another
// against the stream's revision, on every gateway, so however many calls race only one crosses each
// threshold; the next alert at that threshold needs the balance back at or above it (a payment, a
// grant) and a new crossing.
//
// Each alert, and each failed auto top-up, is a notice to email: the account remembers the ones not
// emailed yet. A mailer claims one before it sends it (NoticeClaimed, for CLAIM_MS: no other gateway
// mails it meanwhile) and NoticeEmailed takes it off, once. A claim whose mailer died lapses, and the
// notice is mailed by the next.
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { invalid } from '../ledger/errors.ts';
import { type AccountState, requireOpen } from './account-state.ts';
import { tokensLeft } from './auto-top-up.ts';

export const MAX_BALANCE_ALERTS = 5;

/** How long a claim keeps other mailers off a notice: far longer than a mail takes. */
export const CLAIM_MS = 5 * 60_000;

export type BalanceAlertCommand =
  | { type: 'SetBalanceAlerts'; thresholdsTokens: number[] }
  | { type: 'ClaimNotice'; noticeId: string; by: string; now: Date }
  | { type: 'RecordNoticeEmailed'; noticeId: string; recipients: number };

/** Thresholds as the API takes them: whole numbers of tokens, at least 1, distinct, at most five; kept highest first. */
export function requireAlertThresholds(v: unknown): number[] {
  const param = 'thresholds_tokens';
  if (!Array.isArray(v)) throw invalid('thresholds_tokens must be an array of token counts ([] turns the alerts off)', { param });
  if (v.length > MAX_BALANCE_ALERTS) throw invalid(`thresholds_tokens holds at most ${MAX_BALANCE_ALERTS} thresholds`, { param });
  for (const t of v)
    if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 1)
      throw invalid('each of thresholds_tokens must be a whole number of tokens, at least 1', { param });
  if (new Set(v).size !== v.length) throw invalid('thresholds_tokens must not repeat a threshold', { param });
  return [...(v as number[])].sort((a, b) => b - a);
}

export function decideBalanceAlerts(c: BalanceAlertCommand, s: AccountState): StreamEvents['account'][] {
  requireOpen(s);
  const accountId = s.accountId;
  switch (c.type) {
    case 'SetBalanceAlerts': {
      const now = s.balanceAlerts ?? [];
      const same = now.length === c.thresholdsTokens.length && now.every((t, i) => t === c.thresholdsTokens[i]);
      return same ? [] : [{ type: 'BalanceAlertsSet', data: { accountId, thresholdsTokens: c.thresholdsTokens } }];
    }
    case 'ClaimNotice': {
      const n = (s.unmailed ?? []).find((u) => u.id === c.noticeId);
      // Its own claim a mailer may renew (its last mail failed); another's only once it lapsed.
      if (!n || (n.claimedBy !== c.by && n.claimedUntil !== null && Date.parse(n.claimedUntil) > c.now.getTime())) return [];
      return [{ type: 'NoticeClaimed', data: { accountId, noticeId: c.noticeId, by: c.by, until: new Date(c.now.getTime() + CLAIM_MS).toISOString() } }];
    }
    case 'RecordNoticeEmailed':
      return (s.unmailed ?? []).some((u) => u.id === c.noticeId)
        ? [{ type: 'NoticeEmailed', data: { accountId, noticeId: c.noticeId, recipients: c.recipients } }]
        : [];
  }
}

/**
 * The alerts a charge of `charged` tokens raises: one per threshold it takes the tokens left across.
 * `at`: when the charged call started (its hold's time), so the decision reads no clock.
 */
export function alertsOnCharge(
  s: AccountState,
  charged: number,
  holdId: string,
  at: Date | null,
): Array<{ type: 'BalanceAlertCrossed'; data: EventDataByType['BalanceAlertCrossed'] }> {
  const thresholds = s.balanceAlerts ?? [];
  if (thresholds.length === 0 || charged <= 0) return [];
  const left = tokensLeft(s, at);
  return thresholds
    .filter((t) => left >= t && left - charged < t)
    .map((t) => ({
      type: 'BalanceAlertCrossed' as const,
      data: { accountId: s.accountId, alertId: `alert_${t}_${holdId}`.slice(0, 100), thresholdTokens: t, tokensLeft: left - charged, chargeHoldId: holdId },
    }));
}

const withUnmailed = (s: AccountState, id: string): AccountState => ({ ...s, unmailed: [...(s.unmailed ?? []), { id, claimedBy: null, claimedUntil: null }] });

export function evolveBalanceAlerts(s: AccountState, e: StreamEvents['account']): AccountState {
  switch (e.type) {
    case 'BalanceAlertsSet':
      return { ...s, balanceAlerts: e.data.thresholdsTokens };
    case 'BalanceAlertCrossed':
      return withUnmailed(s, e.data.alertId);
    case 'AutoTopUpFailed':
      return withUnmailed(s, e.data.topUpId);
    case 'NoticeClaimed': {
      const { noticeId, by, until } = e.data;
      return { ...s, unmailed: (s.unmailed ?? []).map((u) => (u.id === noticeId ? { ...u, claimedBy: by, claimedUntil: until } : u)) };
    }
    case 'NoticeEmailed':
      return { ...s, unmailed: (s.unmailed ?? []).filter((u) => u.id !== e.data.noticeId) };
    default:
      return s;
  }
}
