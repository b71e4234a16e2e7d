// Rebuild: replay every event from position zero into a fresh schema while the live read models
// keep answering, then swap the schemas in one transaction. Also dumps read models for comparison
// and drops a scratch schema.
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { openPostgres, UNBOUNDED_STATEMENTS, type Database } from '../../src/eventstore/db.ts';
import type { EventReader } from '../../src/eventstore/port.ts';
import { eachAtMost } from '../../src/at-most.ts';
import * as checkpoint from './checkpoint.ts';
import { finishDdl } from './ddl.ts';
import { allReadModels } from './registry.ts';
import { replayGroups, replayOnWorkers, type ReplayObserver } from './parallel-replay.ts';
import { ReplayMemory } from './replay-memory.ts';
import { applyEvents, eachPage, ensureReadModels } from './runner.ts';
import { normaliseRow, q } from './sql.ts';

interface RebuildProgress {
  position: number;
  head: number;
  events: number;
  elapsedMs: number;
}

interface ReplayOptions {
  batchSize?: number;
  onProgress?: (p: RebuildProgress) => void;
  memory?: ConstructorParameters<typeof ReplayMemory>[0];
  /** Threads to fold on (default: the machine's cores for a log of THREADS_FROM_EVENTS or more); only a PostgreSQL server allows more than one. */
  threads?: number;
  /**
   * A target read once and dropped (verify's): no durability, no secondary indexes (ddl.ts), and
   * folded off this thread even on one (the event loop serves live calls meanwhile).
   */
  scratch?: boolean;
  /** A scratch target kept afterwards (verify's copy): with its secondary indexes (ddl.ts). */
  indexed?: boolean;
  /**
   * Work on the first thread's pages (PageObserver, verify's chain check), heard with its result
   * when that thread is done. Only a replay on threads runs it (scratchFoldsOnThreads says whether).
   */
  observer?: ReplayObserver;
  /**
   * The replay runs in a process serving live calls (a rebuild asked for over the admin API): it
   * folds off the event loop where the database allows (a PostgreSQL server), its threads held to
   * `share` of their time; on the loop (embedded PGlite) in small pages with `pace` between them,
   * told when a page reached the log's head (the pacer rests then no more).
   */
  serving?: { share: number; pace: (opts?: { atHead?: boolean }) => Promise<void> };
}

/** Events a page when a replay folds on a serving process's event loop (its transaction holds the one PGlite connection). */
const SERVING_PAGE = 2_000;

/**
 * Below this many events a replay folds on one thread: starting the threads (each loads the
 * modules) cost more than they saved. Measured on two cores from the sources: 100k events 2.09 s
 * on one thread, 2.38 s on two; 300k 5.06 s and 4.94 s; 1M 19.3 s and 13.5-14.5 s.
 */
const THREADS_FROM_EVENTS = 500_000;

/**
 * A scratch replay (verify's) runs in a serving process held to a memory bound, its first thread
 * also checking the chains: smaller pages and a smaller young generation than a rebuild's. Pages
 * of 5,000 instead of 10,000 events, at 1,000,162 events alternated twice: peak RSS 359 / 391
 * against 468 / 453 MiB, in 58.5 / 55.0 against 49.3 / 60.2 s.
 */
const SCRATCH_BATCH = 5_000;
const SCRATCH_YOUNG_GENERATION_MB = 48;

async function defaultThreads(store: EventReader): Promise<number> {
  const big = store.countAfter ? (await store.countAfter(0, THREADS_FROM_EVENTS)) >= THREADS_FROM_EVENTS : true;
  return big ? os.availableParallelism() : 1;
}

/** Other threads can fold only where they can open both the log and the target themselves. */
function threadSources(db: Database, store: EventReader) {
  return db.url && store.workerSource ? { log: store.workerSource, readModelsUrl: db.url } : null;
}

/** Whether a scratch replay (verify's) of `store` into `db` folds on threads (and so runs an observer). */
export function scratchFoldsOnThreads(db: Database, store: EventReader): boolean {
  return threadSources(db, store) !== null;
}

