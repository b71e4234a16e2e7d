// A verification from the last checkpoint (verified-checkpoint.ts) on: only the events after it
// are read. Their chains are checked on from the recorded heads and their lot bookings on from
// the recorded lot book; they are applied to the kept copy of the read models, whose triggers
// note every row they change (projections/runner/change-capture.ts); and exactly those rows are
// compared with the live read models, both sides at one position. A row nothing changed since
// the checkpoint is not read again: the full verification, on demand, does that.
import type { Database, Queryable } from '../eventstore/db.ts';
import type { StoredEvent } from '../eventstore/port.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { ReadModelsBehind } from '../ledger/read-your-writes.ts';
import { readLogPage } from '../ledger/log-pages.ts';
import { LotCheck } from '../books/index.ts';
import { applyEvents, applyEventsIn } from '../../projections/runner/runner.ts';
import { allReadModels } from '../../projections/runner/registry.ts';
import * as checkpoint from '../../projections/runner/checkpoint.ts';
import { captureChanges, changedRows, columnsOf, forgetChanges, notedAmong, rowsWrittenAfter, writtenOnce } from '../../projections/runner/change-capture.ts';
import { addDigest, rowHashes, rowsAsJson, type RowDifference, type TableDigest } from '../../projections/runner/compare.ts';
import { ChainCheck, type ChainHeads, type ChainProblem } from './chain-check.ts';
import { Pacer, yieldToTraffic } from './pacing.ts';
import { readHeads, writeCheckpoint, type VerifiedCheckpoint } from './verified-checkpoint.ts';

/** Events read and applied to the copy a page at a time (fewer rewrites of the hot rows than the live runner's pages). */
const PAGE = 5_000;
/** Events a page when a full verification's rebuild catches up with the live read models. */
const CATCH_UP_PAGE = 1_000;
/** Events hashed between two turns given to live calls (~10 ms of the loop). */
const HASHED_PER_TURN = 500;
/** Rows listed per table when they differ (as a full verification lists them). */
const MAX_DIFFERENCES = 1_000;
/** Attempts at holding the copy and the live read models at one position before answering 503. */
const ALIGN_ATTEMPTS = 50;

export interface SinceResult {
  /** Events checked in all: the checkpoint's and the new ones. */
  events: number;
  /** Events read by this verification. */
  newEvents: number;
  streams: number;
  chainProblems: ChainProblem[];
  readModelDifferences: RowDifference[];
  lotProblem: string | null;
  /** The checkpoint this one began from, and the one it recorded (null when something failed). */
  since: VerifiedCheckpoint;
  recorded: VerifiedCheckpoint | null;
}

type Progress = (checked: number, total: number) => void;

/**
 * Where a verification's wall time went, in ms (the bench's breakdown): waiting for a page of the
 * log, hashing chains and folding lots (this thread), waiting for the copy's apply once hashed,
 * paced (given back to live calls), the comparison, the record.
 */
export class Timings {
  readonly ms: Record<string, number> = {};
  add(part: string, ms: number): void {
    this.ms[part] = (this.ms[part] ?? 0) + ms;
  }
  async time<T>(part: string, work: Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work;
    } finally {
      this.add(part, performance.now() - started);
    }
  }
}

/**
 * Checks the log and the read models from `since` on, and records the next checkpoint when all
 * is well. Call with the verification lease held.
 */
