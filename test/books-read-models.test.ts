// The books' read models (projections/books/) against the fold they replace (src/books/finance-fold.ts)
// on random histories of payments, plans, renewals and expiries, charges, corrections, refunds and
// disputes over about two months, fed to the projector in pages of random sizes: for any window,
// the report's rows, the deferred revenue at each day's end, the bookings other than uses and the
// lots are equal row for row, and the reconciliation closes to 0. A replay of the same log in one
// page writes the same rows. On PGlite, and on PostgreSQL with DATABASE_URL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { testDatabases, type TestDatabase } from './support/db.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import { applyEvents, ensureReadModels } from '../projections/runner/runner.ts';
import { upstreamCalls, upstreamCostDays, upstreamCostRates } from '../projections/catalogue/cost-tables.ts';
import { upstreamCost } from '../projections/catalogue/cost-book.ts';
import { UNRECORDED } from '../projections/catalogue/upstream-report.ts';
import { books } from '../projections/books/books.ts';
import { bookAccounts, bookDays, bookDeferred, bookEntries, bookLots } from '../projections/books/book-tables.ts';
import { bookedEntries, bookedLots } from '../projections/books/book-reads.ts';
import { upstreamCostBetween } from '../projections/catalogue/upstream-cost.ts';
import { FinanceFold } from '../src/books/finance-fold.ts';
import {
  financeRows,
  journalBooksFrom,
  moneyBooksFrom,
  moneyBooksOf,
  nextDay,
  readBooksFrom,
  reportFrom,
  type FinanceRow,
  type Window,
} from '../src/books/finance.ts';
import { reconcileMoney } from '../src/books/finance-reconcile.ts';
import type { Booking } from '../src/books/lot-book.ts';
import { createRng } from '../src/upstream/seed.ts';
import '../projections/read-models.ts';

