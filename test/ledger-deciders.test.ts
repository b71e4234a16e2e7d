// The pure domain: pricing arithmetic and the deciders, with exact numbers.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { type AccountState, availableTokens, balanceOf } from '../src/accounts/account-state.ts';
import { keyDecider } from '../src/keys/key-decider.ts';
import { modelDecider } from '../src/catalogue/model-decider.ts';
import { fold } from '../src/ledger/decider.ts';
import { DomainError, InvariantViolation } from '../src/ledger/errors.ts';
import { applyMultiplier, chatCharge, imageCharge, rawTokensCoveredBy, toMilli } from '../src/money/pricing.ts';
import type { DomainEvent, StreamEvents } from '../src/ledger/events.ts';
import { gcra } from '../src/ledger/call-rate.ts';
import { splitCharge, availableTokens as balanceAvailable } from '../src/accounts/balance.ts';
import { reserveCommand, runAccount } from './support/account-commands.ts';

const now = new Date('2026-11-20T12:00:00Z');
const plan = { planId: 'pro', name: 'Pro', quota: 1000, validityDays: 30, requestsPerMinute: 60, models: ['cx/gen-6-terra', 'alpha-haiku-4.5'] };

const run = runAccount;

function subscribed(): AccountState {
  let s = run(accountDecider.initialState(), { type: 'Open', accountId: 'acme', name: 'Acme' }).state;
  s = run(s, { type: 'Subscribe', accountId: 'acme', plan, now }).state;
  return s;
}

const reserve = (holdId: string, amount: number, model = 'cx/gen-6-terra'): AccountCommand => reserveCommand(holdId, amount, model, now);

function throwsCode(fn: () => unknown, code: string) {
  try {
    fn();
    assert.unreachable(`expected ${code}`);
  } catch (err) {
    assert.instance(err, DomainError);
    assert.is((err as DomainError).code, code);
  }
}

test('multipliers are integer thousandths; charges round up', () => {
  assert.is(toMilli(1.25), 1250);
  assert.is(toMilli(1.75), 1750);
  assert.is(toMilli(2), 2000);
  assert.throws(() => toMilli(0));
  assert.throws(() => toMilli(-1));
  assert.throws(() => toMilli(1.2345));
  assert.is(chatCharge(10, 3, 1250), 17); // 13 * 1.25 = 16.25 -> 17
  assert.is(chatCharge(100, 100, 1000), 200);
  assert.is(applyMultiplier(1, 1), 1);
  assert.is(imageCharge(1250), 56250);
  assert.is(imageCharge(1750), 78750);
  assert.is(rawTokensCoveredBy(17, 1250), 13);
  assert.ok(chatCharge(rawTokensCoveredBy(1001, 1750), 0, 1750) <= 1001);
});

test('reserve within quota, settle charges actual usage, the hold is gone', () => {
  let s = subscribed();
  ({ state: s } = run(s, reserve('h1', 500)));
  assert.is(availableTokens(s, now), 500);
  const settled = run(s, {
    type: 'SettleChat',
    holdId: 'h1',
    multiplierMilli: 1250,
    promptTokens: 100,
    completionTokens: 60,
    reasoningEffort: 'high',
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  });
  const charge = settled.events[0];
  assert.is(charge.type, 'ChatCharged');
  assert.equal(
    { billed: (charge.data as { billed: number }).billed, reserved: (charge.data as { reserved: number }).reserved },
    { billed: 200, reserved: 500 },
  );
  assert.is(settled.state.quotaUsed, 200);
  assert.is(settled.state.holds.size, 0);
  assert.is(settled.state.reserved, 0);
  assert.is(availableTokens(settled.state, now), 800);
  throwsCode(() => run(settled.state, { type: 'Release', holdId: 'h1', reason: 'other' }), 'conflict');
});

test('holds cannot exceed what is left; concurrent holds count against each other', () => {
  let s = subscribed();
  ({ state: s } = run(s, reserve('a', 600)));
  throwsCode(() => run(s, reserve('b', 401)), 'insufficient_quota');
  ({ state: s } = run(s, reserve('b', 400)));
  assert.is(availableTokens(s, now), 0);
  ({ state: s } = run(s, { type: 'Release', holdId: 'a', reason: 'upstream_error' }));
  assert.is(availableTokens(s, now), 600);
});

