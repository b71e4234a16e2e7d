// Group commit: appends requested while a batch is in flight are sent together as the next batch,
// so under load many requests share one transaction (and one fsync) while a lone request still
// goes out at once.
//
// Background appends (an operator's correction: thousands of events a page) have a lane of their
// own, one batch in flight at a time: a live call's append never waits in the queue behind them
// or shares a transaction with them, whatever the operator is doing.
import type { AppendRequest, AppendResult, EventStore } from './port.ts';

interface Pending {
  request: AppendRequest;
  resolve: (r: AppendResult) => void;
  reject: (e: Error) => void;
}

interface Lane {
  queue: Pending[];
  inFlight: number;
  maxInFlight: number;
}

export function createGroupCommitter(store: EventStore, opts: { maxBatch?: number; maxInFlight?: number } = {}) {
  const maxBatch = opts.maxBatch ?? 500;
  const live: Lane = { queue: [], inFlight: 0, maxInFlight: opts.maxInFlight ?? 2 };
  const background: Lane = { queue: [], inFlight: 0, maxInFlight: 1 };
  let drained: Array<() => void> = [];
  const idle = () => live.inFlight + background.inFlight === 0 && live.queue.length + background.queue.length === 0;

  async function flush(lane: Lane): Promise<void> {
    if (lane.inFlight >= lane.maxInFlight || lane.queue.length === 0) return;
    const batch = lane.queue.splice(0, maxBatch);
    lane.inFlight++;
    try {
      const results = await store.appendMany(batch.map((p) => p.request));
      results.forEach((r, i) => (r instanceof Error ? batch[i].reject(r) : batch[i].resolve(r)));
    } catch (err) {
      for (const p of batch) p.reject(err as Error);
    } finally {
      lane.inFlight--;
      void flush(lane);
      if (idle()) {
        for (const d of drained) d();
        drained = [];
      }
    }
  }

  return {
    append(request: AppendRequest): Promise<AppendResult> {
      const lane = request.background ? background : live;
      return new Promise((resolve, reject) => {
        lane.queue.push({ request, resolve, reject });
        // Wait one turn of the event loop so requests arriving together share a batch.
        if (lane.queue.length === 1) setImmediate(() => void flush(lane));
        else if (lane.queue.length >= maxBatch) void flush(lane);
      });
    },
    get pending() {
      return live.queue.length + background.queue.length;
    },
    /** Resolves once every append requested so far has committed or failed. */
    drain(): Promise<void> {
      if (idle()) return Promise.resolve();
      return new Promise((resolve) => drained.push(resolve));
    },
  };
}

export type GroupCommitter = ReturnType<typeof createGroupCommitter>;
