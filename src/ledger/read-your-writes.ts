// Read-your-writes. Every append of this process, by whatever path (metering, admin, corrections,
// bootstrap, sweeper), passes through the store the ledger wraps here, so the newest position it
// wrote is known without any caller having to report it. Reads wait (bounded) until the read
// models include that position, and, when other processes can write the same log, everything
// committed before the read began.
import type { AppendRequest, EventStore } from '../eventstore/port.ts';

/** The read models could not include the writes a read must see within its bound: a 503. */
export class ReadModelsBehind extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReadModelsBehind';
  }
}

export interface AppendTracker {
  store: EventStore;
  /** The newest position this process appended (0 before its first append). */
  lastAppended(): number;
}

/** Wraps a store so that every successful append moves `lastAppended`. */
export function trackAppends(inner: EventStore): AppendTracker {
  let last = 0;
  const note = (position: number) => {
    if (position > last) last = position;
  };
  const store: EventStore = {
    ...inner,
    kind: inner.kind,
    async append(request: AppendRequest) {
      const result = await inner.append(request);
      note(result.lastPosition);
      return result;
    },
    async appendMany(requests: AppendRequest[]) {
      const results = await inner.appendMany(requests);
      for (const r of results) if (!(r instanceof Error)) note(r.lastPosition);
      return results;
    },
  };
  return { store, lastAppended: () => last };
}
