// The KurrentDB adapter's own logic, without a KurrentDB server (none can run on these machines):
// the pure mappings, and the whole event store contract plus the projection runner over an
// in-memory TEST DOUBLE of the few client calls the adapter makes.
//
// The double (FakeKurrentDb below) follows the server behaviour the adapter relies on, as read
// from KurrentDB's and the client's sources: per-stream optimistic concurrency by streamState with
// the client's WrongExpectedVersionError, the idempotent-write rule for a repeated event id at the
// same revision, $all commit positions that are byte offsets (large, increasing, never contiguous),
// reads from a position that include the event at it, system events and `$$` metadata streams
// interleaved in $all, `$maxCount`, event-type filters, and StreamNotFoundError. It is a test
// double, not a proof: only a run of test/eventstore-contract.test.ts with KURRENTDB_URL set
// exercises a real server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import {
  END,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  UnavailableError,
  type AllStreamResolvedEvent,
  type AppendResult,
  type AppendStreamState,
  type EventData,
  type Filter,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type ResolvedEvent,
  type StreamMetadata,
  type SubscribeToAllOptions,
} from '@kurrent/kurrentdb-client';
import type { KurrentClient, LiveFeed } from '../src/eventstore/kurrentdb-client.ts';
import { redactConnectionString } from '../src/eventstore/kurrentdb-client.ts';
import { createKurrentDbEventStore } from '../src/eventstore/kurrentdb.ts';
import {
  actualRevision,
  claimStream,
  encodeMetadata,
  isUserEvent,
  kurrentEventId,
  mapAppendError,
  positionNumber,
  readFrom,
  snapshotStream,
  toStoredEvent,
} from '../src/eventstore/kurrentdb-mapping.ts';
import { openSelectedEventStore } from '../src/eventstore/kurrentdb-select.ts';
import { chainHash, eventBody, GENESIS_HASH } from '../src/eventstore/canonical.ts';
import { DuplicateEventError, InvalidStreamNameError, WrongExpectedRevisionError } from '../src/eventstore/errors.ts';
import type { EventStore, NewEvent, StoredEvent } from '../src/eventstore/port.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { settingsFromEnv } from '../src/config.ts';
import { openLedger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import * as checkpoint from '../projections/runner/checkpoint.ts';
import { defineEventStoreContract } from './support/eventstore-contract.ts';
import { testDatabases } from './support/db.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them
import { definePlan, openAccount, subscribe } from '../src/accounts/index.ts';

// ---- the test double --------------------------------------------------------------------------

interface Rec {
  streamId: string;
  id: string;
  revision: bigint;
  type: string;
  data: unknown;
  metadata: unknown;
  created: Date;
  position: Position;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class FakeFeed extends EventEmitter implements LiveFeed {
  constructor(
    private readonly db: FakeKurrentDb,
    readonly filter: Filter | undefined,
  ) {
    super();
  }
  async unsubscribe() {
    this.db.feeds.delete(this);
    this.emit('end');
  }
}

/** An in-memory stand-in for the KurrentDB server behind the client (see the file header). */
class FakeKurrentDb implements KurrentClient {
  readonly log: Rec[] = [];
  readonly streams = new Map<string, Rec[]>();
  readonly maxCounts = new Map<string, number>();
  readonly feeds = new Set<FakeFeed>();
  /** Log offset of the next record; starts past 2^32 so nothing fits in 32 bits. */
  private offset = 2n ** 32n + 1_000n;
  private appends = 0;
  calls = { append: 0, readStream: 0, readAll: 0 };
  /** Fails the next appends whose stream matches, once each (injected faults). */
  failAppends: Array<{ match: (stream: string) => boolean; error: Error }> = [];
  /** Holds appends until the test lets them through (to order racing appends). */
  gate: ((stream: string) => Promise<void>) | null = null;

  async appendToStream(streamName: string, events: EventData[], { streamState }: { streamState: AppendStreamState }): Promise<AppendResult> {
    this.calls.append++;
    await new Promise((r) => setImmediate(r)); // a network turn: concurrent appends interleave
    await this.gate?.(streamName);
    const fault = this.failAppends.findIndex((f) => f.match(streamName));
    if (fault >= 0) throw this.failAppends.splice(fault, 1)[0].error;
    for (const e of events) if (!UUID.test(e.id)) throw new Error(`event id ${e.id} is not a UUID`);
    const stream = this.streams.get(streamName) ?? [];
    const current = BigInt(stream.length - 1);
    const conflict = () => new WrongExpectedVersionError(undefined, { streamName, expected: streamState, current: current < 0n ? 'no_stream' : current });
    // KurrentDB's idempotent write: the same ids already at the expected place succeed unwritten.
    const sameIdsAfter = (rev: bigint) => events.every((e, i) => stream[Number(rev) + 1 + i]?.id === e.id.toLowerCase());
    let idempotentAfter: bigint | null = null;
    if (streamState === 'no_stream') {
      if (current >= 0n) {
        if (sameIdsAfter(-1n)) idempotentAfter = -1n;
        else throw conflict();
      }
    } else if (streamState === 'stream_exists') {
      if (current < 0n) throw conflict();
    } else if (typeof streamState === 'bigint') {
      if (streamState !== current) {
        if (streamState < current && sameIdsAfter(streamState)) idempotentAfter = streamState;
        else throw conflict();
      }
    } else {
      const at = stream.findIndex((r) => r.id === events[0].id.toLowerCase());
      if (at >= 0 && sameIdsAfter(BigInt(at - 1))) idempotentAfter = BigInt(at - 1);
    }
    if (idempotentAfter !== null) {
      const last = stream[Number(idempotentAfter) + events.length];
      return { success: true, nextExpectedRevision: last.revision, position: { ...last.position } };
    }
    let last: Rec | null = null;
    for (const e of events) {
      last = this.write(streamName, e.id.toLowerCase(), e.type, e.data, e.metadata);
    }
    // The server writes its own events into $all now and then (stats, metadata): readers must skip them.
    if (++this.appends % 7 === 0) this.write('$stats-127.0.0.1:2113', randomUUID(), '$statsCollected', { cpu: 1 }, undefined);
    return { success: true, nextExpectedRevision: last!.revision, position: { ...last!.position } };
  }

  private write(streamName: string, id: string, type: string, data: unknown, metadata: unknown): Rec {
    const stream = this.streams.get(streamName) ?? [];
    const json = JSON.stringify(data);
    const rec: Rec = {
      streamId: streamName,
      id,
      revision: BigInt(stream.length),
      type,
      data: JSON.parse(json),
      metadata: metadata === undefined ? undefined : JSON.parse(JSON.stringify(metadata)),
      created: new Date(),
      position: { commit: this.offset, prepare: this.offset },
    };
    this.offset += BigInt(120 + json.length + (metadata ? JSON.stringify(metadata).length : 0)); // a record's bytes
    stream.push(rec);
    this.streams.set(streamName, stream);
    this.log.push(rec);
    for (const feed of this.feeds) if (matches(feed.filter, rec)) setImmediate(() => feed.emit('data', { event: recorded(rec) }));
    return rec;
  }

  readStream(
    streamName: string,
    { fromRevision = START, direction = 'forwards', maxCount = Number.MAX_SAFE_INTEGER }: ReadStreamOptions = {},
  ): AsyncIterableIterator<ResolvedEvent> {
    this.calls.readStream++;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- a generator function has no lexical this
    const self = this;
    return (async function* () {
      await new Promise((r) => setImmediate(r));
      const all = self.streams.get(streamName);
      if (!all || all.length === 0) throw new StreamNotFoundError(undefined, streamName);
      const keep = self.maxCounts.get(streamName);
      const visible = keep === undefined ? all : all.slice(Math.max(0, all.length - keep));
      let list: Rec[];
      if (direction === 'backwards') {
        const from = fromRevision === END || fromRevision === START ? Infinity : Number(fromRevision);
        list = visible.filter((r) => Number(r.revision) <= from).reverse();
      } else {
        const from = fromRevision === START ? 0 : fromRevision === END ? Infinity : Number(fromRevision);
        list = visible.filter((r) => Number(r.revision) >= from);
      }
      for (const r of list.slice(0, Number(maxCount))) yield { event: recorded(r) } as ResolvedEvent;
    })();
  }

  readAll({
    fromPosition = START,
    direction = 'forwards',
    maxCount = Number.MAX_SAFE_INTEGER,
    filter,
  }: ReadAllOptions = {}): AsyncIterableIterator<AllStreamResolvedEvent> {
    this.calls.readAll++;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- a generator function has no lexical this
    const self = this;
    return (async function* () {
      await new Promise((r) => setImmediate(r));
      let list: Rec[];
      if (direction === 'backwards') {
        // Backwards positions are post-positions: from an event's position, the events before it.
        list = self.log.filter((r) => fromPosition === END || (fromPosition !== START && r.position.commit < fromPosition.commit)).reverse();
      } else {
        // Forwards reads include the event at the position they start from.
        list = self.log.filter((r) => fromPosition === START || (fromPosition !== END && r.position.commit >= fromPosition.commit));
      }
      let n = 0;
      for (const r of list) {
        if (n >= Number(maxCount)) return;
        if (!matches(filter, r)) continue;
        n++;
        yield { event: recorded(r) } as AllStreamResolvedEvent;
      }
    })();
  }

  subscribeToAll({ fromPosition = START, filter }: SubscribeToAllOptions = {}): LiveFeed {
    if (fromPosition !== END) throw new Error('the fake only has live subscriptions (from END)');
    const feed = new FakeFeed(this, filter);
    this.feeds.add(feed);
    return feed;
  }

  async setStreamMetadata(streamName: string, metadata: StreamMetadata): Promise<unknown> {
    if (typeof metadata.maxCount === 'number') this.maxCounts.set(streamName, metadata.maxCount);
    return this.write(`$$${streamName}`, randomUUID(), '$metadata', { $maxCount: metadata.maxCount }, undefined);
  }

  async dispose() {
    for (const f of [...this.feeds]) await f.unsubscribe();
  }
}

function matches(filter: Filter | undefined, r: Rec): boolean {
  if (!filter) return true;
  const subject = filter.filterOn === 'eventType' ? r.type : r.streamId;
  if ('regex' in filter && filter.regex) return new RegExp(filter.regex).test(subject);
  if ('prefixes' in filter && filter.prefixes) return filter.prefixes.some((p) => subject.startsWith(p));
  return true;
}

function recorded(r: Rec): RecordedEvent {
  return {
    streamId: r.streamId,
    id: r.id,
    revision: r.revision,
    type: r.type,
    created: r.created,
    isJson: true,
    data: JSON.parse(JSON.stringify(r.data)),
    metadata: r.metadata === undefined ? undefined : JSON.parse(JSON.stringify(r.metadata)),
    position: { ...r.position },
  } as RecordedEvent;
}

const md = { correlationId: 'corr-1', causationId: null, actor: 'test' };
const opened = (n = 1, id?: string): NewEvent => ({ id, type: 'AccountOpened', data: { accountId: `a${n}`, name: `n${n}` }, metadata: md });
const newStore = (db = new FakeKurrentDb(), pollIntervalMs = 200) => ({
  db,
  store: createKurrentDbEventStore(db, { validate: validateEvent, pollIntervalMs }),
});

// ---- pure mappings ----------------------------------------------------------------------------

const pure = suite('kurrentdb mapping');

pure('event ids: UUIDs pass through in lower case, anything else maps to a stable name-based UUID', () => {
  const v4 = randomUUID();
  assert.is(kurrentEventId(v4), v4);
  assert.is(kurrentEventId(v4.toUpperCase()), v4);
  const a = kurrentEventId('charge:acme:42');
  assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.is(kurrentEventId('charge:acme:42'), a, 'deterministic');
  assert.is.not(kurrentEventId('charge:acme:43'), a);
  assert.is.not(kurrentEventId('00000000-0000-0000-0000-000000000000'), '00000000-0000-0000-0000-000000000000', 'the nil UUID is not sent');
});

pure('positions: commit positions convert exactly and read "after" from the position itself', () => {
  assert.is(positionNumber({ commit: 2n ** 40n + 7n, prepare: 2n ** 40n + 7n }), 2 ** 40 + 7);
  assert.is(positionNumber({ commit: BigInt(Number.MAX_SAFE_INTEGER), prepare: 0n }), Number.MAX_SAFE_INTEGER);
  assert.throws(() => positionNumber({ commit: BigInt(Number.MAX_SAFE_INTEGER) + 1n, prepare: 0n }), /exact range/);
  assert.throws(() => positionNumber({ commit: 18446744073709551615n, prepare: 18446744073709551615n }), /22\.6/);
  assert.throws(() => positionNumber(undefined), /without its \$all position/);
  assert.is(readFrom(0), START);
  assert.equal(readFrom(4_294_968_296), { commit: 4_294_968_296n, prepare: 4_294_968_296n });
});

pure("errors: the client's WrongExpectedVersionError becomes ours with the actual revision", () => {
  const conflict = mapAppendError(new WrongExpectedVersionError(undefined, { streamName: 's', expected: 3n, current: 5n }), 's', 3);
  assert.instance(conflict, WrongExpectedRevisionError);
  assert.is((conflict as WrongExpectedRevisionError).actual, 5);
  assert.is((conflict as WrongExpectedRevisionError).expected, 3);
  const missing = mapAppendError(new WrongExpectedVersionError(undefined, { streamName: 's', expected: 0n, current: 'no_stream' }), 's', 0);
  assert.is((missing as WrongExpectedRevisionError).actual, -1);
  const down = new UnavailableError();
  assert.is(mapAppendError(down, 's', 0), down, 'other failures pass through unchanged');
  assert.is(actualRevision(-5n), -1, 'a deleted stream counts as absent');
});

pure('system events, adapter streams and foreign events are not ours', () => {
  assert.ok(isUserEvent({ type: 'AccountOpened', streamId: 'account-a' }));
  assert.not.ok(isUserEvent({ type: '$statsCollected', streamId: '$stats-x' }));
  assert.not.ok(isUserEvent({ type: '$metadata', streamId: '$$account-a' }));
  assert.not.ok(isUserEvent({ type: 'Anything', streamId: snapshotStream('account-a') }));
  assert.not.ok(isUserEvent({ type: 'Anything', streamId: claimStream(randomUUID()) }));
  const foreign = {
    streamId: 'orders-1',
    id: randomUUID(),
    revision: 0n,
    type: 'OrderPlaced',
    created: new Date(),
    isJson: true,
    data: { a: 1 },
    metadata: { by: 'another app' },
  } as RecordedEvent;
  assert.is(toStoredEvent(foreign, 10), null);
});

pure('the metadata envelope gives back our id, metadata, timestamp and hashes', () => {
  const id = 'not-a-uuid:1';
  const metadata = { correlationId: 'c', causationId: 'x', actor: 'admin', extra: [1, 2] };
  const envelope = { v: 1 as const, id, timestamp: '2025-01-02T03:04:05.678Z', metadata, prevHash: GENESIS_HASH, hash: 'h' };
  const onWire = JSON.parse(JSON.stringify(encodeMetadata(envelope)));
  assert.is(onWire.$correlationId, 'c');
  assert.is(onWire.$causationId, 'x');
  const rec = {
    streamId: 'account-a',
    id: kurrentEventId(id),
    revision: 3n,
    type: 'AccountOpened',
    created: new Date(),
    isJson: true,
    data: { accountId: 'a', name: 'n' },
    metadata: onWire,
  } as RecordedEvent;
  assert.equal(toStoredEvent(rec, 99), {
    id,
    type: 'AccountOpened',
    stream: 'account-a',
    revision: 3,
    position: 99,
    timestamp: envelope.timestamp,
    data: { accountId: 'a', name: 'n' },
    metadata,
    prevHash: GENESIS_HASH,
    hash: 'h',
  });
});

pure('connection strings are redacted before they are shown', () => {
  assert.is(redactConnectionString('kurrentdb://admin:changeit@db:2113?tls=false'), 'kurrentdb://admin:***@db:2113?tls=false');
  assert.is(redactConnectionString('kurrentdb://db:2113?tls=false'), 'kurrentdb://db:2113?tls=false');
});

pure.run();

// ---- the contract, over the test double -------------------------------------------------------

defineEventStoreContract('kurrentdb adapter over the in-memory client double', async () => {
  const { store } = newStore();
  return { store, close: () => store.close() };
}).run();

// ---- adapter behaviour the contract does not pin down -----------------------------------------

const adapter = suite<{ db: FakeKurrentDb; store: EventStore }>('kurrentdb adapter over the client double', {} as never);
adapter.before.each((ctx) => {
  Object.assign(ctx, newStore());
});
adapter.after.each(async (ctx) => {
  await ctx.store.close();
});

adapter('hash chain recomputes from what is read back, and positions are commit positions', async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  const r = await store.append({ stream, expectedRevision: 'no_stream', events: [opened(1), opened(2), opened(3)] });
  await store.append({ stream, expectedRevision: 2, events: [opened(4)] });
  const read = await store.readStream(stream);
  let prev = GENESIS_HASH;
  for (const e of read) {
    assert.is(e.prevHash, prev);
    assert.is(chainHash(e.prevHash, eventBody(e)), e.hash, `revision ${e.revision} hash`);
    prev = e.hash;
  }
  const onServer = db.streams.get(stream)!;
  assert.equal(
    read.map((e) => e.position),
    onServer.map((x) => Number(x.position.commit)),
  );
  assert.ok(read[0].position > 2 ** 32, 'large');
  assert.ok(read[1].position - read[0].position > 1, 'not contiguous');
  assert.is(r.firstPosition, read[0].position);
  assert.is(r.lastPosition, read[2].position);
  assert.equal(await store.readAll(read[0].position, 10).then((all) => all.map((e) => e.revision)), [1, 2, 3], 'readAll starts after the position');
});

adapter('non-UUID ids are mapped for KurrentDB and come back as given; repeating one is a duplicate', async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  const id = `adjustment:${randomUUID()}`;
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened(1, id)] });
  assert.is(db.streams.get(stream)![0].id, kurrentEventId(id));
  assert.is((await store.readStream(stream))[0].id, id);
  const [again] = await store.appendMany([{ stream, expectedRevision: 0, events: [opened(2, id)] }]);
  assert.instance(again, DuplicateEventError);
  assert.is((again as DuplicateEventError).eventId, id);
  assert.is((await store.readStream(stream)).length, 1, 'KurrentDB alone would have stored it again');
});

