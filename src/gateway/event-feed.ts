// How the in-memory caches (keys, prices) hear of events appended by *other* processes. Their own
// process's appends reach them at once through the ledger's local events; what is left to read
// from the store is rare (a key issued or revoked, a price changed elsewhere) and needs to arrive
// within a fraction of a second, not within a millisecond of every append.
//
// So the caches share one reader that polls: every POLL_MS it reads what was appended since it
// last looked, a page at a time, and hands it to every cache. A store subscription instead wakes
// on every append, so each metered call (two appends) cost its caches four more queries that
// competed with the call itself (measured in BENCHMARKS.md). A cache that needs to be current
// now (an unknown key) asks for caughtUp(), which reads at once.
import type { EventHandler, EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import { outageReporter, type OutageLog } from '../eventstore/outage.ts';

export type EventFeed = Pick<EventStore, 'subscribe' | 'headPosition' | 'readableHead'>;

export const POLL_MS = 250;
const PAGE = 2000;

export function pollingEventFeed(
  store: Pick<EventStore, 'readAll' | 'headPosition' | 'readableHead'>,
  opts: { pollMs?: number; log?: OutageLog } = {},
): EventFeed & { close(): Promise<void> } {
  const outage = opts.log ? outageReporter(opts.log, 'event feed', { baseMs: opts.pollMs ?? POLL_MS }) : null;
  const handlers = new Set<EventHandler>();
  let position = -1;
  let reading: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  /** Reads everything after `position` and hands it to the caches; one read at a time. */
  function readNow(): Promise<void> {
    reading ??= (async () => {
      try {
        for (;;) {
          const events: StoredEvent[] = await store.readAll(position, PAGE);
          if (events.length === 0) break;
          for (const h of handlers) await h(events);
          position = events[events.length - 1].position;
          if (events.length < PAGE) break;
        }
      } finally {
        reading = null;
      }
    })();
    return reading;
  }

  const schedule = (delayMs = opts.pollMs ?? POLL_MS) => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = null;
      // A failed read is retried later, backing off while the database is out of reach;
      // caughtUp() reports failures to its caller.
      readNow().then(
        () => {
          outage?.ok();
          schedule();
        },
        (err: unknown) => schedule(outage?.failed(err)),
      );
    }, delayMs);
    timer.unref();
  };

  return {
    headPosition: () => store.headPosition(),
    readableHead: () => store.readableHead(),
    subscribe(afterPosition, handler): Subscription {
      // The first subscriber's start is the feed's; a later one may also see some earlier events
      // (the caches apply events idempotently, so that is harmless).
      if (position < 0) position = afterPosition;
      handlers.add(handler);
      schedule();
      return {
        async caughtUp() {
          // store.readAll answers with everything committed before it was called (it waits for
          // older transactions itself), so reading until no page moves reaches the head.
          const target = await store.headPosition();
          for (let before = -2; position < target && position !== before;) {
            before = position;
            await readNow();
          }
        },
        async close() {
          handlers.delete(handler);
        },
      };
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await reading?.catch(() => undefined);
    },
  };
}

/**
 * Waits until `subscription` has read what was committed before the call, or `boundMs` passed;
 * for a cache asked about something it does not know (a key or a model added through another
 * process a moment ago). A failed read counts as done: the caller then answers from what it has.
 */
export async function caughtUpWithin(subscription: Subscription, boundMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([subscription.caughtUp().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, boundMs)))]);
  clearTimeout(timer);
}
