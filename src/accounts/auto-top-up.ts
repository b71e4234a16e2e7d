// Auto top-up on the account stream (pure: part of the account decider). A customer saves a card
// and chooses a threshold and a pack; the charge that takes the tokens left from at or above the
// threshold to below it starts one top-up, in the same append as the charge. Charges on one
// account are decided one after another against the stream's revision, on every gateway, so
// however many calls race only one of them crosses: exactly one top-up per crossing. While it is
// pending none other starts; once it ends the next one needs the balance back at or above the
// threshold and a new crossing. A failed top-up is not tried again until the customer sets it again.
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import { type AccountState, type AutoTopUp, balanceOf, requireOpen } from './account-state.ts';

export type { AutoTopUp };
import * as balance from './balance.ts';

export type SavedCard = Omit<EventDataByType['PaymentMethodSaved'], 'accountId'>;

export type AutoTopUpCommand =
  | { type: 'SavePaymentMethod'; card: SavedCard }
  | { type: 'SetAutoTopUp'; thresholdTokens: number; packId: string }
  | { type: 'TurnOffAutoTopUp' }
  | { type: 'SettleTopUp'; topUpId: string; outcome: { paymentId: string } | { failure: string } };

/**
 * Tokens the account has left: the main plan's while it is active at `now` (null: counted), and
 * the extra tokens (holds not counted: they settle or come back).
 */
export function tokensLeft(s: AccountState, now: Date | null): number {
  const b = balanceOf(s);
  return (now === null || balance.isPlanActive(b, now) ? balance.mainRemaining(b) : 0) + balance.extraRemaining(b);
}

export function decideAutoTopUp(c: AutoTopUpCommand, s: AccountState): StreamEvents['account'][] {
  requireOpen(s);
  const accountId = s.accountId;
  switch (c.type) {
    case 'SavePaymentMethod': {
      const same = s.paymentMethod && s.paymentMethod.paymentMethodId === c.card.paymentMethodId && s.paymentMethod.customerId === c.card.customerId;
      return same ? [] : [{ type: 'PaymentMethodSaved', data: { accountId, ...c.card } }];
    }
    case 'SetAutoTopUp': {
      requireTokenAmount(c.thresholdTokens, 'threshold_tokens');
      if (!s.paymentMethod)
        throw new DomainError('conflict', 'save a card first (POST /v1/auto-top-up/card): auto top-up charges a saved card', { param: 'payment_method' });
      if (s.autoTopUp?.pending)
        throw new DomainError('conflict', `top-up ${s.autoTopUp.pending} is still being charged; set auto top-up again once it ends`, { param: 'auto_top_up' });
      const t = s.autoTopUp;
      if (t && !t.failed && t.thresholdTokens === c.thresholdTokens && t.packId === c.packId) return [];
      return [{ type: 'AutoTopUpSet', data: { accountId, thresholdTokens: c.thresholdTokens, packId: c.packId } }];
    }
    case 'TurnOffAutoTopUp':
      // A pending top-up is being charged: it ends first (succeeded or failed), so no charge is left without its settlement.
      if (s.autoTopUp?.pending)
        throw new DomainError('conflict', `top-up ${s.autoTopUp.pending} is still being charged; turn auto top-up off once it ends`, { param: 'auto_top_up' });
      return s.autoTopUp ? [{ type: 'AutoTopUpTurnedOff', data: { accountId } }] : [];
    case 'SettleTopUp': {
      // Settled once: a second runner (another gateway) finding it settled appends nothing.
      if (s.autoTopUp?.pending !== c.topUpId) return [];
      if ('paymentId' in c.outcome) return [{ type: 'AutoTopUpSucceeded', data: { accountId, topUpId: c.topUpId, paymentId: c.outcome.paymentId } }];
      return [{ type: 'AutoTopUpFailed', data: { accountId, topUpId: c.topUpId, reason: c.outcome.failure.slice(0, 500) } }];
    }
  }
}

/**
 * The top-up a charge of `charged` tokens starts, if it takes the tokens left across the threshold.
 * `at`: when the charged call started (its hold's time), so the decision reads no clock.
 */
export function topUpOnCharge(s: AccountState, charged: number, holdId: string, at: Date | null): StreamEvents['account'] | null {
  const t = s.autoTopUp;
  if (!t || t.pending || t.failed || !s.paymentMethod || charged <= 0) return null;
  const left = tokensLeft(s, at);
  if (left < t.thresholdTokens || left - charged >= t.thresholdTokens) return null;
  return {
    type: 'AutoTopUpTriggered',
    data: {
      accountId: s.accountId,
      topUpId: `topup_${holdId}`.slice(0, 100),
      packId: t.packId,
      thresholdTokens: t.thresholdTokens,
      tokensLeft: left - charged,
      chargeHoldId: holdId,
    },
  };
}

export function evolveAutoTopUp(s: AccountState, e: StreamEvents['account']): AccountState {
  switch (e.type) {
    case 'PaymentMethodSaved': {
      const { accountId: _a, ...card } = e.data;
      return { ...s, paymentMethod: card };
    }
    case 'AutoTopUpSet':
      return { ...s, autoTopUp: { thresholdTokens: e.data.thresholdTokens, packId: e.data.packId, pending: null, failed: null } };
    case 'AutoTopUpTurnedOff':
      return { ...s, autoTopUp: null };
    case 'AutoTopUpTriggered':
      return s.autoTopUp ? { ...s, autoTopUp: { ...s.autoTopUp, pending: e.data.topUpId } } : s;
    case 'AutoTopUpSucceeded':
      return s.autoTopUp ? { ...s, autoTopUp: { ...s.autoTopUp, pending: null } } : s;
    case 'AutoTopUpFailed':
      return s.autoTopUp ? { ...s, autoTopUp: { ...s.autoTopUp, pending: null, failed: e.data.reason } } : s;
    default:
      return s;
  }
}

/** A threshold as the API takes it: a whole number of tokens, at least 1. */
export function requireThreshold(v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw invalid('threshold_tokens must be a whole number of tokens, at least 1', { param: 'threshold_tokens' });
  return v;
}
