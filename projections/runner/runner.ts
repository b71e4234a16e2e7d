// Feeds the read models from the event store. Each batch of events is applied to every projection
// and the checkpoint moves in the same transaction, so a crash never applies an event twice or
// skips one. The checkpoint row is locked and compared first: if another runner moved it, this
// one resynchronises instead of applying the batch again.
import type { Database, Queryable } from '../../src/eventstore/db.ts';
import type { EventStore, ProjectedEvent, StoredEvent, Subscription } from '../../src/eventstore/port.ts';
import { allReadModels } from './registry.ts';
import type { RowProjection } from './row-projection.ts';
import { applyBatch } from './apply.ts';
import * as checkpoint from './checkpoint.ts';
import { projectionDdl, type DdlOptions } from './ddl.ts';
import type { ReplayMemory } from './replay-memory.ts';
import { outageReporter, type OutageLog } from '../../src/eventstore/outage.ts';

class CheckpointMovedError extends Error {
  constructor(readonly actual: number) {
    super(`checkpoint moved to ${actual} by another runner`);
  }
}

export async function ensureReadModels(db: Database, schema: string, projections: RowProjection[] = allReadModels(), opts: DdlOptions = {}): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [schema]);
    for (const stmt of projectionDdl(schema, projections, opts)) await tx.query(stmt);
  });
}

/**
 * Applies events (which must follow `expectedPosition`) to every projection in one transaction.
 * `memory` is for a replay into a schema of its own (see ReplayMemory); a failed batch leaves it unusable.
 */
export async function applyEvents(
  db: Database,
  schema: string,
  events: ProjectedEvent[],
  expectedPosition: number,
  projections: RowProjection[] = allReadModels(),
  memory?: ReplayMemory,
): Promise<number> {
  try {
    return await db.transaction((tx) => applyEventsIn(tx, schema, events, expectedPosition, projections, memory));
  } catch (err) {
    memory?.fail();
    throw err;
  }
}

/** The same, inside a transaction the caller owns (verify's alignment of its kept copy on embedded PGlite). */
export async function applyEventsIn(
  tx: Queryable,
  schema: string,
  events: ProjectedEvent[],
  expectedPosition: number,
  projections: RowProjection[] = allReadModels(),
  memory?: ReplayMemory,
): Promise<number> {
  // Read models need not wait for the disk: rows and checkpoint commit together, so a database
  // crash can only take both back to an earlier checkpoint, from which the events are applied
  // again (the events are never behind the read models in the log). Saves a flush per batch.
  const position = await checkpoint.lock(tx, schema, { relaxedCommit: true });
  // No row: the schema was swapped by a rebuild while we waited; retry on the new one.
  if (position === null) throw new CheckpointMovedError(expectedPosition);
  if (position !== expectedPosition) throw new CheckpointMovedError(position);
  if (events.length === 0) return expectedPosition;
  const last = events[events.length - 1].position;
  await applyPage(
    tx,
    schema,
    events.filter((e) => e.position > expectedPosition),
    projections,
    memory,
  );
  await checkpoint.advance(tx, schema, last);
  return last;
}

/**
 * Folds a page of events into every projection's rows inside the caller's transaction, without
 * the checkpoint (a parallel replay's workers each fold a part of the projections, see
 * parallel-replay.ts). Each projection is folded while the database writes the previous one's
 * rows; statements still go to the connection one at a time, in order.
 */
export async function applyPage(tx: Queryable, schema: string, events: ProjectedEvent[], projections: RowProjection[], memory?: ReplayMemory): Promise<void> {
  let tail: Promise<unknown> = Promise.resolve();
  let firstError: { error: unknown } | null = null;
  const inOrder: Queryable = {
    query(text, params) {
      const result = tail.then(() => tx.query(text, params));
      tail = result.catch((error) => {
        firstError ??= { error };
      });
      return result as never;
    },
  };
  const writes: Array<Promise<unknown>> = [];
  try {
    memory?.beginPage(inOrder, schema, writes);
    for (const p of projections) await applyBatch(inOrder, schema, p, events, memory, writes);
    memory?.endPage();
    await Promise.all(writes);
  } catch (err) {
    // The first statement to fail is the cause; those after it fail only because the
    // transaction is aborted.
    await Promise.allSettled(writes);
    throw firstError ? (firstError as { error: unknown }).error : err;
  }
}

