// A thread of verify (audit.ts): checks the hash chains of the log up to a settled position on a
// connection of its own, so the hashing (the chain check's cost: canonical JSON and SHA-256 of
// every event) leaves the event loop that serves live calls, and runs beside the read models' replay.
// The lots are folded on the same pages (lot-fold.ts): the log is read and parsed once for both.
import { parentPort, workerData } from 'node:worker_threads';
import { openPostgres } from '../eventstore/db.ts';
import { readSettledEvents } from '../eventstore/settled-reads.ts';
import { ChainCheck, type ChainHeads, type ChainProblem } from './chain-check.ts';
import { LotCheck } from './lot-check.ts';
import type { LotFoldState } from './lot-fold.ts';

/** What the thread is given (as workerData). */
export interface ChainJob {
  url: string;
  schema: string;
  upTo: number;
  pageSize: number;
}

/** What the thread says: after each page, and once at the end. */
export type ChainReport =
  | { kind: 'page'; events: number; position: number }
  | { kind: 'done'; events: number; position: number; heads: ChainHeads; problems: ChainProblem[]; lots: { state: LotFoldState; problem: string | null } };

const job = workerData as ChainJob;
const report = (m: ChainReport) => parentPort!.postMessage(m);
const db = openPostgres(job.url, 1);
try {
  const check = new ChainCheck();
  const lots = new LotCheck();
  let position = 0;
  for (;;) {
    const page = await readSettledEvents(db, job.schema, position, job.upTo, job.pageSize);
    if (page.length === 0) break;
    for (const e of page) {
      check.add(e);
      lots.add(e);
    }
    position = page[page.length - 1].position;
    report({ kind: 'page', events: check.events, position });
  }
  report({
    kind: 'done',
    events: check.events,
    position,
    heads: check.heads(),
    problems: check.problems,
    lots: { state: lots.state(), problem: lots.problem },
  });
} finally {
  await db.close();
}