adapter('a claim left by a failed append is taken over; the retry with the same id succeeds once', async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened(1)] });
  const id = randomUUID();
  // Stale revision: the claim is written, then the append conflicts.
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened(2, id)] }).then(
    () => assert.unreachable(),
    (err) => assert.instance(err, WrongExpectedRevisionError),
  );
  assert.ok(db.streams.get(claimStream(id)), 'claim left behind');
  // A crash between claim and append looks the same: inject a failure of the append itself.
  db.failAppends.push({ match: (s) => s === stream, error: new UnavailableError() });
  await store.append({ stream, expectedRevision: 0, events: [opened(2, id)] }).then(
    () => assert.unreachable(),
    (err) => assert.instance(err, UnavailableError),
  );
  const r = await store.append({ stream, expectedRevision: 0, events: [opened(2, id)] });
  assert.is(r.revision, 1);
  const [dup] = await store.appendMany([{ stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [opened(3, id)] }]);
  assert.instance(dup, DuplicateEventError);
  assert.equal((await store.readStream(stream)).map((e) => e.id).slice(1), [id]);
});

adapter('two processes racing one id into one stream: one event is stored and the chain stays whole', async ({ db }) => {
  const a = createKurrentDbEventStore(db, { validate: validateEvent });
  const b = createKurrentDbEventStore(db, { validate: validateEvent });
  const stream = `account-${randomUUID()}`;
  await a.append({ stream, expectedRevision: 'no_stream', events: [opened(0)] });
  await b.readStream(stream);
  const held: Array<() => void> = [];
  db.gate = (s) => (s === stream ? new Promise<void>((r) => held.push(r)) : Promise.resolve());
  const id = randomUUID();
  const first = a.append({ stream, expectedRevision: 0, events: [opened(1, id)] });
  while (held.length < 1) await new Promise((r) => setTimeout(r, 5));
  // b finds a's claim, whose event is not stored yet, and takes it over.
  const second = b.append({ stream, expectedRevision: 0, events: [opened(1, id)] });
  while (held.length < 2) await new Promise((r) => setTimeout(r, 5));
  db.gate = null;
  held[0]();
  assert.is((await first).revision, 1);
  held[1]();
  // KurrentDB's idempotent-write rule answers b with success: the same id is already at revision 1.
  assert.is((await second).revision, 1);
  await b.append({ stream, expectedRevision: 1, events: [opened(2)] });
  const read = await a.readStream(stream);
  assert.equal(
    read.map((e) => e.revision),
    [0, 1, 2],
    'the id is stored once',
  );
  for (let i = 1; i < read.length; i++) assert.is(read[i].prevHash, read[i - 1].hash, `chain at ${i}`);
  for (const e of read) assert.is(chainHash(e.prevHash, eventBody(e)), e.hash);
});

