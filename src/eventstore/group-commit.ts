// Group commit: appends requested while a batch is in flight are sent together as the next batch,
// so under load many requests share one transaction (and one fsync) while a lone request still
// goes out at once.
import type { AppendRequest, AppendResult, EventStore } from './port.ts';

interface Pending {
  request: AppendRequest;
  resolve: (r: AppendResult) => void;
  reject: (e: Error) => void;
}

export function createGroupCommitter(store: EventStore, opts: { maxBatch?: number; maxInFlight?: number } = {}) {
  const maxBatch = opts.maxBatch ?? 500;
  const maxInFlight = opts.maxInFlight ?? 2;
  let queue: Pending[] = [];
  let inFlight = 0;
  let drained: Array<() => void> = [];

  async function flush(): Promise<void> {
    if (inFlight >= maxInFlight || queue.length === 0) return;
    const batch = queue.slice(0, maxBatch);
    queue = queue.slice(batch.length);
    inFlight++;
    try {
      const results = await store.appendMany(batch.map((p) => p.request));
      results.forEach((r, i) => (r instanceof Error ? batch[i].reject(r) : batch[i].resolve(r)));
    } catch (err) {
      for (const p of batch) p.reject(err as Error);
    } finally {
      inFlight--;
      void flush();
      if (inFlight === 0 && queue.length === 0) {
        for (const d of drained) d();
        drained = [];
      }
    }
  }

  return {
    append(request: AppendRequest): Promise<AppendResult> {
      return new Promise((resolve, reject) => {
        queue.push({ request, resolve, reject });
        // Wait one turn of the event loop so requests arriving together share a batch.
        if (queue.length === 1) setImmediate(() => void flush());
        else if (queue.length >= maxBatch) void flush();
      });
    },
    get pending() {
      return queue.length;
    },
    /** Resolves once every append requested so far has committed or failed. */
    drain(): Promise<void> {
      if (inFlight === 0 && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => drained.push(resolve));
    },
  };
}

export type GroupCommitter = ReturnType<typeof createGroupCommitter>;
