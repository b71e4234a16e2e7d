// Money as a value: exact minor units, and the cumulative rounding rule (property tests).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { allocateMoney, bookedAmount, currencyOf, formatMoney, money, minorDigits, tokensFor, valueOf } from '../src/money/money.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { fold } from '../src/ledger/decider.ts';

test('currencies are ISO 4217 with their own minor unit', () => {
  assert.is(minorDigits('USD'), 2);
  assert.is(minorDigits('JPY'), 0);
  assert.is(minorDigits('KWD'), 3);
  assert.is(formatMoney({ amount: 1234, currency: 'USD' }), '12.34');
  assert.is(formatMoney({ amount: 1234, currency: 'JPY' }), '1234');
  assert.is(formatMoney({ amount: 5, currency: 'KWD' }), '0.005');
  for (const bad of ['usd', 'XXX1', '', 12, null])
    assert.throws(
      () => currencyOf(bad),
      (e: unknown) => e instanceof DomainError && e.code === 'invalid',
    );
});

test('amounts are whole, non-negative minor units', () => {
  assert.equal(money(1999, 'EUR'), { amount: 1999, currency: 'EUR' });
  for (const bad of [-1, 1.5, Number.NaN, '10', 2 ** 60, 0])
    assert.throws(
      () => money(bad, 'USD'),
      (e: unknown) => e instanceof DomainError && e.code === 'invalid',
    );
  assert.equal(money(0, 'USD', 'fee', { allowZero: true }), { amount: 0, currency: 'USD' });
});

test('a third of a dollar per token, booked in three parts, adds up to the whole', () => {
  // $1.00 buys 3 tokens: 33.33... cents each. Booked one token at a time: 33 + 34 + 33 = 100.
  const rate = { amount: 100, per: 3 };
  assert.equal([bookedAmount(rate, 0, 1), bookedAmount(rate, 1, 2), bookedAmount(rate, 2, 3)], [33, 34, 33]);
  assert.is(valueOf(rate, 3), 100);
});

test('property: booked parts of any split sum to the rounded whole, and none is negative', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 10_000_000_00 }),
      fc.integer({ min: 1, max: 1_000_000_000 }),
      fc.array(fc.integer({ min: 0, max: 200_000_000 }), { maxLength: 40 }),
      (amount, per, parts) => {
        const rate = { amount, per };
        // Amounts are exact up to 2^53 minor units; past that valueOf refuses (tested below).
        fc.pre((BigInt(amount) * BigInt(parts.reduce((a, b) => a + b, 0))) / BigInt(per) < BigInt(Number.MAX_SAFE_INTEGER));
        let before = 0;
        let sum = 0;
        for (const p of parts) {
          const booked = bookedAmount(rate, before, before + p);
          assert.ok(booked >= 0);
          sum += booked;
          before += p;
        }
        assert.is(sum, valueOf(rate, before));
        // The whole of what was paid for is booked, to the minor unit.
        assert.is(valueOf(rate, per), amount);
      },
    ),
    { numRuns: 300 },
  );
});

test('a value beyond 2^53 minor units is refused, never rounded', () => {
  assert.throws(
    () => valueOf({ amount: 83_684_033, per: 1 }, 109_819_982),
    (e: unknown) => e instanceof Error && e.name === 'InvariantViolation',
  );
  assert.throws(
    () => bookedAmount({ amount: 83_684_033, per: 1 }, 90_647_397, 109_819_982),
    (e: unknown) => e instanceof Error && e.name === 'InvariantViolation',
  );
});

