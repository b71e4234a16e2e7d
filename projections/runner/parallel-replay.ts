// A replay of the whole log on a PostgreSQL server folds on worker threads: each thread folds a
// group of the read models on connections of its own (the second reading only the event types
// its group handles), so the fold (a replay's limit on one thread: ~15-20 µs of node per event)
// uses more than one core. The threads stop at one settled position; the caller finishes the tables and applies
// whatever was appended after it.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../../src/eventstore/start-worker.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';
import type { ReplayMemory } from './replay-memory.ts';
import type { RowProjection } from './row-projection.ts';

/**
 * The read models folded by each thread. The first group is fed by every call (holds, balances,
 * key spend) and reads the whole log; the second folds the charges into the usage logs. A read
 * model not named here joins the second group.
 */
const FIRST_GROUP = new Set(['accounts', 'holds', 'keys', 'plans', 'models']);
/**
 * The first group when its thread also carries an observer (verify's chain check, ~25 µs an
 * event): the holds move to the second thread. At 1,000,162 events the first thread then ended
 * 4.8 s after the second instead of 12.7 s.
 */
const OBSERVED_FIRST_GROUP = new Set(['accounts', 'keys', 'plans', 'models']);

/**
 * Work that rides on the first group's pages (verify's chain check): a module the thread imports
 * (by URL, so that the read side names no module above it) whose createPageObserver() sees every
 * event, with its stream and hash chain, before it is folded; its result() goes back with the
 * thread's count. The log is then read once for both.
 */
export interface PageObserver {
  observe(page: StoredEvent[]): void;
  result(): unknown;
}

/** A PageObserver to run: its module's URL, and who hears its result when the thread is done. */
export interface ReplayObserver {
  module: string;
  onResult: (result: unknown) => void;
}

/** What a worker thread is given (as workerData). */
export interface ReplayJob {
  /** The observer module of the first group (see PageObserver). */
  observer?: string;
  log: { url: string; schema: string };
  readModels: { url: string; schema: string };
  projections: string[];
  /** Event types to read; null: every event (the group that counts them). */
  types: string[] | null;
  upTo: number;
  batchSize: number;
  memory?: ConstructorParameters<typeof ReplayMemory>[0];
  /** Below 1: after each page the thread rests so that its pages take this share of its time (a rebuild beside live calls). */
  share?: number;
}

/** What a worker thread says: after each page, and once at the end. */
export type ReplayReport = { kind: 'page'; position: number; events: number } | { kind: 'done'; events: number; observed?: unknown };

/** The groups to fold side by side, or null when this machine or these databases allow only one thread. */
export function replayGroups(projections: RowProjection[], threads: number, observed = false): RowProjection[][] | null {
  if (threads < 2) return null;
  const firstGroup = observed ? OBSERVED_FIRST_GROUP : FIRST_GROUP;
  const first = projections.filter((p) => firstGroup.has(p.name));
  const rest = projections.filter((p) => !firstGroup.has(p.name));
  return first.length > 0 && rest.length > 0 ? [first, rest] : null;
}

// Young-generation room for a worker: a page's events live through many scavenges, and in a small
// young generation they were promoted and swept as old objects (GC was a quarter of the fold).
// Measured on 1M events, two workers: 48 MB 57,612 events/s, 192 MB 68,993-73,980, 384 MB 70,607.
const WORKER_YOUNG_GENERATION_MB = 192;

/**
 * Folds every event after 0 and up to `upTo` into `target`, one thread per group, and resolves
 * with the number of events (counted by the first group, which reads them all). `onPage` hears
 * the first group's position and count after each page. The target's rows are all written when
 * this resolves; its checkpoint is not moved.
 */
export async function replayOnWorkers(opts: {
  groups: RowProjection[][];
  log: ReplayJob['log'];
  readModels: ReplayJob['readModels'];
  upTo: number;
  batchSize: number;
  memory?: ReplayJob['memory'];
  onPage?: (position: number, events: number) => void;
  /** Each thread's young generation (default WORKER_YOUNG_GENERATION_MB): less for a replay held to a memory bound. */
  youngGenerationMb?: number;
  /** An observer of the first group's pages. */
  observer?: ReplayObserver;
  /** The share of each thread's time its pages may take (default 1). */
  share?: number;
}): Promise<number> {
  const entry = new URL(`../replay-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
  const workers: Worker[] = [];
  const runs = opts.groups.map((group, i) => {
    const job: ReplayJob = {
      log: opts.log,
      readModels: opts.readModels,
      projections: group.map((p) => p.name),
      types: i === 0 ? null : [...new Set(group.flatMap((p) => [...p.handles]))],
      ...(i === 0 && opts.observer ? { observer: opts.observer.module } : {}),
      upTo: opts.upTo,
      batchSize: opts.batchSize,
      memory: opts.memory,
      ...(opts.share !== undefined && opts.share < 1 ? { share: opts.share } : {}),
    };
    const worker = startWorker(entry, {
      workerData: job,
      resourceLimits: { maxYoungGenerationSizeMb: opts.youngGenerationMb ?? WORKER_YOUNG_GENERATION_MB },
    });
    workers.push(worker);
    return new Promise<number>((resolve, reject) => {
      let counted: number | null = null;
      worker.on('message', (m: ReplayReport) => {
        if (m.kind === 'done') {
          counted = m.events;
          if (i === 0 && opts.observer) opts.observer.onResult(m.observed);
        } else if (i === 0) opts.onPage?.(m.position, m.events);
      });
      worker.on('error', reject);
      worker.on('exit', (code) => {
        if (counted !== null) resolve(counted);
        else reject(new Error(`replay worker for ${job.projections.join(', ')} stopped (exit code ${code}) before it finished`));
      });
    });
  });
  try {
    const counts = await Promise.all(runs);
    return counts[0];
  } catch (err) {
    // One group failed: the others' work is useless (the target is dropped and replayed again).
    await Promise.allSettled(workers.map((w) => w.terminate()));
    throw err;
  }
}