export async function verifySince(
  ledger: Ledger,
  since: VerifiedCheckpoint,
  opts: { assertHeld: () => void; onProgress?: Progress; timings?: Timings },
): Promise<SinceResult> {
  const timings = opts.timings ?? new Timings();
  const started = performance.now();
  const db = ledger.readModels.db;
  const rm = ledger.rmSchema;
  const copy = since.copy;
  const chains = new ChainCheck(await readHeads(db, rm), [], since.events);
  const lots = new LotCheck(since.lots);
  const moved = new Set<string>();
  let chainsAt = since.chainsPosition;
  // The copy may be past the checkpoint: a verification interrupted after applying some pages
  // left it there, with its notes of what changed since the checkpoint.
  let copyAt = await checkpoint.read(db, copy);
  const newAtStart = Math.max(0, (await ledger.events.headPosition()) - Math.min(chainsAt, copyAt));
  let newEvents = 0;
  // Each event once: its chain and lots if the chains have not reached it, the copy if it has not.
  const take = (page: StoredEvent[]) => {
    for (const e of page) {
      if (e.position <= chainsAt) continue;
      chains.add(e);
      lots.add(e);
      moved.add(e.stream);
      chainsAt = e.position;
      newEvents++;
    }
  };
  // Page after page: the copy applies a page while its events' chains are hashed here in slices
  // (the database works on the one while this thread does the other), and the next page is
  // read meanwhile.
  timings.add('heads', performance.now() - started);
  const pacer = new Pacer();
  const read = (after: number) => {
    const page = readLogPage(ledger, after, PAGE);
    page.catch(() => undefined);
    return page;
  };
  try {
    for (let next = read(Math.min(chainsAt, copyAt)); ;) {
      const page = await timings.time('readWait', next);
      if (page.length === 0) break;
      next = read(page[page.length - 1].position);
      const forCopy = page.filter((e) => e.position > copyAt);
      const applied = forCopy.length ? applyEvents(db, copy, forCopy, copyAt) : Promise.resolve(copyAt);
      applied.catch(() => undefined);
      for (let i = 0; i < page.length; i += HASHED_PER_TURN) {
        const started = performance.now();
        take(page.slice(i, i + HASHED_PER_TURN));
        timings.add('hashing', performance.now() - started);
        await yieldToTraffic();
      }
      copyAt = await timings.time('applyWait', applied);
      opts.onProgress?.(newEvents, Math.max(newAtStart, newEvents));
      await timings.time('paced', pacer.step());
    }
  } finally {
    pacer.stop();
  }
  const aligned = await timings.time('compare', compareAtOnePosition(ledger, copy, copyAt, since.copyPosition, take));
  copyAt = aligned.position;
  // Closing the last day only checks it: the state recorded below is the fold's as it stands.
  const lotProblem = lots.finish();
  const ok = chains.problems.length === 0 && aligned.differences.length === 0 && lotProblem === null;
  const common = {
    events: chains.events,
    newEvents,
    streams: chains.streams,
    chainProblems: chains.problems,
    readModelDifferences: aligned.differences,
    lotProblem,
    since,
  };
  if (!ok) return { ...common, recorded: null };
  const digests = new Map(since.digests);
  for (const [table, d] of aligned.digestChange) addDigest(digests, table, d.rows, d.sum);
  const recorded: VerifiedCheckpoint = {
    chainsPosition: chainsAt,
    events: chains.events,
    lots: lots.state(),
    copy,
    copyPosition: copyAt,
    digests,
    verifiedAt: new Date().toISOString(),
    fullAt: since.fullAt,
  };
  opts.assertHeld();
  const heads: ChainHeads = chains.heads().filter(([stream]) => moved.has(stream));
  await timings.time('record', writeCheckpoint(db, rm, recorded, heads, { allHeads: false, then: (tx) => forgetChanges(tx, copy) }));
  return { ...common, recorded };
}

/**
 * A full verification's rebuild stopped at `rebuiltAt` while live calls moved the live read models
 * past it, so rows their events changed differed. Its triggers on, the rebuild is brought to the
 * live read models' position and every row the catch-up changed is compared, both sides at one
 * position. Of the `earlier` differences, those whose rows no later event changed stand. The
 * notes are forgotten: `digestChange` is what the catch-up did to the rebuild's digests.
 */
export async function catchUpRebuild(ledger: Ledger, rebuilt: string, rebuiltAt: number, earlier: readonly RowDifference[]): Promise<Aligned> {
  const db = ledger.readModels.db;
  await captureChanges(db, rebuilt);
  let at = rebuiltAt;
  // Most of the way outside any snapshot, in small pages paced as the replay's own catch-up is
  // (a page's fold holds the loop, and PGlite's one connection): the last stretch is applied in
  // compareAtOnePosition.
  const pacer = new Pacer();
  try {
    for (;;) {
      const page = await readLogPage(ledger, at, CATCH_UP_PAGE);
      if (page.length < CATCH_UP_PAGE) break;
      at = await applyEvents(db, rebuilt, page, at);
      await pacer.step();
    }
  } finally {
    pacer.stop();
  }
  const aligned = await compareAtOnePosition(ledger, rebuilt, at, rebuiltAt, () => undefined);
  const noted = await notedAmong(db, rebuilt, earlier);
  const standing = earlier.filter((d) => !noted.has(`${d.table}\u0000${d.key}`));
  await forgetChanges(db, rebuilt);
  return { ...aligned, differences: [...standing, ...aligned.differences] };
}

export interface Aligned {
  position: number;
  differences: RowDifference[];
  /** What the changed rows did to each table's digest. */
  digestChange: Map<string, TableDigest>;
}

/**
 * Brings the copy to the live read models' position and compares the rows the copy's notes name.
 * The live side is read in one snapshot (on a PostgreSQL server, a read-only transaction of
 * REPEATABLE READ: no transaction id, so it holds back neither the log's readers nor the
 * projector) whose checkpoint says where it stands; the copy is moved there first. On embedded
 * PGlite the one connection's transaction holds the projector anyway, so all of it runs inside.
 */