test('property: allocation keeps every minor unit, and tokensFor stays within the tokens bought', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 1e12 }), fc.array(fc.integer({ min: 0, max: 1e6 }), { minLength: 1, maxLength: 10 }), (amount, ratios) => {
      const parts = allocateMoney({ amount, currency: 'USD' }, ratios);
      if (ratios.some((r) => r > 0))
        assert.is(
          parts.reduce((s, p) => s + p.amount, 0),
          amount,
        );
      assert.ok(parts.every((p) => Number.isSafeInteger(p.amount) && p.amount >= 0));
    }),
    { numRuns: 300 },
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 1e9 }), fc.integer({ min: 1, max: 1e9 }), fc.integer({ min: 0, max: 1e9 }), (paid, tokens, part0) => {
      const part = part0 % (paid + 1);
      const t = tokensFor(part, paid, tokens);
      assert.ok(t >= 0 && t <= tokens);
      assert.is(tokensFor(paid, paid, tokens), tokens);
    }),
    { numRuns: 300 },
  );
});

test('the worked example (docs/payments.md): a plan bought, half used, partly refunded; a pack bought by code', () => {
  const now = new Date('2026-11-25T10:00:00Z');
  let s = accountDecider.initialState();
  const run = (c: AccountCommand) => {
    const events = accountDecider.decide(c, s);
    s = fold(accountDecider, events, s);
    return events;
  };
  run({ type: 'Open', accountId: 'acme', name: 'Acme' });
  const plan = { planId: 'pro', name: 'Pro', quota: 1000, validityDays: 30, requestsPerMinute: 60, models: ['*'] };
  const paid = run({
    type: 'RecordPayment',
    paymentId: 'pay_a',
    processor: 'stripe',
    processorPaymentId: 'pi_1',
    amount: 2000,
    currency: 'USD',
    fee: 88,
    grant: { kind: 'plan', plan },
    now,
  });
  assert.equal(
    paid.map((e) => [e.type, (e.data as { paymentId?: string }).paymentId]),
    [
      ['PaymentReceived', 'pay_a'],
      ['SubscriptionStarted', 'pay_a'],
    ],
  );
  // A replayed notice decides nothing.
  assert.equal(
    run({
      type: 'RecordPayment',
      paymentId: 'pay_a',
      processor: 'stripe',
      processorPaymentId: 'pi_1',
      amount: 2000,
      currency: 'USD',
      fee: 88,
      grant: { kind: 'plan', plan },
      now,
    }),
    [],
  );
  run({ type: 'Reserve', holdId: 'h', requestId: 'r', keyId: 'k', model: 'm', kind: 'chat', amount: 500, now, ttlMs: 60_000 });
  run({
    type: 'SettleChat',
    holdId: 'h',
    multiplierMilli: 1000,
    promptTokens: 300,
    completionTokens: 200,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
  });
  // $15.00 of $20.00 bought 750 tokens; 500 are unused: withdrawn ($10.00 still deferred), $5.00 paid for tokens used.
  const [refund] = run({ type: 'RefundPayment', paymentId: 'pay_a', refundId: 're_1', amount: 1500, now });
  assert.equal(refund.data, {
    accountId: 'acme',
    paymentId: 'pay_a',
    refundId: 're_1',
    amount: 1500,
    currency: 'USD',
    reason: 'refund',
    pool: 'main',
    tokensWithdrawn: 500,
    fromDeferred: 1000,
    refundedRevenue: 500,
  });
  assert.equal([s.subscription?.quota, s.quotaUsed], [500, 500]);
  const code = run({
    type: 'RecordPayment',
    paymentId: 'pay_b',
    processor: 'code',
    processorPaymentId: 'h1',
    amount: 250,
    currency: 'USD',
    fee: null,
    grant: { kind: 'pack', packId: 'p300', packName: '300 tokens', tokens: 300 },
    now,
  });
  assert.equal(code[1].data, { accountId: 'acme', amount: 300, reason: 'pack 300 tokens', paymentId: 'pay_b' });
  // Its $2.50 over 300 tokens, booked 100 at a time: 83 + 84 + 83 = 250 cents.
  assert.equal(
    [bookedAmount({ amount: 250, per: 300 }, 0, 100), bookedAmount({ amount: 250, per: 300 }, 100, 200), bookedAmount({ amount: 250, per: 300 }, 200, 300)],
    [83, 84, 83],
  );
});

test.run();