test('main plan is spent first, then extra tokens; an expired plan leaves only extra', () => {
  let s = subscribed();
  ({ state: s } = run(s, { type: 'GrantExtra', accountId: 'acme', amount: 300, reason: 'top-up' }));
  ({ state: s } = run(s, reserve('h', 1200, 'alpha-haiku-4.5')));
  const { events, state } = run(s, {
    type: 'SettleImage',
    holdId: 'h',
    multiplierMilli: 1000,
    images: 1,
    tokensPerImage: 1100,
    size: '1024x1024',
    edit: false,
  });
  assert.equal([(events[0].data as { fromQuota: number }).fromQuota, (events[0].data as { fromExtra: number }).fromExtra], [1000, 100]);
  assert.is(state.extraUsed, 100);
  const later = new Date(now.getTime() + 31 * 86_400_000);
  let fresh = subscribed();
  ({ state: fresh } = run(fresh, { type: 'GrantExtra', accountId: 'acme', amount: 50, reason: 'x' }));
  assert.is(availableTokens(fresh, later), 50);
  throwsCode(() => run(fresh, { ...reserve('z', 51), now: later } as AccountCommand), 'insufficient_quota');
});

test('a model outside the plan is refused; an unopened account is not found', () => {
  throwsCode(() => run(subscribed(), reserve('h', 10, 'alpha-opus-5')), 'model_not_enabled');
  throwsCode(() => run(accountDecider.initialState(), reserve('h', 10)), 'not_found');
  throwsCode(() => run(subscribed(), { type: 'GrantExtra', accountId: 'acme', amount: 1.5, reason: '' }), 'invalid');
  throwsCode(() => run(subscribed(), { type: 'GrantExtra', accountId: 'acme', amount: -3, reason: '' }), 'invalid');
});

test('expired holds are released by the sweeper command, others stay', () => {
  let s = subscribed();
  ({ state: s } = run(s, reserve('old', 100)));
  ({ state: s } = run(s, { ...reserve('new', 100), now: new Date(now.getTime() + 50_000) } as AccountCommand));
  const { events, state } = run(s, { type: 'ExpireHolds', now: new Date(now.getTime() + 61_000) });
  assert.equal(
    events.map((e) => (e.data as { holdId: string }).holdId),
    ['old'],
  );
  assert.equal([...state.holds.keys()], ['new']);
  assert.is(state.reserved, state.holds.get('new')!.amount);
});

test('holds of lapsed processes are released; a charged one and those of live processes stay', () => {
  let s = subscribed();
  const held = (holdId: string, process?: string) => ({ ...reserve(holdId, 100), ...(process ? { process } : {}) }) as AccountCommand;
  ({ state: s } = run(s, held('dead-charged', 'gw-dead')));
  ({ state: s } = run(s, held('dead-open', 'gw-dead')));
  ({ state: s } = run(s, held('live-open', 'gw-live')));
  ({ state: s } = run(s, held('legacy')));
  ({ state: s } = run(s, {
    type: 'SettleChat',
    holdId: 'dead-charged',
    multiplierMilli: 1000,
    promptTokens: 10,
    completionTokens: 5,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  }));
  const usedBefore = s.quotaUsed;
  const { events, state } = run(s, { type: 'ReleaseOrphaned', processes: ['gw-dead'] });
  assert.equal(
    events.map((e) => [e.type, (e.data as { holdId: string }).holdId, (e.data as { reason: string }).reason]),
    [['ReservationReleased', 'dead-open', 'process_lost']],
  );
  assert.equal([...state.holds.keys()].sort(), ['legacy', 'live-open']);
  assert.is(state.reserved, 200);
  assert.is(state.quotaUsed, usedBefore, 'the charge stands');
  // Asked again (a second sweeper, or the same after a retry): nothing more.
  assert.equal(accountDecider.decide({ type: 'ReleaseOrphaned', processes: ['gw-dead'] }, state), []);
});

test('adjustments: refund returns to the main plan, surcharge spends it first', () => {
  let s = subscribed();
  ({ state: s } = run(s, reserve('h', 500)));
  ({ state: s } = run(s, {
    type: 'SettleChat',
    holdId: 'h',
    multiplierMilli: 2000,
    promptTokens: 100,
    completionTokens: 100,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  }));
  assert.is(s.quotaUsed, 400);
  const base = {
    type: 'Adjust',
    correctionId: 'c1',
    chargeEventId: 'e1',
    requestId: 'r',
    model: 'cx/gen-6-terra',
    chargedAt: now.toISOString(),
    billedBefore: 400,
    multiplierMilliBefore: 2000,
    fromQuotaBefore: 400,
    adjustmentsSeen: 0,
  } as const;
  const refund = run(s, { ...base, billedCorrected: 250, multiplierMilliCorrected: 1250 });
  assert.is((refund.events[0].data as { delta: number }).delta, -150);
  assert.is(refund.state.quotaUsed, 250);
  assert.equal(run(s, { ...base, billedCorrected: 400, multiplierMilliCorrected: 2000 }).events, []);
});

