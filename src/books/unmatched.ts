// Processor payments that matched nothing (no known account, plan or pack, or another currency):
// one stream, so each is recorded once however often its notification is delivered, and the
// operator lists them in one read. Nothing is granted for them.
import type { Decider } from '../ledger/decider.ts';
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';

export type UnmatchedPayment = EventDataByType['PaymentUnmatched'];
export interface UnmatchedState {
  byId: Record<string, UnmatchedPayment>;
}

const keyOf = (p: Pick<UnmatchedPayment, 'processor' | 'processorPaymentId'>) => `${p.processor}|${p.processorPaymentId}`;

export const unmatchedDecider: Decider<UnmatchedState, { type: 'Record'; payment: UnmatchedPayment }, StreamEvents['unmatchedPayments']> = {
  initialState: () => ({ byId: {} }),
  decide: (c, s) => (s.byId[keyOf(c.payment)] ? [] : [{ type: 'PaymentUnmatched', data: c.payment }]),
  evolve: (s, e) => (e.type === 'PaymentUnmatched' ? { byId: { ...s.byId, [keyOf(e.data)]: e.data } } : s),
};
