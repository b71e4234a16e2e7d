// This process's copy of the streams it decides on: loaded from the snapshot and the events after
// it, kept (most recently used first, bounded), and brought up to the log on demand. A speed-up
// only: the command handler confirms a copy before anything is answered from it alone.
import type { Decider } from './decider.ts';
import type { DomainEvent } from './events.ts';
import type { EventStore, StoredEvent } from '../eventstore/port.ts';

/** Bump when a decider's state shape changes: older snapshots are then ignored and refolded. */
export const SNAPSHOT_VERSION = 9; // 3: per-charge nets of adjusted charges (account), stream revision and correction components (model); 4: key controls and key spend (account), rotation (key); 5: the account counts its adjustments instead of keeping every adjusted charge; 6: and names its last one; 7: paid lots keep their tax, and the account its card and auto top-up; 8: extra tokens as lots of credit; 9: a closed lot keeps what expired
export interface Cached {
  revision: number;
  state: unknown;
}

/** `state` with the events of `tail` folded in, and the revision of the last of them. */
function folded(decider: Decider<unknown, unknown>, from: Cached, tail: StoredEvent[]): Cached {
  let state = from.state;
  for (const e of tail) state = decider.evolve(state, { type: e.type, data: e.data } as DomainEvent);
  return { revision: tail.length ? tail[tail.length - 1].revision : from.revision, state };
}

export function createStreamStates(store: Pick<EventStore, 'readStream' | 'readSnapshot'>, cacheSize: number) {
  const cache = new Map<string, Cached>();
  const confirmations = { checked: 0, moved: 0 };

  function remember(stream: string, entry: Cached): void {
    cache.delete(stream);
    cache.set(stream, entry);
    if (cache.size > cacheSize) cache.delete(cache.keys().next().value as string);
  }

  async function loadFromLog(decider: Decider<unknown, unknown>, stream: string): Promise<Cached> {
    const snap = await store.readSnapshot(stream);
    const usable = snap && (snap.state as { v?: number })?.v === SNAPSHOT_VERSION;
    const json = usable ? (snap.state as { s: unknown }).s : undefined;
    const start = { revision: usable ? snap.revision : -1, state: json === undefined ? decider.initialState() : decider.revive ? decider.revive(json) : json };
    const loaded = folded(decider, start, await store.readStream(stream, start.revision + 1));
    remember(stream, loaded);
    return loaded;
  }

  return {
    remember,
    forget: (stream: string) => void cache.delete(stream),
    /** The stream's state and whether it was read from the log just now (else it is the cache's, unconfirmed). */
    async load(decider: Decider<unknown, unknown>, stream: string): Promise<Cached & { confirmed: boolean }> {
      const hit = cache.get(stream);
      if (hit) return { ...hit, confirmed: false };
      return { ...(await loadFromLog(decider, stream)), confirmed: true };
    },
    /**
     * A cached state brought up to the log: the events after its revision (an indexed read that
     * finds none unless another process wrote the stream) are folded in.
     */
    async confirm(decider: Decider<unknown, unknown>, stream: string, cached: Cached): Promise<Cached & { moved: boolean }> {
      const tail = await store.readStream(stream, cached.revision + 1);
      confirmations.checked++;
      if (tail.length === 0) return { ...cached, moved: false };
      confirmations.moved++;
      const moved = folded(decider, cached, tail);
      remember(stream, moved);
      return { ...moved, moved: true };
    },
    /** Cached states confirmed against the log, and how many of them had moved (another process wrote the stream). */
    confirmationCounts: () => ({ ...confirmations }),
  };
}
