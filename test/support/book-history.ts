// A random history the account decider could have written, for the books' read-model tests:
// payments, plans, renewals and expiries, charges on a priced and an unpriced channel,
// corrections, refunds and disputes over about two months.
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import { createRng } from '../../src/upstream/seed.ts';
import { upstreamCalls, upstreamCostDayChanges, upstreamCostDays, upstreamCostRates } from '../../projections/catalogue/cost-tables.ts';
import { upstreamCost } from '../../projections/catalogue/cost-book.ts';
import { books } from '../../projections/books/books.ts';
import { bookAccounts, bookDayChanges, bookDays, bookDeferred, bookEntries, bookLots } from '../../projections/books/book-tables.ts';

/** The read models such a history feeds: upstream cost, then the books. */
export const COST_MODELS = [upstreamCostRates, upstreamCalls, upstreamCostDays, upstreamCostDayChanges, upstreamCost];
export const BOOK_MODELS = [...COST_MODELS, bookAccounts, bookLots, bookDays, bookDeferred, bookEntries, bookDayChanges, books];

interface ExtraLot {
  lotId: string;
  own: number;
  paymentId: string | null;
  paid: number;
  refunded: number;
}

interface SimAccount {
  id: string;
  plan: { lotId: string; tokens: number; used: number; expiresAt: string } | null;
  extra: ExtraLot[];
  extraUsed: number;
  charges: Array<{ eventId: string; at: string; fromQuota: number; planLotId: string | null }>;
  payments: number;
}

/**
 * A history the account decider could have written: charges within the plan's quota while it
 * runs and within the extra pool, refunds only of an extra lot none of whose tokens were used yet
 * (the pool is used oldest lot first), corrections that give back at most what a charge took.
 */
