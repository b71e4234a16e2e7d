// The finance report and the journal answered from each day's kept parts (src/books/day-renders.ts)
// equal, byte for byte, the whole window rendered at once, as the answers were made before the
// parts: with no part kept, with every closed day kept, and after late events (more calls, a lot
// ending on a past day, a cost rate set after the fact that re-prices past days) have made some
// parts out of date, before and after the day renderer brings them up to date. A part is used
// only while its day is unchanged: a marked part shows in the answer until a late event changes
// its day. On PGlite, and on PostgreSQL with DATABASE_URL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { testDatabases, type TestDatabase } from './support/db.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import { applyEvents, ensureReadModels } from '../projections/runner/runner.ts';
import { bookedEntries } from '../projections/books/book-reads.ts';
import { keptParts, staleDays } from '../projections/books/book-renders.ts';
import { deferredRows, journalBooksFrom, nextDay, reportFrom, sumRows, type Window } from '../src/books/finance.ts';
import { accountBalances, JOURNAL_CSV_HEADER, journalCsvLines, journalEntries, journalHledger } from '../src/books/finance-journal.ts';
import { REPORT_COLUMNS, renderStaleDays } from '../src/books/day-renders.ts';
import { readTasks, type FinanceAnswer } from '../src/books/finance-answers.ts';
import { startDayRenderer } from '../src/books/day-renderer.ts';
import { readsHere } from '../src/eventstore/read-thread.ts';
import { createRng } from '../src/upstream/seed.ts';
import { BOOK_MODELS, history } from './support/book-history.ts';
import '../projections/read-models.ts';

const FORMATS = [
  ['report', 'json'],
  ['report', 'csv'],
  ['journal', 'hledger'],
  ['journal', 'csv'],
  ['journal', 'json'],
] as const;

/** The answer rendered for the whole window at once: the code the parts replaced. */
async function wholeWindow(t: TestDatabase, schema: string, w: Window, task: 'report' | 'journal', format: string): Promise<string> {
  if (task === 'report') {
    const f = await reportFrom(t.db, schema, w);
    if (format === 'csv') return `${[REPORT_COLUMNS.join(','), ...f.rows.map((row) => REPORT_COLUMNS.map((c) => row[c]).join(','))].join('\n')}\n`;
    const body = {
      object: 'finance_report',
      currency: f.currency,
      from: w.from,
      to: w.to,
      rows: f.rows,
      deferred: deferredRows(f, w),
      totals: sumRows(f.rows),
      periods: [],
    };
    return JSON.stringify(body);
  }
  const entries = journalEntries(await journalBooksFrom(t.db, schema, w), await bookedEntries(t.db, schema, w.from, w.to));
  if (format === 'json') return JSON.stringify({ object: 'journal', from: w.from, to: w.to, entries, balances: accountBalances(entries) });
  return format === 'csv' ? `${[JOURNAL_CSV_HEADER, ...journalCsvLines(entries)].join('\n')}\n` : journalHledger(entries);
}

async function answered(t: TestDatabase, schema: string, w: Window, task: 'report' | 'journal', format: string): Promise<string> {
  const a: FinanceAnswer = await readTasks[task](t.db, { schema, window: w, format, periods: [] });
  return new TextDecoder().decode(a.body);
}

async function assertSameAnswers(t: TestDatabase, schema: string, windows: Window[], label: string): Promise<void> {
  for (const w of windows)
    for (const [task, format] of FORMATS)
      assert.is(await answered(t, schema, w, task, format), await wholeWindow(t, schema, w, task, format), `${label}: ${task} ${format} ${w.from}..${w.to}`);
}

async function project(t: TestDatabase, schema: string, events: ProjectedEvent[], from: number, pageSizes: () => number): Promise<number> {
  let position = from;
  for (let i = 0; i < events.length;) {
    const page = events.slice(i, i + pageSizes());
    position = await applyEvents(t.db, schema, page, position, BOOK_MODELS);
    i += page.length;
  }
  return position;
}