adapter('a repeated id within one group commit: the later request is the duplicate', async ({ store }) => {
  const id = randomUUID();
  const results = await store.appendMany([
    { stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [opened(1, id)] },
    { stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [opened(2, id)] },
  ]);
  assert.is((results[0] as { revision: number }).revision, 0);
  assert.instance(results[1], DuplicateEventError);
});

adapter('snapshots live in a one-event companion stream and never show in $all', async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  const head = await store.headPosition();
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened()], snapshot: { n: 1 } });
  await store.append({ stream, expectedRevision: 0, events: [opened()], snapshot: { n: 2 } });
  assert.equal(await store.readSnapshot(stream), { revision: 1, state: { n: 2 } });
  assert.is(db.maxCounts.get(snapshotStream(stream)), 1);
  const all = await store.readAll(0, 1000);
  assert.equal(
    all.map((e) => e.stream),
    [stream, stream],
    'only our two events',
  );
  assert.ok(
    db.log.some((r) => r.type.startsWith('$')),
    'the double did put system events in $all',
  );
  assert.is(await store.headPosition(), all[1].position);
  assert.ok(all[1].position > head);
});

adapter("another application's events in $all are skipped: pages still fill, the head is our last event", async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened(1)] });
  const foreign = async () => {
    for (let i = 0; i < 130; i++)
      await db.appendToStream(
        `orders-${i}`,
        [{ id: randomUUID(), contentType: 'application/json', type: 'OrderPlaced', data: { i }, metadata: { by: 'another app' } }],
        { streamState: 'any' },
      );
  };
  await foreign();
  await store.append({ stream, expectedRevision: 0, events: [opened(2)] });
  const ours = await store.readAll(0, 2);
  assert.is(ours.length, 2);
  await foreign();
  assert.is(await store.headPosition(), ours[1].position, 'found behind more than one backwards page of foreign events');
  assert.equal(
    (await store.readAll(ours[0].position, 5)).map((e) => e.revision),
    [1],
  );
});

