// Verify's chain check and lot check riding on the first thread of the read models' replay
// (audit.ts; projections/runner/parallel-replay.ts's PageObserver): that thread reads every event, with
// its stream and hash chain, for its fold, so the log is read and parsed once for all three, and
// the hashing (canonical JSON and SHA-256 of every event) stays off the event loop.
import type { StoredEvent } from '../eventstore/port.ts';
import type { PageObserver } from '../../projections/runner/parallel-replay.ts';
import { ChainCheck, type ChainHeads, type ChainProblem } from './chain-check.ts';
import { LotCheck } from '../books/index.ts';
import type { LotFoldState } from '../books/index.ts';

/** What the thread hands back (structured-cloned): where the chains and the lots stand, and the position reached. */
export interface ChainResult {
  events: number;
  position: number;
  heads: ChainHeads;
  problems: ChainProblem[];
  lots: { state: LotFoldState; problem: string | null };
}

export function createPageObserver(): PageObserver {
  const check = new ChainCheck();
  const lots = new LotCheck();
  let position = 0;
  return {
    observe(page: StoredEvent[]) {
      for (const e of page) {
        check.add(e);
        lots.add(e);
      }
      if (page.length > 0) position = page[page.length - 1].position;
    },
    result(): ChainResult {
      return { events: check.events, position, heads: check.heads(), problems: check.problems, lots: { state: lots.state(), problem: lots.problem } };
    },
  };
}
