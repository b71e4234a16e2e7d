// How the in-memory caches (keys, prices) hear of events appended by *other* processes. Their own
// process's appends reach them at once through the ledger's local events; what is left to read
// from the store is rare (a key issued or revoked, a price changed elsewhere) and needs to arrive
// within a fraction of a second, not within a millisecond of every append.
//
// So the caches share one reader: it reads what was appended since it last looked, a page at a
// time, and hands it to every cache. It reads WAKE_MS after another process announces a commit
// (PostgreSQL's NOTIFY: a key revoked or a price changed on another gateway is known here within
// tens of milliseconds), and every POLL_MS in case an announcement was lost. Announcements that
// arrive while a read is due join it, so a busy log costs at most one read per WAKE_MS, not one
// per append: a store subscription per cache woke on every append, and each metered call (two
// appends) cost its caches four more queries that competed with the call itself (measured in
// BENCHMARKS.md). A cache that needs to be current now (an unknown key) asks for caughtUp(),
// which reads at once.
//
// Each cache subscribes after the position its own starting state includes (the read models'
// checkpoint, say), not after the head at its start: events appended before it started but not
// yet in the read models (a projector not running yet) still reach it, whatever the start order.
import type { EventHandler, EventStore, StoredEvent, Subscription } from './port.ts';
import { lagAfter, type Lag } from './lag.ts';
import { outageReporter, type OutageLog } from './outage.ts';

export type EventFeed = Pick<EventStore, 'subscribe' | 'headPosition' | 'readableHead'>;

export const POLL_MS = 250;
/** How soon after another process's announced commit the feed reads it (and how often at most, busy). */
export const WAKE_MS = 10;
const PAGE = 2000;

interface Follower {
  handler: EventHandler;
  /** The position this cache has seen everything up to. */
  after: number;
  /** Set once a read that began after it subscribed reached the head: its view is complete. */
  synced: boolean;
}

export function pollingEventFeed(
  store: Pick<EventStore, 'readAll' | 'headPosition' | 'readableHead' | 'countAfter' | 'onOthersCommit'>,
  opts: {
    pollMs?: number;
    wakeMs?: number;
    log?: OutageLog;
    /** Told of each page once every cache has handled it, with the position they have all read to. */
    onRead?: (events: StoredEvent[], readTo: number) => void;
  } = {},
): EventFeed & {
  behind(bounds: { events: number; seconds: number }): Promise<Lag | null>;
  settled(): Promise<void>;
  close(): Promise<void>;
} {
  const outage = opts.log ? outageReporter(opts.log, 'event feed', { baseMs: opts.pollMs ?? POLL_MS }) : null;
  const followers = new Set<Follower>();
  let reading: Promise<void> | null = null;
  /** An announcement heard while a read ran (it may have begun before that commit): one more read follows it. */
  let wantedDuringRead = false;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  const from = () => Math.min(...[...followers].map((f) => f.after));

  /** Reads everything after the slowest cache's position and hands each cache what it has not seen. */
  function readNow(): Promise<void> {
    reading ??= (async () => {
      const syncing = [...followers].filter((f) => !f.synced);
      try {
        while (followers.size > 0) {
          const events: StoredEvent[] = await store.readAll(from(), PAGE);
          let rewound = false;
          for (const f of followers) {
            const unseen = events.filter((e) => e.position > f.after);
            if (unseen.length === 0) continue;
            const verdict = await f.handler(unseen);
            rewound ||= verdict !== undefined;
            f.after = verdict ? verdict.rewindTo : unseen[unseen.length - 1].position;
          }
          if (events.length > 0) opts.onRead?.(events, from());
          if (events.length < PAGE && !rewound) break;
        }
        for (const f of syncing) f.synced = true;
      } finally {
        reading = null;
        if (wantedDuringRead) {
          wantedDuringRead = false;
          schedule(opts.wakeMs ?? WAKE_MS);
        }
      }
    })();
    return reading;
  }

  /** When the pending read is due (ms since the epoch). */
  let due = Infinity;
  const schedule = (delayMs = opts.pollMs ?? POLL_MS) => {
    if (closed) return;
    // An earlier read wanted (an announcement) replaces a later one (the poll).
    if (timer && due <= Date.now() + delayMs) return;
    if (timer) clearTimeout(timer);
    due = Date.now() + delayMs;
    timer = setTimeout(() => {
      timer = null;
      due = Infinity;
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
  const wake = () => {
    if (followers.size === 0) return;
    if (reading) wantedDuringRead = true;
    else schedule(opts.wakeMs ?? WAKE_MS);
  };
  const stopWaking = store.onOthersCommit?.(wake);

  return {
    headPosition: () => store.headPosition(),
    readableHead: () => store.readableHead(),
    subscribe(afterPosition, handler): Subscription {
      const follower: Follower = { handler, after: afterPosition, synced: false };
      followers.add(follower);
      schedule();
      return {
        async caughtUp() {
          // store.readAll answers with everything committed before it was called (it waits for
          // older transactions itself), so reading until no page moves reaches the head.
          const target = await store.headPosition();
          for (let before = -2; follower.after < target && follower.after !== before;) {
            before = follower.after;
            await readNow();
          }
        },
        expect: () => wake(),
        async close() {
          followers.delete(follower);
        },
      };
    },
    /**
     * Why the caches cannot answer for the log yet: one has not read up to the head once since it
     * started, or the feed is past `bounds` behind; null when they are current.
     */
    async behind(bounds) {
      const lag = await lagAfter(store, followers.size > 0 ? from() : await store.headPosition());
      const synced = [...followers].every((f) => f.synced);
      return synced && lag.events <= bounds.events && lag.seconds <= bounds.seconds ? null : lag;
    },
    /** One read of everything committed so far, for every cache (start-up waits for it). */
    settled: async () => {
      await reading?.catch(() => undefined);
      await readNow();
    },
    async close() {
      closed = true;
      stopWaking?.();
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
export async function caughtUpWithin(subscription: Pick<Subscription, 'caughtUp'>, boundMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([subscription.caughtUp().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, boundMs)))]);
  clearTimeout(timer);
}