adapter('a snapshot that cannot be written does not fail the append it follows', async ({ db }) => {
  const warnings: string[] = [];
  const store = createKurrentDbEventStore(db, { validate: validateEvent, onWarning: (m) => warnings.push(m) });
  const stream = `account-${randomUUID()}`;
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened()], snapshot: { n: 1 } });
  db.failAppends.push({ match: (s) => s === snapshotStream(stream), error: new UnavailableError() });
  const r = await store.append({ stream, expectedRevision: 0, events: [opened()], snapshot: { n: 2 } });
  assert.is(r.revision, 1);
  assert.equal(await store.readSnapshot(stream), { revision: 0, state: { n: 1 } }, 'the older snapshot is still right for its revision');
  assert.is(warnings.length, 1);
});

adapter('the adapter refuses its own stream prefix and $ event types, before writing anything', async ({ db, store }) => {
  const before = db.calls.append;
  await store.append({ stream: snapshotStream('account-a'), expectedRevision: 'no_stream', events: [opened()] }).then(
    () => assert.unreachable(),
    (err) => assert.instance(err, InvalidStreamNameError),
  );
  const noValidation = createKurrentDbEventStore(db);
  await noValidation.append({ stream: 'account-x', expectedRevision: 'no_stream', events: [{ type: '$metadata', data: {}, metadata: md }] }).then(
    () => assert.unreachable(),
    (err) => assert.match((err as Error).message, /reserved/),
  );
  assert.is(db.calls.append, before);
});