async function compareAtOnePosition(ledger: Ledger, copy: string, copyAt: number, since: number, take: (page: StoredEvent[]) => void): Promise<Aligned> {
  const db = ledger.readModels.db;
  const rm = ledger.rmSchema;
  if (!(await ledger.waitForPosition(copyAt, 10_000)))
    throw new ReadModelsBehind(`the read models have not reached position ${copyAt} yet: verify again shortly`);
  for (let attempt = 0; attempt < ALIGN_ATTEMPTS; attempt++) {
    // Read before the snapshot: on PGlite the store's reads use the one connection the snapshot holds.
    const pending = await readLogPage(ledger, copyAt, 10_000);
    const last = pending.length ? pending[pending.length - 1].position : copyAt;
    const result = await db.transaction(async (tx): Promise<Aligned | null> => {
      if (db.kind === 'postgres') await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const live = await checkpoint.read(tx, rm);
      if (live < copyAt || live > last) return null;
      const due = pending.filter((e) => e.position <= live);
      const copySide: Queryable = db.kind === 'postgres' ? db : tx;
      if (due.length) {
        take(due);
        if (db.kind === 'postgres') await applyEvents(db, copy, due, copyAt);
        else await applyEventsIn(tx, copy, due, copyAt);
      }
      return { position: live, ...(await compareChangedRows(tx, copySide, rm, copy, since)) };
    });
    if (result) return result;
  }
  throw new ReadModelsBehind('the read models kept moving while verify compared them: verify again shortly');
}

/** Rows hashed per statement on each side. */
const KEYS_PER_STATEMENT = 5_000;

async function compareChangedRows(
  live: Queryable,
  copySide: Queryable,
  rm: string,
  copy: string,
  /** The copy's position at the checkpoint: the logs written once are compared from there. */
  since: number,
): Promise<{ differences: RowDifference[]; digestChange: Map<string, TableDigest> }> {
  const differences: RowDifference[] = [];
  const digestChange = new Map<string, TableDigest>();
  for (const p of allReadModels()) {
    const [liveColumns, copyColumns] = [await columnsOf(live, rm, p.table), await columnsOf(copySide, copy, p.table)];
    if (liveColumns.join() !== copyColumns.join()) {
      differences.push({ table: p.table, key: '(columns)', live: liveColumns, rebuilt: copyColumns });
      continue;
    }
    const differ: string[] = [];
    const changed = writtenOnce(p) ? rowsWrittenAfter(copySide, copy, p.table, since) : changedRows(copySide, copy, p.table);
    for await (const notes of changed) {
      for (let i = 0; i < notes.length; i += KEYS_PER_STATEMENT) {
        const chunk = notes.slice(i, i + KEYS_PER_STATEMENT);
        const keys = chunk.map((n) => n.key);
        const [liveHashes, copyHashes] = await Promise.all([
          rowHashes(live, rm, p.table, liveColumns, keys),
          rowHashes(copySide, copy, p.table, copyColumns, keys),
        ]);
        for (const n of chunk) {
          if (liveHashes.get(n.key) !== copyHashes.get(n.key)) differ.push(n.key);
          if (n.oldHash !== null) addDigest(digestChange, p.table, -1n, -BigInt(n.oldHash));
          const now = copyHashes.get(n.key);
          if (now !== undefined) addDigest(digestChange, p.table, 1n, BigInt(now));
        }
      }
    }
    const listed = differ.slice(0, MAX_DIFFERENCES);
    if (listed.length === 0) continue;
    const [liveRows, copyRows] = [await rowsAsJson(live, rm, p.table, listed), await rowsAsJson(copySide, copy, p.table, listed)];
    for (const key of listed) differences.push({ table: p.table, key, live: liveRows.get(key) ?? null, rebuilt: copyRows.get(key) ?? null });
  }
  return { differences, digestChange };
}

/**
 * Whether the copy is where the checkpoint left it, or past it (an interrupted verification);
 * not when it is gone, or its UNLOGGED tables were emptied by a database crash.
 */
export async function copyIsIntact(db: Database, cp: VerifiedCheckpoint): Promise<boolean> {
  // Its notes' table is made when the copy is adopted (captureChanges): without it, it never was.
  const [row] = await db.query<{ notes: string | null }>(`SELECT to_regclass($1)::text AS notes`, [`"${cp.copy}".changed_rows`]);
  if (!row?.notes) return false;
  return (await checkpoint.read(db, cp.copy)) >= cp.copyPosition;
}
