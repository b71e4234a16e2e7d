// Verify's lot check (src/books/lot-check.ts): a log whose refund names no paid lot is reported,
// and a check continued from another thread's state (structured-cloned, as a worker posts it)
// finds what one check over the whole log finds.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LotCheck } from '../src/books/lot-check.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';

const event = (position: number, type: string, data: Record<string, unknown>): ProjectedEvent => ({
  id: `e${position}`,
  type,
  position,
  timestamp: new Date(Date.UTC(2026, 0, 1 + position)).toISOString(),
  data,
});

const log = [
  event(1, 'AccountOpened', { accountId: 'a1', name: 'A' }),
  event(2, 'SettlementCurrencySet', { currency: 'EUR' }),
  event(3, 'PaymentRefunded', { accountId: 'a1', paymentId: 'p-none', refundId: 'r1', amount: 100 }),
];

test('a refund of a payment no lot holds is the check’s problem, found here or continued from a thread’s state', () => {
  const whole = new LotCheck();
  for (const e of log) whole.add(e);
  assert.match(whole.finish() ?? '', /refund r1: no lot for payment p-none/);

  const first = new LotCheck();
  for (const e of log.slice(0, 2)) first.add(e);
  assert.is(first.problem, null, 'nothing wrong before the refund');
  const moved = structuredClone({ state: first.state(), problem: first.problem });
  const rest = new LotCheck(moved.state, moved.problem);
  assert.is(rest.currency, 'EUR', 'the settlement currency crosses with the state');
  rest.add(log[2]);
  assert.is(rest.finish(), whole.problem);

  const found = new LotCheck(moved.state, 'found on the thread');
  found.add(log[2]);
  assert.is(found.finish(), 'found on the thread', 'the first problem stays the one reported');
});

test.run();