const COST_MODELS = [upstreamCostRates, upstreamCalls, upstreamCostDays, upstreamCost];
const BOOK_MODELS = [...COST_MODELS, bookAccounts, bookLots, bookDays, bookDeferred, bookEntries, books];
const BOOK_TABLES = BOOK_MODELS.filter((p) => !COST_MODELS.includes(p)).map((p) => p.table);

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
function history(seed: number, size: number): ProjectedEvent[] {
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

const dayOf = (iso: string) => iso.slice(0, 10);
const byDay = (a: FinanceRow, b: FinanceRow) =>
  JSON.stringify([a.day, a.account_id, a.model, a.channel]).localeCompare(JSON.stringify([b.day, b.account_id, b.model, b.channel]));
const sortedEntries = (m: Map<string, number> | undefined) => [...(m ?? new Map<string, number>())].sort(([x], [y]) => x.localeCompare(y));
const entryOf = (b: Booking) => ({
  day: dayOf(b.at),
  eventId: b.eventId,
  accountId: b.accountId,
  lotId: b.lotId,
  kind: b.kind,
  amount: b.amount,
  fee: b.fee,
  fromDeferred: b.fromDeferred,
  refundedRevenue: b.refundedRevenue,
});

async function project(t: TestDatabase, schema: string, events: ProjectedEvent[], pageSizes: () => number): Promise<void> {
  await ensureReadModels(t.db, schema, BOOK_MODELS);
  let position = 0;
  for (let i = 0; i < events.length;) {
    const page = events.slice(i, i + pageSizes());
    position = await applyEvents(t.db, schema, page, position, BOOK_MODELS);
    i += page.length;
  }
}

async function tableRows(t: TestDatabase, schema: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of BOOK_TABLES) out[table] = await t.db.query(`SELECT * FROM "${schema}"."${table}" ORDER BY key`);
  return out;
}

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase }>(`the books' read models on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
  });
  s.after(async (ctx) => {
    await ctx.t.cleanup();
  });

  for (const seed of [7, 41, 2026]) {
    s(`seed ${seed}: every window's books equal the whole log's fold, and a replay in one page writes the same rows`, async ({ t }) => {
      const events = history(seed, 700);
      const rnd = createRng(seed * 31);
      const schema = `${t.schema}_${seed}`;
      await project(t, schema, events, () => 1 + Math.floor(rnd() * 60));

      const first = dayOf(events[0].timestamp);
      const last = dayOf(events[events.length - 1].timestamp);
      const whole: Window = { from: first, to: last };
      const fold = new FinanceFold(whole, { keepBookings: true });
      const channels = new Map(events.filter((e) => e.type === 'ChatCharged').map((e) => [e.id, (e.data as { channel: string }).channel || UNRECORDED]));
      fold.add(events, channels);
      const folded = fold.finish();
      assert.ok(
        folded.book.bookings.some((b) => b.kind === 'breakage'),
        'the history ends some plan lots unused',
      );
      assert.ok(
        folded.book.bookings.some((b) => b.kind === 'refund' || b.kind === 'dispute'),
        'and refunds some payments',
      );
      const foundLate = folded.book.bookings.some(
        (b) => b.kind === 'breakage' && dayOf(events.find((e) => e.timestamp >= b.at)?.timestamp ?? '9999') > dayOf(b.at),
      );
      assert.ok(foundLate, 'and some plan lot ends on a day without events, found over only on a later day');

      const days: string[] = [];
      for (let d = first; d <= last; d = nextDay(d)) days.push(d);
      const windows: Window[] = [whole, { from: '2026-02-20', to: first }];
      for (let i = 0; i < 6; i++) {
        const a = Math.floor(rnd() * days.length);
        const b = Math.min(days.length - 1, a + Math.floor(rnd() * 10));
        windows.push({ from: days[a], to: days[b] });
      }
      for (const w of windows) {
        const label = `${w.from}..${w.to}`;
        const read = await readBooksFrom(t.db, schema, w);
        const inW = (day: string) => day >= w.from && day <= w.to;
        assert.equal([...read.rows.values()].sort(byDay), [...folded.rows.values()].filter((r) => inW(r.day)).sort(byDay), `report rows ${label}`);
        const dayBefore = new Date(Date.parse(`${w.from}T00:00:00.000Z`) - 86_400_000).toISOString().slice(0, 10);
        const foldedBefore = dayBefore < first ? new Map<string, number>() : folded.deferredAt.get(dayBefore);
        assert.equal(sortedEntries(read.deferredBefore), sortedEntries(foldedBefore), `deferred before ${label}`);
        for (let d = w.from; d <= w.to; d = nextDay(d))
          assert.equal(sortedEntries(read.deferredAt.get(d)), sortedEntries(d < first ? new Map() : folded.deferredAt.get(d)), `deferred at the end of ${d}`);
        const entries = await bookedEntries(t.db, schema, w.from, w.to);
        const foldedEntries = folded.book.bookings.filter((b) => b.kind !== 'use' && inW(dayOf(b.at)));
        assert.equal(entries.map(entryOf), [...foldedEntries].sort((x, y) => dayOf(x.at).localeCompare(dayOf(y.at))).map(entryOf), `bookings ${label}`);
        // The report's rows as the database joins and sorts them, against the same join in memory on the fold's rows.
        const foldedInWindow = { rows: new Map([...folded.rows].filter(([, r]) => inW(r.day))), costs: await upstreamCostBetween(t.db, schema, w.from, w.to) };
        const report = await reportFrom(t.db, schema, w);
        assert.equal(report.rows, financeRows(foldedInWindow), `the report's rows ${label}`);
        if (w === whole) {
          assert.ok(
            report.rows.some((r) => r.upstream_cost > 0),
            'priced calls ' + JSON.stringify(report.rows.slice(0, 3)),
          );
          assert.ok(
            report.rows.some((r) => r.unpriced_calls > 0),
            'unpriced calls',
          );
          assert.ok(
            report.rows.some((r) => r.margin !== r.revenue),
            'the margin takes the cost off',
          );
        }
        const money = await moneyBooksFrom(t.db, schema, w);
        const foldedMoney = moneyBooksOf({ ...folded, rows: foldedInWindow.rows }, w);
        assert.equal(sortedEntries(money.deferredAtEnd), sortedEntries(foldedMoney.deferredAtEnd), `deferred at the end of ${label}`);
        assert.equal(
          [...money.perAccount].sort(([x], [y]) => x.localeCompare(y)),
          [...foldedMoney.perAccount].sort(([x], [y]) => x.localeCompare(y)),
          `bookings per account ${label}`,
        );
        const revenue = (await journalBooksFrom(t.db, schema, w)).uses.map((u) => [u.day, u.account_id, u.model, u.channel, u.revenue]);
        assert.equal(
          revenue,
          report.rows.filter((r) => r.revenue !== 0).map((r) => [r.day, r.account_id, r.model, r.channel, r.revenue]),
          `the journal's uses ${label}`,
        );
        const rec = reconcileMoney(money, w);
        assert.equal(
          rec.lines.filter((l) => l.difference !== 0),
          [],
          `the reconciliation of ${label} closes`,
        );
      }
      const lots = await bookedLots(t.db, schema, last);
      assert.equal(
        [...lots].sort((x, y) => x.lotId.localeCompare(y.lotId)),
        [...folded.book.lots.values()].sort((x, y) => x.lotId.localeCompare(y.lotId)),
        'the lots',
      );

      const replayed = `${schema}_replay`;
      await project(t, replayed, events, () => events.length);
      assert.equal(await tableRows(t, replayed), await tableRows(t, schema), 'one page writes what many pages wrote');
      for (const sc of [schema, replayed]) await t.db.exec(`DROP SCHEMA "${sc}" CASCADE`);
    });
  }

  s.run();
}
