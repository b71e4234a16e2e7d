// Payments, refunds and disputes on the account stream (pure: part of the account decider).
// A payment is decided together with the grant it pays for, so they are appended in one append:
// no payment without its grant, no paid grant without its payment. Every act is idempotent by the
// processor's own id: a replayed notification finds it in the state and appends nothing.
import type { DomainEvent, EventDataByType, EventOf, PaidItem, PaymentFacts, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, InvariantViolation } from '../ledger/errors.ts';
import { type AccountState, balanceOf, requireOpen } from './account-state.ts';
import * as balance from './balance.ts';
import { bookedAmount, convertedPart, convertMoney, requireMinorUnits, tokensFor } from '../money/money.ts';
import { taxRefunded, type TaxApplied } from '../money/tax.ts';
import { paidAs, poolShare, type PaidInCurrency, type PaidLot } from './lots.ts';
import { unusedOf, type CreditLot, type CreditTerms } from './credits.ts';
import { cancellationAfterGrant, decideCancellation, evolveCancellation, type CancellationCommand } from './cancellation.ts';

/** The grant a payment buys, as the account decider's own command decides it. */
export type GrantCommand =
  | {
      type: 'Subscribe';
      accountId: string;
      plan: { planId: string; name: string; quota: number; validityDays: number; requestsPerMinute: number; models: string[] };
      now: Date;
    }
  | { type: 'GrantExtra'; accountId: string; amount: number; reason: string; terms?: Partial<CreditTerms> };

export interface RecordPaymentCommand extends PaymentFacts {
  type: 'RecordPayment';
  paymentId: string;
  reference?: string;
  /** What it buys: a plan period (the plan's terms) or a pack (tokens). */
  grant:
    | { kind: 'plan'; plan: Extract<GrantCommand, { type: 'Subscribe' }>['plan'] }
    | {
        kind: 'pack';
        packId: string;
        packName: string;
        tokens: number;
        /** The pack's credit terms as priced: its expiry counts from the payment. */
        credit?: { expiresInDays?: number; priority?: number; models?: string[] };
      };
  /** The tax the amount holds, decided by the tax table (absent: untaxed). */
  tax?: TaxApplied;
  /** Paid in another currency: as paid, and the rate it was converted at (amount, fee and tax are the conversions). */
  fx?: EventDataByType['PaymentReceived']['fx'];
  now: Date;
}

/** The exchange rate of the day, for a refund of a payment made in another currency (its FX gain or loss). */
export type RateNow = { rate: string; day: string; source: string };

export interface RefundPaymentCommand {
  type: 'RefundPayment';
  paymentId: string;
  refundId: string;
  /** In the currency the payment was made in. */
  amount: number;
  now: Date;
  rateNow?: RateNow;
}

export interface OpenDisputeCommand {
  type: 'OpenDispute';
  paymentId: string;
  disputeId: string;
  amount: number;
  suspendKeys: boolean;
}

export interface CloseDisputeCommand {
  type: 'CloseDispute';
  disputeId: string;
  outcome: 'won' | 'lost';
  fee: number;
  now: Date;
  rateNow?: RateNow;
}

export type PaymentCommand = RecordPaymentCommand | RefundPaymentCommand | OpenDisputeCommand | CloseDisputeCommand | CancellationCommand;

function requireLot(s: AccountState, paymentId: string): PaidLot {
  const lot = s.payments.get(paymentId);
  if (!lot) throw new DomainError('not_found', `payment ${paymentId} not found on this account`, { param: 'payment_id' });
  return lot;
}

/**
 * A pack's own unused tokens: a termed pack's, those of its lot while it is open; a pack in the
 * pool (used oldest first, the money rule), its share of the pool's use.
 */
function packUnused(lot: PaidLot, s: AccountState): number {
  const credit = s.credits.find((l) => l.lot === lot.credit);
  if (credit) return credit.closed ? 0 : unusedOf(credit);
  const b = balanceOf(s);
  if (lot.extraStart === undefined) return balance.extraRemaining({ ...b, credits: [] });
  const own = lot.tokens - lot.tokensWithdrawn;
  return Math.min(Math.max(0, b.extraGranted - b.extraUsed), own - poolShare(lot.extraStart, own, b.extraUsed));
}