adapter("the live $all subscription wakes a subscriber for another process's append, without waiting for the poll", async ({ db }) => {
  // Two stores on one server stand for two processes; the reader polls only once a minute.
  const reader = createKurrentDbEventStore(db, { pollIntervalMs: 60_000 });
  const writer = createKurrentDbEventStore(db, { validate: validateEvent });
  const seen: StoredEvent[] = [];
  const sub = reader.subscribe(await reader.headPosition(), async (events) => {
    seen.push(...events);
  });
  await sub.caughtUp();
  await writer.append({ stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [opened()] });
  const deadline = Date.now() + 10_000;
  while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.is(seen.length, 1);
  await sub.close();
  await reader.close();
});

adapter('a stale expected revision is refused from the head read, before any claim is written', async ({ db, store }) => {
  const stream = `account-${randomUUID()}`;
  await store.append({ stream, expectedRevision: 'no_stream', events: [opened(), opened()] });
  const other = createKurrentDbEventStore(db, { validate: validateEvent }); // no cached head
  const before = db.calls.append;
  const err = await other.append({ stream, expectedRevision: 0, events: [opened()] }).catch((e) => e);
  assert.instance(err, WrongExpectedRevisionError);
  assert.is(err.actual, 1);
  assert.is(db.calls.append, before);
});