/** Replays all events into `target` (dropped first). Returns the position reached. */
export async function replayInto(db: Database, store: EventReader, target: string, opts: ReplayOptions = {}): Promise<number> {
  await dropReadModels(db, target);
  // Nobody reads the target before the swap and a crash restarts the rebuild from zero, so it is
  // loaded without secondary indexes, mostly as UNLOGGED tables, then made durable and indexed once.
  await ensureReadModels(db, target, allReadModels(), { bulk: true, scratch: opts.scratch, indexed: opts.indexed });
  const started = Date.now();
  // Larger pages mean fewer rewrites of hot rows (accounts, keys, daily usage: once per page each);
  // 25k events per page, two pages in memory at a time, stays well under 1 GB of heap.
  const batchSize = opts.batchSize ?? (opts.scratch ? SCRATCH_BATCH : 25_000);
  const pace = opts.serving?.pace;
  let head = await store.headPosition();
  const progress = (position: number, events: number) => {
    opts.onProgress?.({ position, head, events, elapsedMs: Date.now() - started });
  };
  const sources = threadSources(db, store);
  const groups = sources
    ? (replayGroups(allReadModels(), opts.threads ?? (await defaultThreads(store)), opts.observer !== undefined) ??
      (opts.scratch || opts.serving ? [allReadModels()] : null))
    : null;
  let folded: Folded;
  if (sources && groups) {
    // The threads stop at a position under which nothing can still commit; what comes after is
    // applied below, once the tables are finished.
    const upTo = await store.readableHead();
    const count = await replayOnWorkers({
      groups,
      log: sources.log,
      readModels: { url: sources.readModelsUrl, schema: target },
      upTo,
      batchSize,
      memory: opts.memory,
      onPage: progress,
      youngGenerationMb: opts.scratch ? SCRATCH_YOUNG_GENERATION_MB : undefined,
      observer: opts.observer,
      share: opts.serving?.share,
    });
    folded = { position: upTo, count, memory: null };
  } else {
    folded = await foldHere(db, store, target, pace ? Math.min(batchSize, SERVING_PAGE) : batchSize, opts.memory, async (position, count) => {
      if (position >= head) head = await store.headPosition();
      progress(position, count);
      await pace?.();
    });
  }
  const { position, count } = folded;
  const finish = finishDdl(target, allReadModels(), { scratch: opts.scratch });
  await withFinishingConnections(db, async (finishing) => {
    await finishing.transaction(async (tx) => {
      await folded.memory?.flushAll(tx, target);
      await checkpoint.advance(tx, target, position);
      for (const stmt of finish.durable) await tx.query(stmt);
    });
    // Nobody uses the target yet, so its indexes are built side by side (on PostgreSQL a few at a
    // time, each on a connection of its own: the server's cores share the sorting).
    await sideBySide(finishing, finish.indexes);
    await finishing.transaction(async (tx) => {
      for (const stmt of finish.keys) await tx.query(stmt);
    });
    await sideBySide(finishing, finish.statistics);
  });
  // Events appended while the threads folded (or since the last page) go in as the live runner
  // applies them, now that the tables have their keys.
  // A scratch replay catches up in small pages: they are folded on the event loop of a serving process.
  return (await catchUp(db, store, target, position, count, progress, opts.scratch || pace ? 1_000 : 10_000, pace)).position;
}

/** Statements a replay's finishing runs at once (index builds, statistics): as many as the cores that sort. */
const FINISHING_WIDTH = Math.max(2, os.availableParallelism());

/**
 * Runs `fn` on the connections that finish a target: on a PostgreSQL server a small pool of its
 * own without the statement bound (a unique index over 2M charge rows outlasted a serving pool's
 * 5 s, and a rebuild over the admin API at 3M events failed there), which also leaves the serving
 * pool's connections to live calls while the indexes sort. Embedded PGlite has no bound to lift.
 */
async function withFinishingConnections<T>(db: Database, fn: (finishing: Database) => Promise<T>): Promise<T> {
  if (db.kind !== 'postgres' || !db.url) return fn(db);
  const finishing = openPostgres(db.url, FINISHING_WIDTH, UNBOUNDED_STATEMENTS);
  try {
    return await fn(finishing);
  } finally {
    await finishing.close();
  }
}

/**
 * Runs the statements side by side, FINISHING_WIDTH at a time (more would only queue for the pool,
 * and a wait for a pooled connection is bounded: at 3M events the later index builds timed out
 * there); once all have ended, throws the first failure.
 */
async function sideBySide(db: Database, statements: string[]): Promise<void> {
  await eachAtMost(statements, FINISHING_WIDTH, async (stmt) => {
    await db.query(stmt);
  });
}

/**
 * Applies the events after `position` to the finished tables of `schema`, as the live runner
 * does, until none is left; `onPage` hears the position and the count (from `count`) after each.
 */
