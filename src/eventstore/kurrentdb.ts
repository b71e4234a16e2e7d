// The KurrentDB event store adapter. Streams are KurrentDB streams (our revision = the stream
// revision), the global position is the $all commit position, and our id, metadata and hash chain
// ride in each event's metadata (see kurrentdb-mapping.ts). Event id uniqueness is enforced with
// claims (kurrentdb-claims.ts). Subscriptions page through $all with readAll from the caller's
// checkpoint and are woken by a live $all subscription, so a projector keeps its checkpoint (a
// commit position) in PostgreSQL in the same transaction as its rows.
import { randomUUID } from 'node:crypto';
import { eachAtMost } from '../at-most.ts';
import { EventEmitter } from 'node:events';
import { ANY, BACKWARDS, END, NO_STREAM, type EventData, type ReadPosition, type RecordedEvent } from '@kurrent/kurrentdb-client';
import { chainHash, eventBody, GENESIS_HASH } from './canonical.ts';
import { assertStreamName } from './stream-name.ts';
import { DuplicateEventError, InvalidEventError, InvalidStreamNameError, WrongExpectedRevisionError } from './errors.ts';
import { pollingSubscription } from './subscription.ts';
import type { KurrentClient, LiveFeed } from './kurrentdb-client.ts';
import { claimEventIds } from './kurrentdb-claims.ts';
import {
  encodeMetadata,
  hashOf,
  INTERNAL_STREAM_PREFIX,
  isStreamNotFound,
  isUserEvent,
  kurrentEventId,
  mapAppendError,
  positionNumber,
  readFrom,
  SNAPSHOT_EVENT_TYPE,
  snapshotStream,
  toStoredEvent,
  userEventsFilter,
} from './kurrentdb-mapping.ts';
import type { AppendRequest, AppendResult, EventStore, NewEvent, Snapshot, StoredEvent, Subscription } from './port.ts';

export interface KurrentDbStoreOptions {
  /** Throws for an event that breaks the catalogue; runs before anything is sent. */
  validate?: (event: NewEvent) => void;
  /** Fallback poll for subscribers in case the live $all subscription misses a wake-up. */
  pollIntervalMs?: number;
  /** Appends of one group commit run this many at a time (one stream's requests stay in order). */
  concurrency?: number;
  /** Told of failures that do not fail the call (a snapshot that could not be written). */
  onWarning?: (message: string, err: unknown) => void;
}

interface Head {
  revision: number;
  hash: string;
}