export function history(seed: number, size: number): ProjectedEvent[] {
  const rnd = createRng(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const events: ProjectedEvent[] = [];
  let now = Date.parse('2026-03-01T08:00:00.000Z');
  const push = (type: string, data: Record<string, unknown>) => {
    const position = events.length + 1;
    events.push({ id: `e${seed}-${position}`, type, position, timestamp: new Date(now).toISOString(), data });
    return events[events.length - 1];
  };
  push('SettlementCurrencySet', { currency: 'EUR' });
  // Calls on channel alpha are priced, those on beta are not (the report's unpriced calls).
  push('UpstreamCostRateSet', {
    channel: 'alpha',
    upstreamModel: 'u-1',
    currency: 'EUR',
    effectiveAt: '2026-01-01T00:00:00.000Z',
    input: '137',
    cacheRead: '0',
    cacheWrite5m: '0',
    cacheWrite1h: '0',
    output: '0',
    image: null,
  });
  const accounts: SimAccount[] = Array.from({ length: 4 }, (_, i) => ({ id: `acct-${i}`, plan: null, extra: [], extraUsed: 0, charges: [], payments: 0 }));
  const pay = (a: SimAccount, amount: number): string => {
    const paymentId = `pay-${a.id}-${++a.payments}`;
    push('PaymentReceived', { accountId: a.id, paymentId, amount, fee: Math.floor(amount / 30), currency: 'EUR', processor: 'stripe' });
    return paymentId;
  };
  const subscribe = (a: SimAccount, type: 'SubscriptionStarted' | 'SubscriptionRenewed') => {
    const paid = rnd() < 0.8;
    const paymentId = paid ? pay(a, int(500, 5000)) : undefined;
    const tokens = int(1000, 20_000);
    const expiresAt = new Date(now + int(2, 6) * 86_400_000 + int(0, 86_399) * 1000).toISOString();
    const e = push(type, { accountId: a.id, planId: 'pro', quota: tokens, expiresAt, ...(paymentId ? { paymentId } : {}) });
    a.plan = { lotId: e.id, tokens, used: 0, expiresAt };
  };
  const poolTotal = (a: SimAccount) => a.extra.reduce((n, l) => n + l.own, 0);
  for (let n = 0; n < size; n++) {
    // Mostly minutes apart, sometimes a day or two with nothing (lots then end on quiet days).
    now += rnd() < 0.08 ? int(20, 50) * 3_600_000 : int(1, 90) * 60_000;
    const a = pick(accounts);
    const at = new Date(now).toISOString();
    const planRuns = a.plan !== null && a.plan.expiresAt > at;
    const r = rnd();
    if (!a.plan || (r < 0.06 && rnd() < 0.5)) subscribe(a, a.plan ? 'SubscriptionRenewed' : 'SubscriptionStarted');
    else if (r < 0.12) {
      const paymentId = rnd() < 0.7 ? pay(a, int(100, 3000)) : null;
      const tokens = int(200, 8000);
      const e = push('ExtraTokensGranted', { accountId: a.id, amount: tokens, ...(paymentId ? { paymentId } : {}) });
      a.extra.push({ lotId: e.id, own: tokens, paymentId, paid: 0, refunded: 0 });
      if (paymentId) a.extra[a.extra.length - 1].paid = Number((events[events.length - 2].data as { amount: number }).amount);
    } else if (r < 0.16) {
      // A refund of an extra lot none of whose tokens were used: the pool's use stops before it.
      let start = 0;
      const candidates: Array<{ lot: ExtraLot; start: number }> = [];
      for (const l of a.extra) {
        if (l.paymentId && l.paid > l.refunded && a.extraUsed <= start) candidates.push({ lot: l, start });
        start += l.own;
      }
      if (candidates.length === 0) continue;
      const { lot } = pick(candidates);
      const amount = int(1, lot.paid - lot.refunded);
      const withdrawn = int(0, lot.own);
      const lost = rnd() < 0.3;
      push('PaymentRefunded', {
        accountId: a.id,
        paymentId: lot.paymentId,
        refundId: `rf-${events.length}`,
        amount,
        tokensWithdrawn: withdrawn,
        fromDeferred: amount,
        reason: lost ? 'dispute_lost' : 'requested_by_customer',
      });
      lot.refunded += amount;
      lot.own -= withdrawn;
      if (lost) push('DisputeClosed', { accountId: a.id, disputeId: `dp-${events.length}`, status: 'lost', fee: 1500 });
    } else if (r < 0.22 && a.charges.length > 0) {
      const c = pick(a.charges);
      const inPeriod = planRuns && c.planLotId === a.plan!.lotId;
      const base = {
        accountId: a.id,
        correctionId: `corr-${events.length}`,
        chargeEventId: c.eventId,
        requestId: `req-${c.eventId}`,
        model: 'm-1',
        chargedAt: c.at,
      };
      if (inPeriod && rnd() < 0.5) {
        const delta = -int(0, Math.min(c.fromQuota, a.plan!.used));
        push('ChargeAdjusted', { ...base, quotaDelta: delta, extraDelta: 0 });
        a.plan!.used += delta;
        c.fromQuota += delta;
      } else if (inPeriod) {
        const delta = int(0, a.plan!.tokens - a.plan!.used);
        push('ChargeAdjusted', { ...base, quotaDelta: delta, extraDelta: 0 });
        a.plan!.used += delta;
        c.fromQuota += delta;
      } else if (c.fromQuota > 0) {
        // A charge of an ended period: its tokens come back as a new extra lot.
        const credited = int(1, c.fromQuota);
        const e = push('ChargeAdjusted', { ...base, quotaDelta: 0, extraDelta: 0, extraCredited: credited });
        a.extra.push({ lotId: `${e.id}:returned`, own: credited, paymentId: null, paid: 0, refunded: 0 });
        c.fromQuota -= credited;
      }
    } else {
      const want = int(1, 900);
      const fromQuota = planRuns ? Math.min(want, a.plan!.tokens - a.plan!.used) : 0;
      const fromExtra = Math.min(want - fromQuota, poolTotal(a) - a.extraUsed);
      if (fromQuota + fromExtra === 0) continue;
      const channel = pick(['alpha', 'beta', '']);
      const e = push('ChatCharged', {
        accountId: a.id,
        model: pick(['m-1', 'm-2']),
        channel,
        upstreamModel: channel ? 'u-1' : '',
        requestId: `req-${events.length + 1}`,
        fromQuota,
        fromExtra,
        promptTokens: fromQuota + fromExtra,
        completionTokens: 0,
      });
      if (fromQuota > 0) a.plan!.used += fromQuota;
      a.extraUsed += fromExtra;
      a.charges.push({ eventId: e.id, at: e.timestamp, fromQuota, planLotId: planRuns ? a.plan!.lotId : null });
    }
  }
  return events;
}