test("the plan's call rate is decided with the hold: a burst of the per-minute limit, refusals append nothing, replay agrees", () => {
  const rated = (perMinute: number) => {
    const s = run(accountDecider.initialState(), { type: 'Open', accountId: 'acme', name: 'Acme' }).state;
    return run(s, { type: 'Subscribe', accountId: 'acme', plan: { ...plan, quota: 1_000_000, requestsPerMinute: perMinute }, now }).state;
  };
  const at = (ms: number, id: string): AccountCommand => ({
    type: 'Reserve',
    holdId: id,
    requestId: `r-${id}`,
    keyId: 'k1',
    model: 'cx/gen-6-terra',
    kind: 'chat',
    amount: 10,
    now: new Date(now.getTime() + ms),
    ttlMs: 60_000,
  });
  let s = rated(3);
  const history: StreamEvents['account'][] = [];
  for (const id of ['a', 'b', 'c']) {
    const r = run(s, at(0, id));
    assert.is(r.events.length, 1);
    assert.is((r.events[0].data as { at?: string }).at, now.toISOString());
    history.push(...r.events);
    s = r.state;
  }
  // The fourth call in the same instant is over the rate: refused with its retry time, no event.
  try {
    accountDecider.decide(at(0, 'd'), s);
    assert.unreachable('expected rate_limited');
  } catch (err) {
    assert.is((err as DomainError).code, 'rate_limited');
    assert.equal((err as DomainError).facts, { allowed: false, limit: 3, remaining: 0, resetMs: 60_000, retryAfterMs: 20_000 });
  }
  // One interval (20 s) later exactly one more fits.
  const later = run(s, at(20_000, 'e'));
  history.push(...later.events);
  throwsCode(() => accountDecider.decide(at(20_000, 'f'), later.state), 'rate_limited');
  // The same arithmetic as GCRA step by step, and the state folded from the events alone agrees.
  let tat: number | undefined;
  for (const ms of [0, 0, 0, 20_000]) tat = gcra(tat, 3, now.getTime() + ms).tat;
  assert.is(later.state.rateTat, tat);
  const replayed = fold(accountDecider, history, rated(3));
  assert.is(replayed.rateTat, tat);
  // A plan without a call rate never refuses; holds recorded before the rate was kept (no `at`) leave it alone.
  let free = rated(0);
  for (let i = 0; i < 50; i++) free = run(free, at(0, `x${i}`)).state;
  assert.is(free.rateTat, undefined);
  const legacy = { ...history[0], data: { ...history[0].data, at: undefined, holdId: 'old' } } as StreamEvents['account'];
  assert.is(fold(accountDecider, [legacy], rated(3)).rateTat, undefined);
});

test('keys: issue once, revoke once', () => {
  const issued = fold(
    keyDecider,
    keyDecider.decide({ type: 'Issue', keyId: 'k', accountId: 'a', name: 'app', hash: 'f'.repeat(64), last4: 'abcd' }, keyDecider.initialState()),
  );
  assert.is(issued.status, 'active');
  const revoked = fold(keyDecider, keyDecider.decide({ type: 'Revoke', reason: 'leaked' }, issued), issued);
  assert.is(revoked.status, 'revoked');
  throwsCode(() => keyDecider.decide({ type: 'Revoke', reason: 'again' }, revoked), 'conflict');
  throwsCode(() => keyDecider.decide({ type: 'Revoke', reason: 'x' }, keyDecider.initialState()), 'not_found');
});

test('models: price, then corrections over past windows (overlapping ones too, ordered by revision)', () => {
  let m = fold(modelDecider, modelDecider.decide({ type: 'Price', modelId: 'x', multiplierMilli: 1500, alias: null }, modelDecider.initialState()));
  assert.equal([m.multiplierMilli, m.status], [1500, 'ACTIVE']);
  throwsCode(() => modelDecider.decide({ type: 'Price', modelId: 'x', multiplierMilli: 0 }, m), 'invalid');
  const correct = (id: string, from: string, to: string) => ({
    type: 'Correct' as const,
    correctionId: id,
    from: new Date(from),
    to: new Date(to),
    multiplierMilli: 1250,
    reason: 'typo',
    now,
  });
  m = fold(modelDecider, modelDecider.decide(correct('c1', '2026-11-01', '2026-11-10'), m), m);
  assert.is(m.corrections.length, 1);
  // An overlapping window is another correction: it comes later in the stream, so it wins where they overlap.
  m = fold(modelDecider, modelDecider.decide(correct('c2', '2026-11-05', '2026-11-12'), m), m);
  assert.equal(
    m.corrections.map((w) => [w.correctionId, w.revision]),
    [
      ['c1', 1],
      ['c2', 2],
    ],
  );
  throwsCode(() => modelDecider.decide({ ...correct('c1', '2026-11-01', '2026-11-10'), multiplierMilli: 1500 }, m), 'conflict');
  throwsCode(() => modelDecider.decide(correct('c3', '2026-11-12', '2026-11-11'), m), 'invalid');
  throwsCode(() => modelDecider.decide(correct('c4', '2026-11-12', '2026-12-30'), m), 'invalid');
  assert.equal(modelDecider.decide(correct('c1', '2026-11-01', '2026-11-10'), m), [], 'same correction again changes nothing');
});