adapter.run();

// ---- selection (EVENT_STORE) ------------------------------------------------------------------

const selection = suite('EVENT_STORE selection');

selection('postgres is the default; an unknown store is a startup error', async () => {
  assert.is(settingsFromEnv({}).eventStore, 'postgres');
  assert.is(settingsFromEnv({ EVENT_STORE: 'kurrentdb', KURRENTDB_URL: 'kurrentdb://h:2113' }).kurrentDbUrl, 'kurrentdb://h:2113');
  assert.throws(() => settingsFromEnv({ EVENT_STORE: 'mongo' }), /EVENT_STORE must be postgres or kurrentdb/);
  assert.is(await openSelectedEventStore(settingsFromEnv({}), validateEvent), undefined);
});

selection('kurrentdb needs KURRENTDB_URL and DATABASE_URL, and a reachable server', async () => {
  const fake = () => new FakeKurrentDb();
  await openSelectedEventStore({ eventStore: 'kurrentdb', databaseUrl: 'postgres://x' }, validateEvent, fake).then(
    () => assert.unreachable(),
    (e) => assert.match(e.message, /needs KURRENTDB_URL/),
  );
  await openSelectedEventStore({ eventStore: 'kurrentdb', kurrentDbUrl: 'kurrentdb://h:2113' }, validateEvent, fake).then(
    () => assert.unreachable(),
    (e) => assert.match(e.message, /needs DATABASE_URL/),
  );
  const store = await openSelectedEventStore({ eventStore: 'kurrentdb', kurrentDbUrl: 'kurrentdb://h:2113', databaseUrl: 'postgres://x' }, validateEvent, fake);
  assert.is(store?.kind, 'kurrentdb');
  await store?.close();
  const unreachable = () => {
    const db = new FakeKurrentDb();
    db.readAll = () => {
      throw new UnavailableError();
    };
    return db;
  };
  await openSelectedEventStore(
    { eventStore: 'kurrentdb', kurrentDbUrl: 'kurrentdb://admin:secret@h:2113', databaseUrl: 'postgres://x' },
    validateEvent,
    unreachable,
  ).then(
    () => assert.unreachable(),
    (e) => {
      assert.match(e.message, /cannot read \$all from KurrentDB/);
      assert.not.match(e.message, /secret/);
    },
  );
});

