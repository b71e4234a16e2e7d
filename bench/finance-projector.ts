// What the books' read models and the cost fold add to projecting (issue 41), measured two ways on the seeded log:
//   - a replay of every read model but the books, by the same steps as replayInto (tables bare,
//     folded on the same worker threads in the same groups, then made durable, indexed and
//     analysed), to set beside the replay of them all; and the books' fold replayed alone;
//   - the live path: pages of events that continue the log (the same accounts' next calls and
//     payments), each applied by applyPage as the projector applies a page, with and without the
//     books: the pages one after the other in a transaction rolled back at the end, so each run
//     meets the same tables.
import type { Database } from '../src/eventstore/db.ts';
import type { EventReader, ProjectedEvent } from '../src/eventstore/port.ts';
import { ALL_PROJECTIONS } from '../projections/read-models.ts';
import { books } from '../projections/books/books.ts';
import { upstreamCalls, upstreamCostDayChanges, upstreamCostDays, upstreamCostRates } from '../projections/catalogue/cost-tables.ts';
import { upstreamCost } from '../projections/catalogue/cost-book.ts';
import { bookAccounts, bookDayChanges, bookDays, bookDeferred, bookEntries, bookLots } from '../projections/books/book-tables.ts';
import * as checkpoint from '../projections/runner/checkpoint.ts';
import { finishDdl } from '../projections/runner/ddl.ts';
import { replayGroups, replayOnWorkers } from '../projections/runner/parallel-replay.ts';
import { dropReadModels } from '../projections/runner/rebuild.ts';
import type { RowProjection } from '../projections/runner/row-projection.ts';
import { applyPage, ensureReadModels } from '../projections/runner/runner.ts';

/**
 * Issue 41's read models: the cost fold with the rates it reads and the tables it writes (its
 * upstream_calls was a plain row projection before: the baseline lacks that too), then the books'
 * fold and its tables.
 */
export const BOOK_PROJECTIONS: RowProjection[] = [
  upstreamCostRates,
  upstreamCalls,
  upstreamCostDays,
  upstreamCostDayChanges,
  upstreamCost,
  bookAccounts,
  bookLots,
  bookDays,
  bookDeferred,
  bookEntries,
  bookDayChanges,
  books,
];
const isBook = new Set(BOOK_PROJECTIONS.map((p) => p.name));
export const WITHOUT_BOOKS: RowProjection[] = ALL_PROJECTIONS.filter((p) => !isBook.has(p.name));

/**
 * Replays `projections` into `target` (dropped first) as replayInto does on a PostgreSQL server:
 * bulk tables, the log folded on worker threads (two groups when the list splits as replayInto
 * splits it, else one thread), then durable, indexed, keyed and analysed. Seconds, wall clock.
 */
export async function replayOnly(db: Database, store: EventReader, target: string, projections: RowProjection[]): Promise<number> {
  if (!db.url || !store.workerSource) throw new Error('a replay on threads needs a PostgreSQL server');
  const started = performance.now();
  await dropReadModels(db, target);
  await ensureReadModels(db, target, projections, { bulk: true });
  const upTo = await store.readableHead();
  await replayOnWorkers({
    groups: replayGroups(projections, 2) ?? [projections],
    log: store.workerSource,
    readModels: { url: db.url, schema: target },
    upTo,
    batchSize: 25_000,
  });
  const finish = finishDdl(target, projections);
  await db.transaction(async (tx) => {
    await checkpoint.advance(tx, target, upTo);
    for (const stmt of finish.durable) await tx.query(stmt);
  });
  await Promise.all(finish.indexes.map((stmt) => db.query(stmt)));
  await db.transaction(async (tx) => {
    for (const stmt of finish.keys) await tx.query(stmt);
  });
  await Promise.all(finish.statistics.map((stmt) => db.query(stmt)));
  return (performance.now() - started) / 1000;
}

export interface PageCost {
  /** Events per page. */
  pageEvents: number;
  pages: number;
  /** Microseconds per event, the median page's, with every read model and without the books. */
  withBooksUs: number;
  withoutBooksUs: number;
}

const ROLLED_BACK = new Error('rolled back');

/**
 * Milliseconds applyPage takes for each page with `projections`, the pages applied one after the
 * other (each meets the tables as the pages before it left them) in one transaction, rolled back
 * at the end: the tables are as they were for the next run.
 */
async function timePages(db: Database, schema: string, pages: ProjectedEvent[][], projections: RowProjection[]): Promise<number[]> {
  const ms: number[] = [];
  await db
    .transaction(async (tx) => {
      for (const page of pages) {
        const t = performance.now();
        await applyPage(tx, schema, page, projections);
        ms.push(performance.now() - t);
      }
      throw ROLLED_BACK;
    })
    .catch((err) => {
      if (err !== ROLLED_BACK) throw err;
    });
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The live path's cost per event: `events` cut into pages of `pageEvents`, applied with and
 * without the books in turn (which goes first alternating), `rounds` times each.
 */
export async function livePageCost(db: Database, schema: string, events: ProjectedEvent[], pageEvents: number, rounds = 2): Promise<PageCost> {
  const pages: ProjectedEvent[][] = [];
  for (let i = 0; i + pageEvents <= events.length; i += pageEvents) pages.push(events.slice(i, i + pageEvents));
  const perEvent = (ms: number[]) => ms.map((m, i) => (m * 1000) / pages[i].length);
  const withBooks: number[] = [];
  const withoutBooks: number[] = [];
  for (let r = 0; r < rounds; r++)
    for (const all of r % 2 === 0 ? [true, false] : [false, true])
      (all ? withBooks : withoutBooks).push(...perEvent(await timePages(db, schema, pages, all ? ALL_PROJECTIONS : WITHOUT_BOOKS)));
  return { pageEvents, pages: pages.length, withBooksUs: median(withBooks), withoutBooksUs: median(withoutBooks) };
}
