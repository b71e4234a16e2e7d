// How an account's payments, cancellation and lots of credit read in an answer (/v1/subscription,
// /v1/payments, the session API, the console): from the account's state, which holds them as lots.
import { formatMoney } from '../money/money.ts';
import type { PaidLot } from './lots.ts';
import type { AccountState } from './account-state.ts';
import { drawOrder, isLive, type CreditLot } from './credits.ts';

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
    paid_in: lot.fx
      ? {
          amount: lot.fx.amount,
          currency: lot.fx.currency,
          display: formatMoney({ amount: lot.fx.amount, currency: lot.fx.currency }),
          refunded: lot.fx.refunded,
          rate: lot.fx.rate,
          day: lot.fx.day,
          source: lot.fx.source,
        }
      : null,
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

/** The lots of credit with terms as a customer reads them: the open ones in draw-down order (any model's), then those expired. */
export function creditsBody(credits: readonly CreditLot[], now: Date) {
  const open = drawOrder(credits, null, null);
  const order = [...open, ...credits.map((_, i) => i).filter((i) => !open.includes(i))];
  return order.map((i) => {
    const l = credits[i];
    const live = isLive(l, now);
    return {
      // What was granted (less refunds) stays shown once the lot has expired.
      granted: l.tokens + l.expired,
      used: l.used,
      remaining: live ? Math.max(0, l.tokens - l.used) : 0,
      expires_at: l.expiresAt,
      priority: l.priority,
      models: l.models,
      status: live ? 'active' : 'expired',
    };
  });
}