/**
 * What a refund of `amount` takes back: first the payment's tax in proportion (taxRefunded), then,
 * of the rest, the tokens that money bought (by the rounding rule, on the running total refunded),
 * of which only the unused ones can be withdrawn: a plan period's while it is the current, unexpired
 * one; a pack's up to the extra tokens left. The money of the withdrawn tokens was still deferred
 * (the lot's value is the amount less its tax); the rest paid for tokens already used (refunded revenue).
 */
function decideRefund(
  s: AccountState,
  lot: PaidLot,
  refundId: string,
  given: number,
  now: Date,
  reason: 'refund' | 'dispute_lost',
  rateNow?: RateNow,
): EventOf<'PaymentRefunded'> {
  requireMinorUnits(given, 'amount');
  const paid = paidAs(lot);
  if (given > paid.amount - paid.refunded)
    throw invalid(`at most ${paid.amount - paid.refunded} minor units (${paid.currency}) of payment ${lot.paymentId} are left to refund`, { param: 'amount' });
  // A payment in another currency goes back at its own rate (cumulatively, so refunding all of it gives back all of its conversion).
  const amount = lot.fx
    ? convertedPart(
        { amount: lot.fx.refunded, currency: lot.fx.currency },
        { amount: lot.fx.refunded + given, currency: lot.fx.currency },
        lot.currency,
        lot.fx.rate,
      )
    : given;
  const bought = tokensFor(lot.refunded + amount, lot.amount, lot.tokens) - tokensFor(lot.refunded, lot.amount, lot.tokens);
  const b = balanceOf(s);
  const unused =
    lot.kind === 'plan' ? (s.subscription?.startsAt === lot.periodStartsAt && balance.isPlanActive(b, now) ? balance.mainRemaining(b) : 0) : packUnused(lot, s);
  const tokensWithdrawn = Math.min(bought, unused);
  const tax = taxRefunded(lot.amount, lot.tax, lot.refunded, amount);
  const net = amount - tax;
  const fromDeferred = Math.min(
    net,
    bookedAmount({ amount: lot.amount - lot.tax, per: Math.max(1, lot.tokens) }, lot.tokensWithdrawn, lot.tokensWithdrawn + tokensWithdrawn),
  );
  return {
    type: 'PaymentRefunded',
    data: {
      accountId: s.accountId,
      paymentId: lot.paymentId,
      refundId,
      amount,
      currency: lot.currency,
      reason,
      pool: lot.kind === 'plan' ? 'main' : 'extra',
      tokensWithdrawn,
      fromDeferred,
      refundedRevenue: net - fromDeferred,
      ...(lot.tax > 0 ? { taxRefunded: tax } : {}),
      ...(lot.fx ? { fx: refundFx(lot.fx, given, amount, rateNow, lot.currency) } : {}),
    },
  };
}

/** A refund in the payment's own currency: the amount, its tax, the payment's rate, the day's rate and the FX gain or loss between them. */
function refundFx(fx: PaidInCurrency, given: number, atPaymentRate: number, rateNow: RateNow | undefined, settlement: string) {
  const now = rateNow ?? { rate: fx.rate, day: fx.day, source: fx.source };
  return {
    currency: fx.currency,
    amount: given,
    taxRefunded: taxRefunded(fx.amount, fx.tax, fx.refunded, given),
    rate: fx.rate,
    day: fx.day,
    source: fx.source,
    now,
    gainLoss: atPaymentRate - convertMoney({ amount: given, currency: fx.currency }, settlement, now.rate).amount,
  };
}

