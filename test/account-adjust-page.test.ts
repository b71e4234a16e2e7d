// A page of one account's adjustments in one command (AdjustPage, what a correction's apply sends):
// the same events, the same state, as its charges adjusted one at a time; refused whole when the
// account was adjusted since its figures were read.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import type { AccountState } from '../src/accounts/account-state.ts';
import type { ChargeToAdjust } from '../src/accounts/account-adjust.ts';
import { fold } from '../src/ledger/decider.ts';
import { DomainError } from '../src/ledger/errors.ts';
import type { DomainEvent } from '../src/ledger/events.ts';

const now = new Date('2026-11-20T12:00:00Z');
const plan = { planId: 'pro', name: 'Pro', quota: 1000, validityDays: 30, requestsPerMinute: 60, models: ['cx/gen-6-terra'] };

function run(state: AccountState, c: AccountCommand): { events: DomainEvent[]; state: AccountState } {
  const events = accountDecider.decide(c, state);
  return { events, state: fold(accountDecider, events, state) };
}

/** An account with three charges of 300 tokens (900 of its 1,000 used from the plan). */
function charged(): AccountState {
  let s = run(accountDecider.initialState(), { type: 'Open', accountId: 'acme', name: 'Acme' }).state;
  s = run(s, { type: 'Subscribe', accountId: 'acme', plan, now }).state;
  for (const h of ['h1', 'h2', 'h3']) {
    s = run(s, { type: 'Reserve', holdId: h, requestId: `r-${h}`, keyId: 'k', model: 'cx/gen-6-terra', kind: 'chat', amount: 300, now, ttlMs: 60_000 }).state;
    s = run(s, {
      type: 'SettleChat',
      holdId: h,
      multiplierMilli: 1000,
      promptTokens: 150,
      completionTokens: 150,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
    }).state;
  }
  return s;
}

const charge = (n: number, billedCorrected: number, extra: Partial<ChargeToAdjust> = {}): ChargeToAdjust => ({
  correctionId: 'c1',
  correctionRevision: 2,
  chargeEventId: `e${n}`,
  requestId: `r-h${n}`,
  model: 'cx/gen-6-terra',
  chargedAt: now.toISOString(),
  billedBefore: 300,
  billedCorrected,
  multiplierMilliBefore: 1000,
  multiplierMilliCorrected: billedCorrected === 300 ? 1000 : 2000,
  fromQuotaBefore: 300,
  ...extra,
});

test('a page decides the events and leaves the state its charges adjusted one at a time would', () => {
  // An increase past the plan (the rest from extra tokens... none: taken as extra used), an
  // unchanged charge (nothing), one already decided by a newer correction (nothing), a refund.
  const page = [charge(1, 600), charge(2, 300), charge(3, 100, { current: { billed: 300, quotaDelta: 0, multiplierMilli: 1000, rank: 5 } }), charge(4, 150)];
  const paged = run(charged(), { type: 'AdjustPage', adjustmentsSeen: 0, lastAdjustment: '', charges: page });

  let one = charged();
  const events: DomainEvent[] = [];
  for (const c of page) {
    const r = run(one, { type: 'Adjust', ...c, adjustmentsSeen: one.adjustments, lastAdjustment: one.lastAdjustment });
    events.push(...r.events);
    one = r.state;
  }
  assert.equal(paged.events, events);
  assert.equal(paged.state, one);
  assert.equal(
    paged.events.map((e) => (e.data as { chargeEventId: string; delta: number; quotaDelta: number; extraDelta: number }).chargeEventId),
    ['e1', 'e4'],
  );
  const [up, down] = paged.events.map((e) => e.data as { delta: number; quotaDelta: number; extraDelta: number });
  assert.equal([up.delta, up.quotaDelta, up.extraDelta], [300, 100, 200], "the increase takes the plan's last 100, then 200 as extra");
  assert.equal([down.delta, down.quotaDelta], [-150, -150], 'the refund goes back to the plan, decided after the increase');
  assert.equal([paged.state.adjustments, paged.state.lastAdjustment], [2, 'c1|e4']);
});

test('a page whose figures were read before another adjustment is refused whole', () => {
  const s = run(charged(), { type: 'AdjustPage', adjustmentsSeen: 0, lastAdjustment: '', charges: [charge(1, 200)] }).state;
  for (const seen of [
    { adjustmentsSeen: 0, lastAdjustment: '' },
    { adjustmentsSeen: 1, lastAdjustment: 'c0|e1' },
  ]) {
    try {
      accountDecider.decide({ type: 'AdjustPage', ...seen, charges: [charge(2, 200), charge(3, 200)] }, s);
      assert.unreachable('a stale page must be refused');
    } catch (err) {
      assert.instance(err, DomainError);
      assert.is((err as DomainError).code, 'conflict');
    }
  }
  assert.is(run(s, { type: 'AdjustPage', adjustmentsSeen: 1, lastAdjustment: 'c1|e1', charges: [charge(2, 200), charge(3, 200)] }).events.length, 2);
});

test.run();
