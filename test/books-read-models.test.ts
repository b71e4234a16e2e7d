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
import { UNRECORDED } from '../projections/catalogue/upstream-report.ts';
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
import { BOOK_MODELS, COST_MODELS, history } from './support/book-history.ts';
import { upstreamCostDayChanges } from '../projections/catalogue/cost-tables.ts';
import '../projections/read-models.ts';

// The books' tables, and the days the cost fold changed (their positions are the events', whatever the pages).
const BOOK_TABLES = [...BOOK_MODELS.filter((p) => !COST_MODELS.includes(p)).map((p) => p.table), upstreamCostDayChanges.table];

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