export function decidePayment(c: PaymentCommand, s: AccountState, decideGrant: (g: GrantCommand) => StreamEvents['account'][]): StreamEvents['account'][] {
  requireOpen(s);
  switch (c.type) {
    case 'RecordPayment': {
      if (s.payments.has(c.paymentId)) return [];
      requireMinorUnits(c.amount, 'amount', { allowZero: true });
      if (c.fee !== null) requireMinorUnits(c.fee, 'fee', { allowZero: true });
      const grant =
        c.grant.kind === 'plan'
          ? decideGrant({ type: 'Subscribe', accountId: s.accountId, plan: c.grant.plan, now: c.now })
          : decideGrant({
              type: 'GrantExtra',
              accountId: s.accountId,
              amount: c.grant.tokens,
              reason: `pack ${c.grant.packName}`,
              terms: packTerms(c.grant.credit, c.now),
            });
      const item: PaidItem =
        c.grant.kind === 'plan'
          ? { kind: 'plan', planId: c.grant.plan.planId, tokens: c.grant.plan.quota }
          : { kind: 'pack', packId: c.grant.packId, tokens: c.grant.tokens };
      const paid: EventDataByType['PaymentReceived'] = {
        accountId: s.accountId,
        paymentId: c.paymentId,
        processor: c.processor,
        processorPaymentId: c.processorPaymentId,
        amount: c.amount,
        currency: c.currency,
        fee: c.fee,
        item,
        receivedAt: c.now.toISOString(),
      };
      if (c.reference) paid.reference = c.reference;
      if (c.fx) paid.fx = c.fx;
      if (c.tax) {
        if (c.tax.amount > c.amount) throw invalid(`the tax ${c.tax.amount} is more than the amount paid ${c.amount}`, { param: 'amount' });
        paid.tax = c.tax;
      }
      return [{ type: 'PaymentReceived', data: paid }, ...grant.map((g) => ({ ...g, data: { ...g.data, paymentId: c.paymentId } }) as StreamEvents['account'])];
    }
    case 'RefundPayment': {
      const lot = requireLot(s, c.paymentId);
      if (lot.refundIds.includes(c.refundId)) return [];
      return [decideRefund(s, lot, c.refundId, c.amount, c.now, 'refund', c.rateNow)];
    }
    case 'OpenDispute': {
      const lot = requireLot(s, c.paymentId);
      if (s.disputes.has(c.disputeId)) return [];
      requireMinorUnits(c.amount, 'amount');
      return [
        {
          type: 'PaymentDisputed',
          data: {
            accountId: s.accountId,
            paymentId: lot.paymentId,
            disputeId: c.disputeId,
            amount: Math.min(c.amount, paidAs(lot).amount),
            currency: paidAs(lot).currency,
            suspendsKeys: c.suspendKeys,
          },
        },
      ];
    }
    case 'CancelSubscription':
    case 'ResumeSubscription':
      return decideCancellation(c, s);
    case 'CloseDispute': {
      const d = s.disputes.get(c.disputeId);
      if (!d) throw new DomainError('not_found', `dispute ${c.disputeId} not found on this account`);
      if (d.outcome !== null) return [];
      requireMinorUnits(c.fee, 'fee', { allowZero: true });
      const closed: EventOf<'DisputeClosed'> = {
        type: 'DisputeClosed',
        data: { accountId: s.accountId, paymentId: d.paymentId, disputeId: c.disputeId, outcome: c.outcome, fee: c.fee },
      };
      if (c.outcome === 'won') return [closed];
      const lot = requireLot(s, d.paymentId);
      // A lost dispute is a refund of what is still unrefunded of the disputed amount (plus its fee, on the close).
      const paid = paidAs(lot);
      const amount = Math.min(d.amount, paid.amount - paid.refunded);
      return amount > 0 ? [closed, decideRefund(s, lot, c.disputeId, amount, c.now, 'dispute_lost', c.rateNow)] : [closed];
    }
  }
}