async function catchUp(
  db: Database,
  store: EventReader,
  schema: string,
  position: number,
  count: number,
  onPage?: (position: number, count: number) => void,
  pageSize = 10_000,
  pace?: (opts: { atHead: boolean }) => Promise<void>,
): Promise<{ position: number; count: number }> {
  for (;;) {
    const page = await store.readAll(position, pageSize);
    if (page.length === 0) return { position, count };
    position = await applyEvents(db, schema, page, position);
    count += page.length;
    onPage?.(position, count);
    await pace?.({ atHead: page.length < pageSize });
  }
}

interface Folded {
  position: number;
  count: number;
  /** Rows still staged (one thread only): written when the tables are finished. */
  memory: ReplayMemory | null;
}

/** Every event folded on this thread, page after page. */
async function foldHere(
  db: Database,
  store: EventReader,
  target: string,
  batchSize: number,
  memoryOptions: ReplayOptions['memory'],
  onPage: (position: number, count: number) => Promise<void>,
): Promise<Folded> {
  // Only this replay writes the target: it keeps hot rows in memory and writes them once they
  // settle, new rows with COPY on a PostgreSQL server (PGlite takes the JSON statements).
  const memory = new ReplayMemory({ copy: db.kind === 'postgres', ...memoryOptions });
  let position = 0;
  let count = 0;
  // On PostgreSQL another connection reads the next page while this one is applied.
  await eachPage(
    (after) => (store.readAllProjected ? store.readAllProjected(after, batchSize) : store.readAll(after, batchSize)),
    async (events) => {
      position = await applyEvents(db, target, events, position, allReadModels(), memory);
      count += events.length;
      await onPage(position, count);
    },
  );
  return { position, count, memory };
}

/**
 * Rebuilds `schema` from zero. Readers keep using the old tables until the new ones have caught
 * up; the swap then happens under the old checkpoint's row lock, so the live runner waits and
 * resumes on the new tables.
 */
export async function rebuildReadModels(
  db: Database,
  store: EventReader,
  schema: string,
  opts: { onProgress?: (p: RebuildProgress) => void; serving?: ReplayOptions['serving'] } = {},
): Promise<{ events: number; position: number }> {
  const next = `${schema}_next`;
  // Positions are not event counts on every store (KurrentDB's are log offsets): count what is applied.
  let events = 0;
  let position = await replayInto(db, store, next, {
    ...opts,
    onProgress: (p) => {
      events = p.events;
      opts.onProgress?.(p);
    },
  });
  for (let attempt = 1; ; attempt++) {
    // Nothing is read from the store inside the swap transaction (embedded PGlite has one
    // connection): if the live tables got ahead meanwhile, catch up and try again.
    let swapped: boolean;
    try {
      swapped = await db.transaction(async (tx) => {
        // Dropping the live tables waits for every reader of them, and readers that come after
        // queue behind it: wait briefly, then let them through and try again.
        await tx.query(`SELECT set_config('lock_timeout', '${SWAP_LOCK_WAIT_MS}', true)`);
        const live = await checkpoint.lock(tx, schema);
        if (live !== null && live > position) return false;
        await tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await tx.query(`ALTER SCHEMA "${next}" RENAME TO "${schema}"`);
        return true;
      });
    } catch (err) {
      if (!isLockContention(err) || attempt >= SWAP_ATTEMPTS) throw err;
      await sleep(SWAP_LOCK_WAIT_MS * attempt);
      swapped = false;
    }
    if (swapped) return { events, position };
    ({ position, count: events } = await catchUp(db, store, next, position, events, undefined, undefined, opts.serving?.pace));
  }
}

/** How long the swap waits for the live tables' locks before it lets their readers through, and how often it tries. */
const SWAP_LOCK_WAIT_MS = 1_000;
const SWAP_ATTEMPTS = 10;

/**
 * The swap lost a wait for a lock: its lock_timeout (55P03), a deadlock with a reader that held
 * one live table and wanted another (40P01), or the statement bound (57014). Nothing was changed.
 */
function isLockContention(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '55P03' || code === '40P01' || code === '57014';
}

/** Every read-model row, sorted by key, timestamps as ISO strings: for equality checks. */
export async function dumpReadModels(db: Database, schema: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const p of allReadModels()) {
    out[p.table] = (await db.query(`SELECT * FROM ${q(schema, p.table)} ORDER BY key`)).map(normaliseRow);
  }
  out.checkpoint = (await db.query<{ position: number }>(`SELECT position FROM ${q(schema, 'checkpoint')}`)).map((r) => ({ position: Number(r.position) }));
  return out;
}

/** Drops a read-model schema (a replay's scratch target) with everything in it. */
export async function dropReadModels(db: Database, schema: string): Promise<void> {
  await db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
