// How an account's payments and cancellation read in an answer (/v1/subscription, /v1/payments,
// the session API): from the account's state, which holds them as lots.
import { formatMoney } from '../money/money.ts';
import type { PaidLot } from './lots.ts';
import type { AccountState } from './account-state.ts';

/** A payment as its receipt and the listings show it. */
export function paymentBody(accountId: string, lot: PaidLot) {
  return {
    object: 'payment',
    id: lot.paymentId,
    account_id: accountId,
    processor: lot.processor,
    amount: lot.amount,
    currency: lot.currency,
    display: formatMoney(lot),
    fee: lot.fee,
    tax: lot.tax,
    received_at: lot.receivedAt,
    reference: lot.reference,
    item: lot.kind === 'plan' ? { kind: 'plan', plan_id: lot.itemId, tokens: lot.tokens } : { kind: 'pack', pack_id: lot.itemId, tokens: lot.tokens },
    period_starts_at: lot.periodStartsAt,
    refunded: lot.refunded,
    tax_refunded: lot.taxRefunded,
    tokens_withdrawn: lot.tokensWithdrawn,
  };
}

/** A recurring plan's cancellation as the reads show it: the plan ends at `ends_at` and does not renew (null: none). */
export function cancellationBody(s: AccountState) {
  const c = s.cancellation;
  if (!c) return null;
  return {
    object: 'cancellation',
    processor: c.processor,
    subscription_id: c.processorSubscriptionId,
    plan_id: c.planId,
    kind: c.kind,
    cancelled_at: c.cancelledAt,
    ends_at: c.endsAt,
  };
}

/** An account's payments in the order they were received (the state's map has no order). */
export const paymentsInOrder = (payments: Iterable<PaidLot>): PaidLot[] =>
  [...payments].sort((a, b) => a.receivedAt.localeCompare(b.receivedAt) || a.paymentId.localeCompare(b.paymentId));
