// Checking the log's hash chains, one event after another in global order: each stream's revisions
// follow on, each event names the hash of the one before it, and each body still matches its hash.
// Pure: the pages are read by the caller (audit.ts), here or on the replay's first thread (chain-observer.ts).
import { chainHash, eventBody, GENESIS_HASH } from '../eventstore/canonical.ts';
import type { StoredEvent } from '../eventstore/port.ts';

export interface ChainProblem {
  stream: string;
  revision: number;
  position: number;
  problem: string;
}

/** Where each stream's chain stands: its last revision and hash. */
export type ChainHeads = Array<[stream: string, head: { revision: number; hash: string }]>;

export class ChainCheck {
  private readonly last: Map<string, { revision: number; hash: string }>;
  readonly problems: ChainProblem[] = [];
  events = 0;

  /** Starts empty, or where another check of the log's beginning stopped. */
  constructor(heads: ChainHeads = [], problems: ChainProblem[] = [], events = 0) {
    this.last = new Map(heads);
    this.problems.push(...problems);
    this.events = events;
  }

  add(e: StoredEvent): void {
    const prev = this.last.get(e.stream) ?? { revision: -1, hash: GENESIS_HASH };
    if (e.revision !== prev.revision + 1)
      this.problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: `revision gap: expected ${prev.revision + 1}` });
    if (e.prevHash !== prev.hash)
      this.problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: 'prev_hash does not match the previous event' });
    if (chainHash(e.prevHash, eventBody(e)) !== e.hash)
      this.problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: 'content does not match its hash (edited after append)' });
    this.last.set(e.stream, { revision: e.revision, hash: e.hash });
    this.events++;
  }

  get streams(): number {
    return this.last.size;
  }

  heads(): ChainHeads {
    return [...this.last];
  }
}
