// Audit: every stream's hash chain, every lot, and every read model against a fresh rebuild. They
// run side by side: on a PostgreSQL server the chains and the lots are checked on the replay's first
// thread (chain-observer.ts: the log is read once for the fold and both checks) up to a settled
// position; the rest is read here and paced (pacing.ts) so that live calls keep their turn.
import { randomBytes } from 'node:crypto';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Ledger } from '../ledger/ledger.ts';
import { ReadModelsBehind } from '../ledger/read-your-writes.ts';
import { readLogPage } from '../ledger/log-pages.ts';
import { LotCheck } from '../books/index.ts';
import { dropReadModels, replayInto, scratchFoldsOnThreads } from '../../projections/runner/rebuild.ts';
import { catchUpRebuild } from './verify-since.ts';
import { addDigest, differingRows, type RowDifference, type TableDigest } from '../../projections/runner/compare.ts';
import * as checkpoint from '../../projections/runner/checkpoint.ts';
import type { ReplayObserver } from '../../projections/runner/parallel-replay.ts';
import { ChainCheck, type ChainProblem } from './chain-check.ts';
import { copyName } from './verified-checkpoint.ts';
import type { ChainResult } from './chain-observer.ts';
import { Pacer } from './pacing.ts';

/** A rebuild kept as the next verification's copy of the read models (verified-checkpoint.ts). */
export interface KeptCopy {
  schema: string;
  position: number;
  digests: Map<string, TableDigest>;
}

/** Read-model rows listed per table when they differ from the rebuild (the count beyond is not needed to fail). */
const MAX_DIFFERENCES = 1_000;
/** Comparisons of a whole rebuild cut at their limit by live traffic before verify answers 503. */
const CATCH_UP_ROUNDS = 3;

/** A read-model row that differs from its rebuild (null: missing on that side). */
export type ModelDifference = RowDifference;

/** Events checked on this thread between two turns given back to live calls (hashing and folding the lots of ~1,000 take ~15 ms). */
const PAGE_HERE = 1_000;

