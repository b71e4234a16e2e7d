// Runs a decider against a stream: load state (cache, else snapshot plus the events after it),
// decide, append with the expected revision and the new state as snapshot. A conflict means
// another process wrote the stream first: reload and decide again. Commands on one stream are
// queued in-process, so conflicts only come from other processes.
import { randomUUID } from 'node:crypto';
import type { Decider } from './decider.ts';
import type { DomainEvent } from './events.ts';
import type { AppendRequest, AppendResult, EventMetadata, EventStore, StoredEvent } from '../eventstore/port.ts';
import { WrongExpectedRevisionError } from '../eventstore/errors.ts';

/** Bump when a decider's state shape changes: older snapshots are then ignored and refolded. */
export const SNAPSHOT_VERSION = 1;

interface Cached { revision: number; state: unknown }

export interface CommandResult<S> {
  events: StoredEvent[];
  state: S;
  revision: number;
  lastPosition: number;
}

export interface CommandHandlerOptions {
  store: EventStore;
  /** Appends through a group committer when given. */
  append?: (request: AppendRequest) => Promise<AppendResult>;
  cacheSize?: number;
  maxRetries?: number;
  /** Told of every event this process appended, as soon as the append commits. */
  onAppended?: (events: StoredEvent[]) => void;
}

export function createCommandHandler(opts: CommandHandlerOptions) {
  const { store } = opts;
  const append = opts.append ?? ((r: AppendRequest) => store.append(r));
  const cache = new Map<string, Cached>();
  const cacheSize = opts.cacheSize ?? 50_000;
  const queues = new Map<string, Promise<unknown>>();
  const maxRetries = opts.maxRetries ?? 20;

  async function load<S>(decider: Decider<S, unknown>, stream: string): Promise<Cached> {
    const hit = cache.get(stream);
    if (hit) return hit;
    const snap = await store.readSnapshot(stream);
    const usable = snap && (snap.state as { v?: number })?.v === SNAPSHOT_VERSION;
    let state = usable ? (snap.state as { s: S }).s : decider.initialState();
    let revision = usable ? snap.revision : -1;
    const tail = await store.readStream(stream, revision + 1);
    for (const e of tail) state = decider.evolve(state, { type: e.type, data: e.data } as DomainEvent);
    if (tail.length) revision = tail[tail.length - 1].revision;
    const loaded = { revision, state };
    remember(stream, loaded);
    return loaded;
  }

  function remember(stream: string, entry: Cached): void {
    cache.delete(stream);
    cache.set(stream, entry);
    if (cache.size > cacheSize) cache.delete(cache.keys().next().value as string);
  }

  async function run<S, C>(decider: Decider<S, C>, stream: string, command: C, metadata: EventMetadata, eventIds?: (e: DomainEvent, i: number) => string): Promise<CommandResult<S>> {
    for (let attempt = 0; ; attempt++) {
      const current = await load(decider as Decider<S, unknown>, stream);
      const state = current.state as S;
      const events = decider.decide(command, state);
      if (events.length === 0) return { events: [], state, revision: current.revision, lastPosition: 0 };
      const next = events.reduce(decider.evolve, state);
      const ids = events.map((e, i) => eventIds?.(e, i) ?? randomUUID());
      try {
        const result = await append({
          stream,
          expectedRevision: current.revision,
          events: events.map((e, i) => ({ id: ids[i], type: e.type, data: e.data as unknown as Record<string, unknown>, metadata })),
          snapshot: { v: SNAPSHOT_VERSION, s: next },
        });
        remember(stream, { revision: result.revision, state: next });
        const timestamp = new Date().toISOString();
        const stored = events.map((e, i) => ({ id: ids[i], type: e.type, stream, revision: current.revision + 1 + i, position: result.firstPosition + i, timestamp, data: e.data as never, metadata, prevHash: '', hash: '' }));
        opts.onAppended?.(stored);
        return { state: next, revision: result.revision, lastPosition: result.lastPosition, events: stored };
      } catch (err) {
        cache.delete(stream);
        if (!(err instanceof WrongExpectedRevisionError) || attempt >= maxRetries) throw err;
      }
    }
  }

  return {
    /** Decides and appends one command; commands on the same stream run one at a time. */
    handle<S, C>(decider: Decider<S, C>, stream: string, command: C, metadata: EventMetadata, eventIds?: (e: DomainEvent, i: number) => string): Promise<CommandResult<S>> {
      const previous = queues.get(stream) ?? Promise.resolve();
      const result = previous.catch(() => undefined).then(() => run(decider, stream, command, metadata, eventIds));
      const tail = result.catch(() => undefined);
      queues.set(stream, tail);
      void tail.then(() => { if (queues.get(stream) === tail) queues.delete(stream); });
      return result;
    },
    /** Current state, from the cache when warm. */
    async state<S>(decider: Decider<S, unknown>, stream: string): Promise<{ state: S; revision: number }> {
      const c = await load(decider, stream);
      return { state: c.state as S, revision: c.revision };
    },
    forget(stream: string) { cache.delete(stream); },
  };
}

export type CommandHandler = ReturnType<typeof createCommandHandler>;