/** The account's state after a payment event (the grant events evolve as any grant). */
export function evolvePayment(s: AccountState, e: DomainEvent): AccountState {
  switch (e.type) {
    case 'PaymentReceived': {
      const d = e.data;
      const lot: PaidLot = {
        paymentId: d.paymentId,
        processor: d.processor,
        processorPaymentId: d.processorPaymentId,
        amount: d.amount,
        currency: d.currency,
        fee: d.fee,
        receivedAt: d.receivedAt,
        reference: d.reference ?? null,
        kind: d.item.kind,
        itemId: d.item.kind === 'plan' ? d.item.planId : d.item.packId,
        tokens: d.item.tokens,
        periodStartsAt: null,
        refunded: 0,
        refundIds: [],
        tokensWithdrawn: 0,
        tax: d.tax?.amount ?? 0,
        taxRefunded: 0,
      };
      if (d.fx)
        lot.fx = {
          currency: d.fx.currency,
          amount: d.fx.amount,
          tax: d.fx.tax,
          rate: d.fx.rate,
          day: d.fx.day,
          source: d.fx.source,
          refunded: 0,
          taxRefunded: 0,
        };
      // The pack's grant, appended with the payment, is the account's next grant of extra tokens:
      // a lot of its own if it has terms, else the pool's newest.
      if (d.item.kind === 'pack') {
        lot.credit = s.extraLots;
        lot.extraStart = s.extraGranted;
      }
      return { ...s, payments: s.payments.set(d.paymentId, lot) };
    }
    case 'PaymentRefunded': {
      const d = e.data;
      const lot = s.payments.get(d.paymentId);
      if (!lot) return s;
      const termed = s.credits.some((l) => l.lot === lot.credit);
      // Tokens withdrawn from a pack in the pool leave it: the packs granted after it move up.
      const shifted =
        d.pool === 'extra' && !termed && lot.extraStart !== undefined && d.tokensWithdrawn > 0
          ? s.payments.map((p) => (p.extraStart !== undefined && p.extraStart > lot.extraStart! ? { ...p, extraStart: p.extraStart - d.tokensWithdrawn } : p))
          : s.payments;
      const payments = shifted.set(d.paymentId, {
        ...lot,
        refunded: lot.refunded + d.amount,
        refundIds: [...lot.refundIds, d.refundId],
        tokensWithdrawn: lot.tokensWithdrawn + d.tokensWithdrawn,
        taxRefunded: lot.taxRefunded + (d.taxRefunded ?? 0),
        ...(lot.fx && d.fx ? { fx: { ...lot.fx, refunded: lot.fx.refunded + d.fx.amount, taxRefunded: lot.fx.taxRefunded + d.fx.taxRefunded } } : {}),
      });
      if (d.pool === 'main' && s.subscription) return { ...s, payments, subscription: { ...s.subscription, quota: s.subscription.quota - d.tokensWithdrawn } };
      if (d.pool !== 'extra') return { ...s, payments };
      return termed
        ? { ...s, payments, credits: withdrawn(s.credits, lot.credit!, d.tokensWithdrawn) }
        : { ...s, payments, extraGranted: s.extraGranted - d.tokensWithdrawn };
    }
    case 'PaymentDisputed': {
      const d = e.data;
      return { ...s, disputes: s.disputes.set(d.disputeId, { paymentId: d.paymentId, amount: d.amount, suspendsKeys: d.suspendsKeys, outcome: null }) };
    }
    case 'DisputeClosed': {
      const d = s.disputes.get(e.data.disputeId);
      return d ? { ...s, disputes: s.disputes.set(e.data.disputeId, { ...d, outcome: e.data.outcome }) } : s;
    }
    case 'SubscriptionCancelled':
    case 'SubscriptionResumed':
      return evolveCancellation(s, e);
    default:
      return s;
  }
}

/**
 * After a plan period is granted: the lot of a paid one learns the period's start (to tell it from
 * later periods), and a cancellation whose end the new period runs past is over (a new purchase).
 */
export function withPaidPeriod(s: AccountState, paymentId: string | undefined, startsAt: string): AccountState {
  const lot = paymentId ? s.payments.get(paymentId) : undefined;
  const paid = lot ? { ...s, payments: s.payments.set(lot.paymentId, { ...lot, periodStartsAt: startsAt }) } : s;
  return s.cancellation && s.subscription ? { ...paid, cancellation: cancellationAfterGrant(s.cancellation, s.subscription.expiresAt) } : paid;
}

/** A dispute that suspends the account's keys is open. */
export const suspendedByDispute = (s: AccountState): boolean => s.disputes.some((d) => d.outcome === null && d.suspendsKeys);

/** The lots after a refund withdrew `tokens` unused tokens from the pack's lot. */
function withdrawn(credits: CreditLot[], lot: number, tokens: number): CreditLot[] {
  if (tokens === 0) return credits;
  const i = credits.findIndex((l) => l.lot === lot);
  if (credits[i].tokens - credits[i].used < tokens)
    throw new InvariantViolation(`a refund withdraws ${tokens} tokens from credit lot ${lot}, which has fewer unused`);
  const next = credits.slice();
  next[i] = { ...next[i], tokens: next[i].tokens - tokens };
  return next;
}

/** A pack's credit terms for a purchase at `now`: its expiry counts from then. */
function packTerms(credit: { expiresInDays?: number; priority?: number; models?: string[] } | undefined, now: Date): Partial<CreditTerms> {
  if (!credit) return {};
  return {
    expiresAt: credit.expiresInDays ? new Date(now.getTime() + credit.expiresInDays * 86_400_000).toISOString() : null,
    priority: credit.priority,
    models: credit.models ?? null,
  };
}