test('a refund of a charge made before the plan was renewed is credited as extra tokens (never a negative use)', () => {
  let s = run(subscribed(), reserve('h', 500)).state;
  const charged = run(s, {
    type: 'SettleChat',
    holdId: 'h',
    multiplierMilli: 2000,
    promptTokens: 100,
    completionTokens: 100,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  });
  const charge = charged.events[0] as Extract<DomainEvent, { type: 'ChatCharged' }>;
  assert.is(charge.data.fromQuota, 400);
  s = run(charged.state, { type: 'Subscribe', accountId: 'acme', plan, now: new Date(now.getTime() + 1000) }).state;
  assert.is(s.quotaUsed, 0, 'the renewal starts the plan afresh');
  const before = availableTokens(s, new Date(now.getTime() + 2000));
  const refund = run(s, {
    type: 'Adjust',
    correctionId: 'c1',
    chargeEventId: 'e1',
    requestId: 'r-h',
    model: 'cx/gen-6-terra',
    chargedAt: now.toISOString(),
    billedBefore: 400,
    billedCorrected: 250,
    multiplierMilliBefore: 2000,
    multiplierMilliCorrected: 1250,
    fromQuotaBefore: 400,
    adjustmentsSeen: 0,
  });
  const d = (refund.events[0] as Extract<DomainEvent, { type: 'ChargeAdjusted' }>).data;
  assert.equal([d.delta, d.quotaDelta, d.extraDelta, d.extraCredited], [-150, 0, 0, 150]);
  assert.equal([refund.state.extraGranted, refund.state.extraUsed], [150, 0]);
  assert.is(availableTokens(refund.state, new Date(now.getTime() + 2000)), before + 150);
});

test('the money invariants fail loudly when an event would break them', () => {
  const s = run(subscribed(), reserve('h1', 300)).state;
  const charge = (fromQuota: number): StreamEvents['account'] => ({
    type: 'ChatCharged',
    data: {
      accountId: 'acme',
      holdId: 'h1',
      requestId: 'r-h1',
      keyId: 'k1',
      model: 'cx/gen-6-terra',
      multiplierMilli: 1000,
      reserved: 300,
      billed: fromQuota,
      fromQuota,
      fromExtra: 0,
      promptTokens: 1,
      completionTokens: 1,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
    },
  });
  // A charge the rule would never split this way: the main plan used past its quota.
  assert.throws(
    () => accountDecider.evolve(s, charge(1001)),
    (e: Error) => e instanceof InvariantViolation && /quota/.test(e.message),
  );
  // A hold of a negative amount: reserved below zero.
  const negative: StreamEvents['account'] = {
    type: 'QuotaReserved',
    data: { accountId: 'acme', holdId: 'h2', requestId: 'r', keyId: 'k1', model: 'm', kind: 'chat', amount: -500, expiresAt: now.toISOString() },
  };
  assert.throws(
    () => accountDecider.evolve(s, negative),
    (e: Error) => e instanceof InvariantViolation && /reserved/.test(e.message),
  );
  // Lawful events pass, and the decider's view of the balance is the rule's.
  const settled = accountDecider.evolve(s, charge(250));
  assert.is(availableTokens(settled, now), balanceAvailable(balanceOf(settled), now));
  assert.is(availableTokens(settled, now), 750);
});

test('a charge is split main plan first, then extra tokens, capped at what the account holds', () => {
  const b = {
    quota: 100,
    quotaUsed: 60,
    extraGranted: 50,
    extraUsed: 0,
    reserved: 70,
    startsAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + 1e9).toISOString(),
  };
  assert.equal(splitCharge(b, 70, 30), { billed: 30, fromQuota: 30, fromExtra: 0 });
  assert.equal(splitCharge(b, 70, 60), { billed: 60, fromQuota: 40, fromExtra: 20 });
  // More than the hold: only as far as the balance covers it (40 + 50 left, nobody else holding).
  assert.equal(splitCharge(b, 70, 200), { billed: 90, fromQuota: 40, fromExtra: 50 });
});

test.run();
