// A recurring plan cancelled at the processor (pure: part of the account decider). Cancelling stops
// the renewals, not the period already paid for: its tokens were bought, so the plan runs to the
// period's expiry and then ends. The cancellation is kept on the account until a later grant runs
// past that end (a new purchase), or the customer takes it back before the end (resumed).
import type { DomainEvent, EventDataByType, PaymentProcessor, StreamEvents } from '../ledger/events.ts';
import type { AccountState } from './account-state.ts';

/** A cancellation as the account keeps it (the event without its account id). */
export type Cancellation = Omit<EventDataByType['SubscriptionCancelled'], 'accountId'>;
export type CancellationKind = Cancellation['kind'];

export interface CancelSubscriptionCommand {
  type: 'CancelSubscription';
  processor: PaymentProcessor;
  processorSubscriptionId: string;
  kind: CancellationKind;
  now: Date;
}

export interface ResumeSubscriptionCommand {
  type: 'ResumeSubscription';
  processor: PaymentProcessor;
  processorSubscriptionId: string;
}

export type CancellationCommand = CancelSubscriptionCommand | ResumeSubscriptionCommand;

const sameSubscription = (c: Cancellation | null | undefined, processor: PaymentProcessor, id: string): c is Cancellation =>
  !!c && c.processor === processor && c.processorSubscriptionId === id;

/** Idempotent by the processor's subscription id: a second notice of the same cancellation appends nothing. */
export function decideCancellation(c: CancellationCommand, s: AccountState): StreamEvents['account'][] {
  const known = sameSubscription(s.cancellation, c.processor, c.processorSubscriptionId);
  if (c.type === 'ResumeSubscription') {
    // Only a cancellation at period end can be taken back; a deleted subscription is over at the processor.
    if (!known || s.cancellation!.kind !== 'at_period_end') return [];
    return [{ type: 'SubscriptionResumed', data: { accountId: s.accountId, processor: c.processor, processorSubscriptionId: c.processorSubscriptionId } }];
  }
  // A deletion after a cancellation at period end is that cancellation taking effect: nothing new.
  if (known) return [];
  return [
    {
      type: 'SubscriptionCancelled',
      data: {
        accountId: s.accountId,
        processor: c.processor,
        processorSubscriptionId: c.processorSubscriptionId,
        planId: s.subscription?.planId ?? null,
        kind: c.kind,
        cancelledAt: c.now.toISOString(),
        endsAt: s.subscription?.expiresAt ?? null,
      },
    },
  ];
}

export function evolveCancellation(s: AccountState, e: DomainEvent): AccountState {
  switch (e.type) {
    case 'SubscriptionCancelled': {
      const { accountId: _a, ...cancellation } = e.data;
      return { ...s, cancellation };
    }
    case 'SubscriptionResumed':
      return sameSubscription(s.cancellation, e.data.processor, e.data.processorSubscriptionId) ? { ...s, cancellation: null } : s;
    default:
      return s;
  }
}

/** A plan period granted after a cancellation: one that runs past the cancelled end is a new purchase, so the plan no longer ends there. */
export function cancellationAfterGrant(c: Cancellation | null | undefined, expiresAt: string): Cancellation | null {
  if (!c) return null;
  return c.endsAt === null || Date.parse(expiresAt) > Date.parse(c.endsAt) ? null : c;
}