export function createKurrentDbEventStore(client: KurrentClient, options: KurrentDbStoreOptions = {}): EventStore {
  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  // The last revision and hash this process saw of each stream, so an append needs no read to
  // find its prevHash. A stale entry only costs a conflict, which the server reports anyway.
  const heads = new Map<string, Head>();
  const HEADS_MAX = 50_000;
  let feed: LiveFeed | null = null;
  let closed = false;
  const warn = options.onWarning ?? (() => {});

  function remember(stream: string, head: Head): void {
    heads.delete(stream);
    heads.set(stream, head);
    if (heads.size > HEADS_MAX) heads.delete(heads.keys().next().value as string);
  }

  /** The stream's revision and last hash, checked against what the request expects. */
  async function headFor(req: AppendRequest): Promise<Head> {
    const expected = req.expectedRevision;
    if (expected === 'no_stream' || expected === -1) return { revision: -1, hash: GENESIS_HASH };
    if (expected === 'any') return lastEvent(req.stream);
    if (!Number.isSafeInteger(expected) || expected < -1) throw new Error(`invalid expected revision ${String(expected)}`);
    const cached = heads.get(req.stream);
    if (cached?.revision === expected) return cached;
    // Read the expected revision and the one after: a later event means the request is stale.
    const found: RecordedEvent[] = [];
    try {
      for await (const r of client.readStream(req.stream, { fromRevision: BigInt(expected), maxCount: 2 })) if (r.event) found.push(r.event);
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    if (found.length !== 1 || found[0].revision !== BigInt(expected)) {
      throw new WrongExpectedRevisionError(req.stream, expected, (await lastEvent(req.stream)).revision);
    }
    const hash = hashOf(found[0]);
    if (!hash) throw new Error(`stream ${req.stream} revision ${expected} was not written by Tollgate`);
    return { revision: expected, hash };
  }

  async function lastEvent(stream: string): Promise<Head> {
    try {
      for await (const r of client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
        if (!r.event) continue;
        const hash = hashOf(r.event);
        if (!hash) throw new Error(`stream ${stream} holds an event not written by Tollgate`);
        return { revision: Number(r.event.revision), hash };
      }
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    return { revision: -1, hash: GENESIS_HASH };
  }

  async function appendOne(req: AppendRequest): Promise<AppendResult> {
    assertStreamName(req.stream);
    if (req.stream.startsWith(INTERNAL_STREAM_PREFIX))
      throw new InvalidStreamNameError(req.stream, `names starting with ${INTERNAL_STREAM_PREFIX} are reserved for the event store`);
    if (req.events.length === 0) throw new Error('an append needs at least one event');
    for (const e of req.events) {
      options.validate?.(e);
      if (typeof e.type !== 'string' || e.type.startsWith('$'))
        throw new InvalidEventError(String(e.type), 'event types starting with $ are reserved for KurrentDB');
    }
    const ids = req.events.map((e) => e.id ?? randomUUID());
    const kurrentIds = ids.map(kurrentEventId);
    const repeated = kurrentIds.findIndex((k, i) => kurrentIds.indexOf(k) !== i);
    if (repeated >= 0) throw new DuplicateEventError(ids[repeated]);

    const head = await headFor(req);
    const timestamp = new Date().toISOString();
    let prevHash = head.hash;
    const events: EventData[] = req.events.map((e, j) => {
      const revision = head.revision + 1 + j;
      const hash = chainHash(prevHash, eventBody({ id: ids[j], stream: req.stream, revision, type: e.type, timestamp, data: e.data, metadata: e.metadata }));
      const metadata = encodeMetadata({ v: 1, id: ids[j], timestamp, metadata: e.metadata, prevHash, hash });
      prevHash = hash;
      return { id: kurrentIds[j], contentType: 'application/json', type: e.type, data: e.data as Record<string, unknown>, metadata };
    });

    const claims = await claimEventIds(
      client,
      kurrentIds.map((kurrentId, j) => ({ kurrentId, stream: req.stream, revision: head.revision + 1 + j })),
    );
    if (claims.duplicate >= 0) throw new DuplicateEventError(ids[claims.duplicate]);

    let result;
    try {
      result = await client.appendToStream(req.stream, events, { streamState: head.revision === -1 ? NO_STREAM : BigInt(head.revision) });
    } catch (err) {
      heads.delete(req.stream);
      throw mapAppendError(err, req.stream, head.revision);
    }
    // From here on the events are stored: nothing below may fail the call, or a caller would
    // decide again and append a second time.
    const revision = Number(result.nextExpectedRevision);
    // KurrentDB reports a write of ids already at those revisions as a success without writing
    // (its idempotent-write rule); then the stored hashes are not the ones computed here. That
    // can only follow a claim takeover, so the head is cached only when the append was uncontended.
    if (!claims.tookOver && revision === head.revision + events.length) remember(req.stream, { revision, hash: prevHash });
    else heads.delete(req.stream);
    let lastPosition = 0;
    try {
      lastPosition = positionNumber(result.position);
    } catch (err) {
      warn('append result carried no $all position', err);
    }
    const firstPosition =
      req.events.length === 1
        ? lastPosition
        : await positionOf(req.stream, head.revision + 1).catch((err) => {
            warn('could not read the position of the first appended event', err);
            return lastPosition;
          });
    if (req.snapshot !== undefined) await writeSnapshot(req.stream, revision, req.snapshot);
    if (lastPosition > 0) appended.emit('position', lastPosition);
    return { stream: req.stream, revision, firstPosition, lastPosition, timestamp };
  }

  /** The commit position of one event; KurrentDB's append result only gives the last one's. */
  async function positionOf(stream: string, revision: number): Promise<number> {
    for await (const r of client.readStream(stream, { fromRevision: BigInt(revision), maxCount: 1 })) {
      if (r.event) return positionNumber(r.event.position);
    }
    throw new Error(`stream ${stream} has no revision ${revision}`);
  }

  /**
   * Snapshots live in a companion stream holding one event (`$maxCount` 1). Written after the
   * append, not with it: a snapshot is a cache of the decider state at its revision, so a lost
   * or late one only means folding a longer tail, never a wrong state.
   */
  async function writeSnapshot(stream: string, revision: number, state: unknown): Promise<void> {
    const name = snapshotStream(stream);
    try {
      const r = await client.appendToStream(
        name,
        [
          {
            id: randomUUID(),
            contentType: 'application/json',
            type: SNAPSHOT_EVENT_TYPE,
            data: { revision, state: JSON.parse(JSON.stringify(state) ?? 'null') },
            metadata: undefined,
          },
        ],
        { streamState: ANY },
      );
      if (r.nextExpectedRevision === 0n) await client.setStreamMetadata(name, { maxCount: 1 });
    } catch (err) {
      warn(`snapshot of ${stream} at revision ${revision} not written`, err);
    }
  }

  async function appendMany(requests: AppendRequest[]): Promise<Array<AppendResult | Error>> {
    const results: Array<AppendResult | Error> = new Array(requests.length);
    const run = async (i: number) => {
      try {
        results[i] = await appendOne(requests[i]);
      } catch (err) {
        results[i] = err instanceof Error ? err : new Error(String(err));
      }
    };
    // One lane per stream keeps a stream's requests in order. A batch that repeats an event id
    // runs one request at a time, so the later copy meets the earlier one's claim and event.
    const ids = requests.flatMap((r) =>
      r.events
        .map((e) => e.id)
        .filter((id): id is string => !!id)
        .map(kurrentEventId),
    );
    if (new Set(ids).size !== ids.length) {
      for (let i = 0; i < requests.length; i++) await run(i);
      return results;
    }
    const lanes = new Map<string, number[]>();
    requests.forEach((r, i) => {
      const lane = lanes.get(String(r.stream));
      if (lane) lane.push(i);
      else lanes.set(String(r.stream), [i]);
    });
    await eachAtMost([...lanes.values()], options.concurrency ?? 32, async (lane) => {
      for (const i of lane) await run(i);
    });
    return results;
  }

  async function readStream(stream: string, fromRevision = 0): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    try {
      for await (const r of client.readStream(stream, { fromRevision: BigInt(Math.max(0, fromRevision)) })) {
        const stored = r.event ? toStoredEvent(r.event, positionNumber(r.event.position)) : null;
        if (stored) out.push(stored);
      }
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    if (out.length > 0) {
      const last = out[out.length - 1];
      remember(stream, { revision: last.revision, hash: last.hash });
    }
    return out;
  }

  async function readAll(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    let from = afterPosition;
    // Pages until `limit` events of ours are found or $all ends: a short page from the server is
    // its end (filtered reads keep searching until maxCount), but events skipped here are not.
    while (out.length < limit) {
      const want = limit - out.length + 1;
      let seen = 0;
      for await (const r of client.readAll({ fromPosition: readFrom(from), maxCount: want, filter: userEventsFilter() })) {
        seen++;
        if (!r.event) continue;
        const position = positionNumber(r.event.position);
        if (position <= from) continue;
        from = position;
        const stored = toStoredEvent(r.event, position);
        if (stored) out.push(stored);
        if (out.length === limit) break;
      }
      if (seen < want) break;
    }
    return out;
  }

  /** The last event of ours in $all, read backwards in small pages (normally the first one). */
  async function headPosition(): Promise<number> {
    const page = 100;
    let from: ReadPosition = END;
    for (;;) {
      let seen = 0;
      for await (const r of client.readAll({ direction: BACKWARDS, fromPosition: from, maxCount: page, filter: userEventsFilter() })) {
        seen++;
        if (!r.event) continue;
        if (toStoredEvent(r.event, 0)) return positionNumber(r.event.position);
        // Backwards reads from an event's position return the events before it.
        from = r.event.position;
      }
      if (seen < page) return 0;
    }
  }

  /** One live $all subscription per store, used only to wake subscribers; restarted if it drops. */
  function startFeed(): void {
    if (feed || closed) return;
    const sub = client.subscribeToAll({ fromPosition: END, filter: userEventsFilter() });
    feed = sub;
    const restart = () => {
      if (feed !== sub) return;
      feed = null;
      if (!closed) setTimeout(startFeed, 1000).unref();
    };
    sub.on('data', (r) => {
      if (r.event && isUserEvent(r.event)) appended.emit('position', r.event.position ? Number(r.event.position.commit) : 0);
    });
    sub.on('error', restart);
    sub.on('end', restart);
  }

  return {
    kind: 'kurrentdb',
    async append(request) {
      const [result] = await appendMany([request]);
      if (result instanceof Error) throw result;
      return result;
    },
    appendMany,
    readStream,
    readAll,
    async readSnapshot(stream): Promise<Snapshot | null> {
      try {
        for await (const r of client.readStream(snapshotStream(stream), { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
          const data = r.event?.data as { revision?: unknown; state?: unknown } | undefined;
          if (r.event?.type === SNAPSHOT_EVENT_TYPE && typeof data?.revision === 'number') return { revision: data.revision, state: data.state };
        }
      } catch (err) {
        if (!isStreamNotFound(err)) throw err;
      }
      return null;
    },
    headPosition,
    // One log writer: $all order is commit order, so the head is readable at once.
    readableHead: headPosition,
    subscribe(afterPosition, handler, subscribeOptions): Subscription {
      startFeed();
      return pollingSubscription({
        afterPosition,
        handler,
        readAll,
        head: headPosition,
        notifier: appended,
        pollIntervalMs: options.pollIntervalMs ?? 1000,
        lingerMs: subscribeOptions?.lingerMs,
      });
    },
    async close() {
      closed = true;
      const f = feed;
      feed = null;
      appended.removeAllListeners();
      await f?.unsubscribe().catch(() => undefined);
      await client.dispose();
    },
  };
}