/**
 * Reads the log page after page from the start (`read(after)` gives the page after a position;
 * an empty page ends it), reading the next page while `handle` works on this one. A read that
 * fails meanwhile is reported when its page is awaited, not as unhandled.
 */
export async function eachPage<E extends { position: number }>(read: (after: number) => Promise<E[]>, handle: (page: E[]) => Promise<void>): Promise<void> {
  const readAhead = (after: number) => {
    const page = read(after);
    page.catch(() => undefined);
    return page;
  };
  let next = readAhead(0);
  for (;;) {
    const page = await next;
    if (page.length === 0) return;
    next = readAhead(page[page.length - 1].position);
    await handle(page);
  }
}

export interface ProjectionRunner {
  readonly position: number;
  /** Resolves when every event appended before the call is in the read models. */
  caughtUp(): Promise<void>;
  /** Resolves when the read models include `position`. */
  waitFor(position: number, timeoutMs?: number): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * How long the runner lets appends gather before it projects them. Every batch costs a read and a
 * transaction of a dozen statements whatever its size; at one call at a time that was two batches
 * per call, competing with the calls for the same cores and server. Readers that need the rows now
 * (caughtUp, waitFor) do not wait for it.
 */
const PROJECTION_LINGER_MS = 20;

export async function startProjectionRunner(opts: {
  db: Database;
  store: EventStore;
  schema: string;
  lingerMs?: number;
  onApplied?: (position: number, events: StoredEvent[]) => void;
  /** Told once when projecting starts failing (the database is out of reach) and once when it recovers. */
  log?: OutageLog;
}): Promise<ProjectionRunner> {
  const outage = opts.log ? outageReporter(opts.log, 'projection runner') : null;
  const { db, store, schema } = opts;
  await ensureReadModels(db, schema);
  let position = await checkpoint.read(db, schema);
  const waiters = new Set<{ target: number; resolve: (ok: boolean) => void }>();

  /** The read models include `reached`: tell whoever waits for it (also when another runner got there). */
  const moveTo = (reached: number) => {
    position = reached;
    for (const w of waiters)
      if (w.target <= position) {
        waiters.delete(w);
        w.resolve(true);
      }
  };

  const handler = async (events: StoredEvent[]): Promise<void | { rewindTo: number }> => {
    for (;;) {
      const fresh = events.filter((e) => e.position > position);
      if (fresh.length === 0) return;
      try {
        const reached = await applyEvents(db, schema, fresh, position);
        outage?.ok();
        opts.onApplied?.(reached, fresh);
        moveTo(reached);
        return;
      } catch (err) {
        if (!(err instanceof CheckpointMovedError)) {
          outage?.failed(err);
          throw err;
        }
        // Behind what this runner applied: the database lost the read models' last commits (they
        // commit without waiting for the disk or a standby, and a failover came before them). The
        // events after their checkpoint are read again, not just this page's.
        if (err.actual < position) {
          opts.log?.warn(
            { applied: position, found: err.actual },
            'read models found behind what was applied (their last commits were lost); reading the log again from their checkpoint',
          );
          position = err.actual;
          return { rewindTo: err.actual };
        }
        // Another runner (or a rebuild swap) got further: continue from where it is.
        moveTo(err.actual);
      }
    }
  };

  const subscription: Subscription = store.subscribe(position, handler, { lingerMs: opts.lingerMs ?? PROJECTION_LINGER_MS });

  return {
    get position() {
      return position;
    },
    caughtUp: () => subscription.caughtUp(),
    waitFor(target, timeoutMs = 5000) {
      if (target <= position) return Promise.resolve(true);
      // Someone is waiting for these rows: project them at the usual pace (they may be another
      // process's, not yet notified). Not at once: a page cut short for every operator's read
      // competed with the calls' appends (at 10M events, live p99 12 -> 40 ms beside the finance reads).
      subscription.expect(target);
      return new Promise((resolve) => {
        const w = { target, resolve };
        waiters.add(w);
        setTimeout(() => {
          if (waiters.delete(w)) resolve(false);
        }, timeoutMs).unref();
      });
    },
    async stop() {
      await subscription.close();
      for (const w of waiters) w.resolve(false);
      waiters.clear();
    },
  };
}
