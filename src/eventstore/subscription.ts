// Catch-up-then-live subscription over any readAll(): reads in pages until the head, then
// waits for an append notification (or a slow poll, in case one was missed) and reads again.
// A notified event may not be readable yet (on PostgreSQL an older transaction still running
// holds readers back, and its end may notify nobody): then it reads again soon, backing off.
import type { EventEmitter } from 'node:events';
import type { EventHandler, StoredEvent, Subscription } from './port.ts';

export function pollingSubscription(opts: {
  afterPosition: number;
  handler: EventHandler;
  readAll: (after: number, limit: number) => Promise<StoredEvent[]>;
  head: () => Promise<number>;
  notifier: EventEmitter;
  pollIntervalMs: number;
  pageSize?: number;
  /** See SubscribeOptions.lingerMs. */
  lingerMs?: number;
}): Subscription {
  let position = opts.afterPosition;
  let closed = false;
  let wake: (() => void) | null = null;
  let dirty = true;
  let failure: Error | null = null;
  /** Failed reads in a row. */
  let failures = 0;
  /** Set by caughtUp(): read now, without lingering. */
  let urgent = false;
  let cutLinger: (() => void) | null = null;
  const lingerMs = opts.lingerMs ?? 0;
  const waiters: Array<{ target: number; resolve: () => void; reject: (e: Error) => void }> = [];
  const pageSize = opts.pageSize ?? 2000;

  /** The highest position an append notification named. */
  let notified = 0;
  let retryMs = 0;
  let retry: NodeJS.Timeout | null = null;
  const onAppend = (at?: number) => {
    // Already read (a process hears its own appends twice: at once, and by NOTIFY).
    if (typeof at === 'number' && at <= position) return;
    if (typeof at === 'number' && at > notified) notified = at;
    dirty = true;
    wake?.();
  };
  /** Called after reading everything readable: a notified or awaited event still unseen is looked for again. */
  const retryIfShort = () => {
    const wanted = waiters.reduce((max, w) => Math.max(max, w.target), notified);
    if (wanted <= position || closed) {
      retryMs = 0;
      return;
    }
    retryMs = Math.min(Math.max(1, retryMs * 2), 100);
    retry ??= setTimeout(() => {
      retry = null;
      onAppend();
    }, retryMs);
    retry.unref();
  };
  opts.notifier.on('position', onAppend);
  const timer = setInterval(() => onAppend(), opts.pollIntervalMs);
  timer.unref();

  const settleWaiters = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i].target <= position) {
        waiters[i].resolve();
        waiters.splice(i, 1);
      }
    }
  };

  const loop = (async () => {
    while (!closed) {
      if (!dirty)
        await new Promise<void>((r) => {
          wake = r;
        });
      wake = null;
      if (lingerMs > 0 && !urgent && !closed) {
        await new Promise<void>((r) => {
          const pause = setTimeout(r, lingerMs);
          cutLinger = () => {
            clearTimeout(pause);
            r();
          };
        });
        cutLinger = null;
      }
      urgent = false;
      dirty = false;
      try {
        for (;;) {
          const events = await opts.readAll(position, pageSize);
          if (events.length === 0 || closed) break;
          const verdict = await opts.handler(events);
          if (verdict) {
            position = verdict.rewindTo;
            continue;
          }
          position = events[events.length - 1].position;
          settleWaiters();
          if (events.length < pageSize) break;
        }
        failure = null;
        failures = 0;
        retryIfShort();
      } catch (err) {
        // A failing handler is retried from the same position on the next wake-up, sooner after
        // a conflict, later while the database stays out of reach.
        failure = err as Error;
        failures++;
        for (const w of waiters.splice(0)) w.reject(failure);
        await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** Math.min(failures - 1, 5))));
        dirty = true;
      }
    }
  })();

  return {
    async caughtUp() {
      const target = await opts.head();
      if (target <= position) return;
      await new Promise<void>((resolve, reject) => {
        waiters.push({ target, resolve, reject });
        dirty = true;
        urgent = true;
        wake?.();
        cutLinger?.();
      });
    },
    expect: (at) => onAppend(at),
    async close() {
      closed = true;
      clearInterval(timer);
      if (retry) clearTimeout(retry);
      cutLinger?.();
      opts.notifier.off('position', onAppend);
      wake?.();
      await loop;
      for (const w of waiters.splice(0)) w.reject(failure ?? new Error('subscription closed'));
    },
  };
}