/** The chain observer as the replay's thread imports it (the sources' .ts, or the build's .js). */
const CHAIN_OBSERVER = new URL(`./chain-observer${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;

const readPage = (ledger: Ledger, position: number) => readLogPage(ledger, position, PAGE_HERE);

type ChainProgress = (events: number, position: number) => void | Promise<void>;

/** The checks that walk the log: the chains, the lots, and the position they reached. */
interface LogChecks {
  check: ChainCheck;
  lots: LotCheck;
  position: number;
}

const fromThread = (r: ChainResult): LogChecks => ({
  check: new ChainCheck(r.heads, r.problems, r.events),
  lots: new LotCheck(r.lots.state, r.lots.problem),
  position: r.position,
});

/**
 * Walks all events in global order, recomputing each stream's chain and folding the lots.
 * `onProgress` hears after each page the events checked so far and the position reached
 * (awaited, so it may read the head). `begun`: the checks of the log's beginning, made on the
 * replay's thread; the rest is read here once `tailAfter` has settled (see verifyLedger).
 */
export async function checkLog(
  ledger: Ledger,
  onProgress?: ChainProgress,
  tailAfter?: Promise<unknown>,
  begun?: Promise<LogChecks>,
): Promise<{ events: number; streams: number; problems: ChainProblem[]; lots: LotCheck; check: ChainCheck; position: number }> {
  let check = new ChainCheck();
  let lots = new LotCheck();
  let position = 0;
  if (begun) {
    ({ check, lots, position } = await begun);
    await tailAfter;
  }
  // What the thread did not reach (appended since, or all of it on PGlite), here, a page a turn.
  const pacer = new Pacer();
  try {
    for (;;) {
      const page = await readPage(ledger, position);
      if (page.length === 0) break;
      for (const e of page) {
        check.add(e);
        lots.add(e);
      }
      position = page[page.length - 1].position;
      await onProgress?.(check.events, position);
      await pacer.step({ atHead: page.length < PAGE_HERE });
    }
  } finally {
    pacer.stop();
  }
  return { events: check.events, streams: check.streams, problems: check.problems, lots, check, position };
}

/**
 * Rebuilds into a scratch schema and lists every row that differs from the live read models.
 * `onReplayed` hears the events replayed so far and the position reached, after each page of the
 * replay; `observer` rides on the replay's first thread (see replayInto).
 */
export async function compareWithRebuild(
  ledger: Ledger,
  onReplayed?: (events: number, position: number) => void,
  observer?: ReplayObserver,
  /** Hears the rebuild when it equals the live read models: it is then kept (the caller adopts or drops it). */
  keep?: (copy: KeptCopy) => void,
): Promise<ModelDifference[]> {
  await ledger.caughtUp();
  // A schema of this run's own: a failed verify's replay thread may still be winding down (and
  // its clean-up dropping its schema) when the next verify starts, which then lost its tables.
  const scratch = keep ? copyName(ledger.rmSchema) : `${ledger.rmSchema}_verify_${randomBytes(4).toString('hex')}`;
  let kept = false;
  try {
    const position = await replayInto(ledger.readModels.db, ledger.events, scratch, {
      scratch: true,
      indexed: keep !== undefined,
      onProgress: onReplayed && ((p) => onReplayed(p.events, p.position)),
      observer,
    });
    const compared = await compareRebuilt(ledger, scratch, position, keep);
    kept = compared.kept;
    return compared.differences;
  } finally {
    // Also after a failure: no half-built scratch schema is left behind.
    if (!kept) await dropReadModels(ledger.readModels.db, scratch).catch(() => undefined);
  }
}

/**
 * Lists every row of the live read models that differs from `scratch`, a rebuild up to `position`;
 * `keep` hears the rebuild when they are equal (then `kept`). Where live calls moved the live read
 * models past the rebuild, it is brought on to them first (see catchUpRebuild).
 */
export async function compareRebuilt(
  ledger: Ledger,
  scratch: string,
  position: number,
  keep?: (copy: KeptCopy) => void,
): Promise<{ differences: ModelDifference[]; kept: boolean }> {
  // Live read models that have not reached the rebuild (a projector still taking its lease back
  // after a failover) cannot be compared yet: a 503 to ask again, never a false difference.
  if (!(await ledger.waitForPosition(position, 10_000)))
    throw new ReadModelsBehind(`the read models have not reached position ${position} yet: verify again shortly`);
  const db = ledger.readModels.db;
  let at = position;
  let digests = new Map<string, TableDigest>();
  let differences = await differingRows(db, ledger.rmSchema, scratch, MAX_DIFFERENCES, undefined, at, digests);
  for (let round = 1; differences.length > 0; round++) {
    // Live traffic moved the live read models past the rebuild meanwhile, so the rows its events
    // changed may rightly differ: the rebuild goes on to where the live ones are and those rows
    // are compared again, at one position (a page fold cannot name the rows an event changes).
    if ((await checkpoint.read(db, ledger.rmSchema)) <= at) return { differences, kept: false };
    const caught = await catchUpRebuild(ledger, scratch, at, differences);
    at = caught.position;
    for (const [table, d] of caught.digestChange) addDigest(digests, table, d.rows, d.sum);
    // A comparison cut at its limit never looked at the rows past it: once the rows it listed
    // are explained, it runs again on the rebuild as it now stands.
    const cut = differences.length >= MAX_DIFFERENCES;
    differences = caught.differences;
    if (!cut || differences.length > 0) break;
    if (round === CATCH_UP_ROUNDS) throw new ReadModelsBehind('the live read models kept moving while verify compared them: verify again shortly');
    digests = new Map();
    differences = await differingRows(db, ledger.rmSchema, scratch, MAX_DIFFERENCES, undefined, at, digests);
  }
  if (differences.length > 0 || !keep) return { differences, kept: false };
  keep({ schema: scratch, position: at, digests });
  return { differences, kept: true };
}

/** The two phases of a verification: the hash chains, then the read models against a replay. */
export type VerifyPhase = 'chains' | 'read models';

/**
 * How far a verification is. `done` never decreases within a phase and never exceeds `total`.
 * 'chains': events checked; `total` is the head position, scaled by the events per position seen
 * so far (positions are event numbers on PostgreSQL, with rare gaps, and log offsets on
 * KurrentDB), and exactly the events checked on the phase's last report. 'read models': events
 * replayed of the events the chains phase counted (more if the log grew meanwhile).
 */
export interface VerifyProgress {
  phase: VerifyPhase;
  done: number;
  total: number;
}

/** Events in the log, estimated from the events read up to `position` and the head position. */
function estimateTotal(events: number, position: number, head: number): number {
  if (position <= 0) return Math.max(events, head);
  return Math.max(events, Math.round((events * Math.max(head, position)) / position));
}

/**
 * Every stream's hash chain, then every read model against a fresh rebuild. With `onProgress`,
 * each phase is reported at its start (done 0), after each page, and at its end (done = total).
 * `keep` hears the rebuild when it equals the live read models (it is left for the caller then).
 */
export async function fullVerification(ledger: Ledger, opts: { onProgress?: (p: VerifyProgress) => void; keep?: (copy: KeptCopy) => void } = {}) {
  const report = opts.onProgress;
  let head = report ? await ledger.events.headPosition() : 0;
  report?.({ phase: 'chains', done: 0, total: head });
  const chainsProgress =
    report &&
    (async (events: number, position: number) => {
      // Read past the head seen so far: the log grew while it was read.
      if (position >= head) head = Math.max(position, await ledger.events.headPosition());
      report({ phase: 'chains', done: events, total: estimateTotal(events, position, head) });
    });
  // Where the replay folds on threads, its first thread checks the chains and the lots on the
  // pages it reads, and its pages tell the chains' progress until it hands them back.
  const onThreads = scratchFoldsOnThreads(ledger.readModels.db, ledger.events);
  let checkedOnThread: LogChecks | null = null;
  const observer = onThreads ? { module: CHAIN_OBSERVER, onResult: (r: unknown) => (checkedOnThread = fromThread(r as ChainResult)) } : undefined;
  // The replay's progress is told once the chains phase has ended (the phases are reported one
  // after the other, each counting up).
  let replayed = 0;
  let chainsDone: number | null = null;
  const readModelsRun = compareWithRebuild(
    ledger,
    (events, position) => {
      replayed = events;
      if (chainsDone !== null) report?.({ phase: 'read models', done: events, total: Math.max(chainsDone, events) });
      else if (onThreads && !checkedOnThread) void chainsProgress?.(events, position);
    },
    observer,
    opts.keep,
  );
  readModelsRun.catch(() => undefined); // awaited below, after the chains; a failure then is the caller's
  // The rest of the chains is read only after the replay (below), so its checks are taken then;
  // a replay that failed fails the chains too.
  const begun = onThreads
    ? readModelsRun.then(() => {
        if (!checkedOnThread) throw new Error('the replay ended without handing back the chain check');
        return checkedOnThread;
      })
    : undefined;
  // The rest of the chains (events committed since verify began) is read once the replay is over:
  // its long transactions (tables made durable, indexes) hold back the log's readable horizon, and
  // a read of the log's head meanwhile waits, and then gives up.
  const chains = await checkLog(
    ledger,
    chainsProgress,
    readModelsRun.catch(() => undefined),
    begun,
  );
  report?.({ phase: 'chains', done: chains.events, total: chains.events });
  chainsDone = chains.events;
  report?.({ phase: 'read models', done: 0, total: chains.events });
  if (replayed > 0) report?.({ phase: 'read models', done: replayed, total: Math.max(chains.events, replayed) });
  const readModels = await readModelsRun;
  // The lot book's state is taken before its last day is closed (closing only checks it).
  const lotsState = chains.lots.state();
  const lotProblems = checkLots(chains.lots);
  return {
    ok: chains.problems.length === 0 && readModels.length === 0 && lotProblems.length === 0,
    events: chains.events,
    streams: chains.streams,
    chainProblems: chains.problems,
    readModelDifferences: readModels,
    lotProblems,
    reached: { position: chains.position, heads: chains.check.heads(), lots: lotsState },
  };
}

/**
 * Every lot, after every event, sums (recognised + breakage + refunded + deferred = paid: the lot
 * book asserts it as it folds the whole log, in checkLog), and every booking's journal entry
 * balances as it is made. The upstream cost entries are not summed again: each posts one figure as
 * both its debit and its credit, so they balance by construction (summing them read every priced
 * call of the log into node: 10 s of 300k events).
 */
export function checkLots(lots: LotCheck): string[] {
  const problem = lots.finish();
  return problem === null ? [] : [problem];
}