selection.run();

// ---- the projection runner on commit positions ------------------------------------------------

for (const target of testDatabases()) {
  const runner = suite(`projection runner on KurrentDB commit positions (double) + ${target.label}`);
  runner('the checkpoint is the last commit position, stored with the rows; a restart resumes there', async () => {
    const t = await target.open();
    const db = new FakeKurrentDb();
    try {
      const first = await openLedger({
        db: t.db,
        schema: t.schema,
        readSide: readSide({ db: t.db, eventSchema: t.schema, projectHere: true }),
        store: createKurrentDbEventStore(db, { validate: validateEvent, pollIntervalMs: 200 }),
      });
      await definePlan(first, { planId: 'pro', name: 'Pro', quota: 10_000, validityDays: 30, requestsPerMinute: 60, models: ['*'] }, 'admin:test');
      await openAccount(first, { accountId: 'acme', name: 'Acme' }, 'admin:test');
      await subscribe(first, 'acme', 'pro', 'admin:test');
      await first.caughtUp();
      const head = await first.events.headPosition();
      assert.ok(head > 2 ** 32);
      assert.is(await checkpoint.read(t.db, first.rmSchema), head);
      await first.close();

      // Events appended while no runner is up (as by another process) are applied once on restart.
      const offline = createKurrentDbEventStore(db, { validate: validateEvent });
      await offline.append({
        stream: 'account-zeta',
        expectedRevision: 'no_stream',
        events: [{ type: 'AccountOpened', data: { accountId: 'zeta', name: 'Zeta' }, metadata: md }],
      });
      const second = await openLedger({
        db: t.db,
        schema: t.schema,
        readSide: readSide({ db: t.db, eventSchema: t.schema, projectHere: true }),
        store: createKurrentDbEventStore(db, { validate: validateEvent, pollIntervalMs: 200 }),
      });
      await second.caughtUp();
      assert.is(await checkpoint.read(t.db, second.rmSchema), await second.events.headPosition());
      const rows = await t.db.query<{ account_id: string; quota_total: number }>(
        `SELECT account_id, quota_total FROM "${second.rmSchema}".accounts ORDER BY account_id`,
      );
      assert.equal(
        rows.map((r) => ({ ...r, quota_total: Number(r.quota_total) })),
        [
          { account_id: 'acme', quota_total: 10_000 },
          { account_id: 'zeta', quota_total: 0 },
        ],
      );
      await second.close();
    } finally {
      await t.cleanup();
    }
  });
  runner.run();
}