const daysOf = (w: Window): string[] => {
  const out: string[] = [];
  for (let d = w.from; d <= w.to; d = nextDay(d)) out.push(d);
  return out;
};

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase }>(`finance answers from each day's parts on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
  });
  s.after(async (ctx) => {
    await ctx.t.cleanup();
  });

  for (const seed of [11, 2027]) {
    s(`seed ${seed}: kept, out-of-date and missing parts all give the whole window's answer`, async ({ t }) => {
      const all = history(seed, 700);
      const rnd = createRng(seed * 17);
      const schema = `${t.schema}_parts_${seed}`;
      await ensureReadModels(t.db, schema, BOOK_MODELS);
      const cut = Math.floor(all.length * 0.7);
      const early = all.slice(0, cut);
      const day = (e: ProjectedEvent) => e.timestamp.slice(0, 10);
      const first = day(all[0]);
      const lastEarly = day(early[early.length - 1]);
      const position = await project(t, schema, early, 0, () => 1 + Math.floor(rnd() * 50));

      const days = daysOf({ from: first, to: lastEarly });
      const windows: Window[] = [
        { from: first, to: lastEarly },
        { from: '2026-02-25', to: days[3] },
      ];
      for (let i = 0; i < 4; i++) {
        const a = Math.floor(rnd() * days.length);
        windows.push({ from: days[a], to: days[Math.min(days.length - 1, a + Math.floor(rnd() * 12))] });
      }
      await assertSameAnswers(t, schema, windows, 'no part kept');

      // Every day before today (here: the day after the early events) rendered and kept.
      const rendered = await renderStaleDays(t.db, { schema, before: nextDay(lastEarly), limit: 1000 });
      const kept = await keptParts(t.db, schema, first, lastEarly, ['journalHledger']);
      assert.ok(rendered > 20, `days rendered: ${rendered}`);
      assert.is(kept.size, rendered, 'every rendered day is kept and current');
      assert.equal(await staleDays(t.db, schema, nextDay(lastEarly), 10), [], 'nothing left to render');
      await assertSameAnswers(t, schema, windows, 'every closed day kept');

      // A kept part is what the answer is made of: a marked one shows through.
      // (a day of calls on the priced channel, which the late rate below re-prices)
      const priced = (
        await t.db.query<{ day: string }>(`SELECT DISTINCT day FROM "${schema}".upstream_calls WHERE channel = 'alpha' AND day < $1 ORDER BY day`, [lastEarly])
      ).map((r) => r.day);
      const marked = priced[Math.floor(priced.length / 2)];
      assert.ok(kept.get(marked)?.journalHledger, `a kept day with entries: ${marked}`);
      await t.db.query(`UPDATE "${schema}".book_renders_2 SET journal_hledger = journal_hledger || '; marked' WHERE day = $1`, [marked]);
      assert.ok((await answered(t, schema, { from: marked, to: marked }, 'journal', 'hledger')).includes('; marked'), 'the kept part is used');

      // Late events: the rest of the history, and a rate set after the fact for a day before the marked one.
      const repriced = days[days.indexOf(marked) - 2];
      const rest = all.slice(cut);
      const late: ProjectedEvent = {
        id: `late-rate-${seed}`,
        type: 'UpstreamCostRateSet',
        position: all.length + 1,
        timestamp: new Date(Date.parse(all[all.length - 1].timestamp) + 60_000).toISOString(),
        data: {
          channel: 'alpha',
          upstreamModel: 'u-1',
          currency: 'EUR',
          effectiveAt: `${repriced}T12:00:00.000Z`,
          input: '211',
          cacheRead: '0',
          cacheWrite5m: '0',
          cacheWrite1h: '0',
          output: '0',
          image: null,
        },
      };
      await project(t, schema, [...rest, late], position, () => 1 + Math.floor(rnd() * 50));
      const last = day(late);
      const stale = (await staleDays(t.db, schema, nextDay(last), 1000)).map((d) => d.day);
      assert.ok(stale.includes(repriced) && stale.includes(marked), `the re-priced days are out of date: ${stale.join(' ')}`);
      assert.ok(stale.includes(nextDay(lastEarly)) || stale.includes(lastEarly), 'and the days after the cut');
      assert.not.ok(
        (await answered(t, schema, { from: marked, to: marked }, 'journal', 'hledger')).includes('; marked'),
        "a part out of date is not used: the day's rows are read again",
      );
      const allDays = daysOf({ from: first, to: last });
      const after: Window[] = [...windows, { from: first, to: last }, { from: repriced, to: last }, { from: allDays[allDays.length - 8], to: last }];
      await assertSameAnswers(t, schema, after, 'some parts out of date');

      // The day renderer brings every closed day up to date, a batch at a time.
      const renderer = startDayRenderer({
        reads: readsHere(t.db, readTasks),
        schema,
        log: { warn: () => undefined, info: () => undefined },
        everyMs: 3_600_000,
        batchDays: 5,
        pauseMs: 0,
        now: () => new Date(`${nextDay(last)}T00:00:01.000Z`),
      });
      await renderer.catchUp();
      await renderer.stop();
      assert.equal(await staleDays(t.db, schema, nextDay(last), 10), [], 'nothing left to render');
      const [changed] = await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (SELECT key FROM "${schema}".book_day_changes UNION SELECT key FROM "${schema}".upstream_cost_day_changes) d`,
      );
      assert.is((await keptParts(t.db, schema, first, last, [])).size, changed.n, 'every day with a change is kept and current');
      await assertSameAnswers(t, schema, after, 'every day kept again');
      await t.db.exec(`DROP SCHEMA "${schema}" CASCADE`);
    });
  }

  s.run();
}
