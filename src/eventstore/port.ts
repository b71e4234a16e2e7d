// The event store port. Adapters: PostgreSQL (also embedded PGlite) and KurrentDB.

export interface EventMetadata {
  correlationId: string;
  causationId: string | null;
  actor: string;
  [extra: string]: unknown;
}

export interface NewEvent<T extends string = string, D = Record<string, unknown>> {
  /** Deterministic ids make an append idempotent (e.g. one adjustment per charge and correction). */
  id?: string;
  type: T;
  data: D;
  metadata: EventMetadata;
}

export interface StoredEvent<D = Record<string, unknown>> {
  id: string;
  type: string;
  stream: string;
  revision: number;
  /** Global position: strictly increasing in commit order across all streams. */
  position: number;
  timestamp: string;
  data: D;
  metadata: EventMetadata;
  prevHash: string;
  hash: string;
}

/** What read models are built from: a stored event without its stream bookkeeping and hash chain. */
export type ProjectedEvent<D = Record<string, unknown>> = Pick<StoredEvent<D>, 'id' | 'type' | 'position' | 'timestamp' | 'data'>;

/** A stream's revision before the append: -1 (or 'no_stream') when it must not exist yet. */
export type ExpectedRevision = number | 'no_stream' | 'any';

export interface AppendRequest {
  stream: string;
  events: NewEvent[];
  expectedRevision: ExpectedRevision;
  /** Decider state after these events, stored with the stream so loading it stays O(1). */
  snapshot?: unknown;
  /**
   * false: the commit may return before it is flushed to disk (PostgreSQL synchronous_commit
   * off). Still atomic and at once visible to every reader; lost only if the database server
   * itself crashes before the next flush. Default true. Adapters without the notion ignore it.
   */
  durable?: boolean;
  /**
   * Operator work (a correction's adjustments), not a live call's: a group committer appends it in
   * a lane of its own, so live appends never wait behind it. Adapters ignore it.
   */
  background?: boolean;
  /**
   * Epoch ms after which the append must not commit: its caller has been answered by then (a
   * metered call's ledger bound). Checked by the database's clock when the statement arrives, so an
   * append held up on the way (a stalled link) commits nothing and fails with AppendDeadlinePassed.
   * The PostgreSQL adapter checks it; KurrentDB ignores it (a late commit is then voided).
   */
  notAfter?: number;
  /**
   * Other streams the decision read, at the revisions it read (a subscription reads its plan): the
   * append commits only if none has moved since, checked in the same transaction, else it fails
   * with StaleReadError. The PostgreSQL adapter checks it; KurrentDB ignores it (the decision's own
   * read then stands: it was confirmed against the log after the request arrived).
   */
  unchanged?: StreamRevision[];
}

export interface StreamRevision {
  stream: string;
  /** -1: the stream must not exist. */
  revision: number;
}

export interface AppendResult {
  stream: string;
  /** The revision of the last event appended. */
  revision: number;
  firstPosition: number;
  lastPosition: number;
  /** The time stored with the events (what every reader sees), where the adapter says. */
  timestamp?: string;
}

export interface Snapshot {
  revision: number;
  state: unknown;
}

export interface Subscription {
  /** Resolves once the handler has seen every event committed before this call: reads at once, cutting the linger short. */
  caughtUp(): Promise<void>;
  /**
   * Says that events up to `position` exist (another process appended them): the subscription
   * reads them at its own pace, after its linger, without waiting for a notification or a poll.
   */
  expect(position: number): void;
  close(): Promise<void>;
}

/**
 * Handles a page of events. It may answer a position to read the log again from: the events after
 * it are handed over again (a read model found its database behind what it had applied, as after
 * a failover to a standby that had not received its last commits).
 */
export type EventHandler = (events: StoredEvent[]) => Promise<void | { rewindTo: number }>;

export interface SubscribeOptions {
  /**
   * After an append wakes the subscription, wait this long before reading, so the events of the
   * next few milliseconds are handled as one batch. caughtUp() never waits for it.
   */
  lingerMs?: number;
}

/** Reading the event log: what a consumer that never appends needs. */
export type EventReader = Pick<
  EventStore,
  | 'kind'
  | 'readStream'
  | 'findEvent'
  | 'readAll'
  | 'readAllProjected'
  | 'headPosition'
  | 'readableHead'
  | 'countAfter'
  | 'subscribe'
  | 'readSnapshot'
  | 'workerSource'
  | 'onOthersCommit'
>;

export interface EventStore {
  readonly kind: string;
  append(request: AppendRequest): Promise<AppendResult>;
  /** Group commit: every request in one transaction; each one succeeds or fails on its own revision. */
  appendMany(requests: AppendRequest[]): Promise<Array<AppendResult | Error>>;
  readStream(stream: string, fromRevision?: number): Promise<StoredEvent[]>;
  /** The event with this id, if it was committed (resolves an append whose outcome was lost with its connection). */
  findEvent?(id: string): Promise<StoredEvent | null>;
  /** Events after `afterPosition` in global order (position 0 = from the start). */
  readAll(afterPosition: number, limit: number): Promise<StoredEvent[]>;
  /** The same events with only what projections read; cheaper, for replays of the whole log. */
  readAllProjected?(afterPosition: number, limit: number): Promise<ProjectedEvent[]>;
  /**
   * How a worker thread opens this same log on connections of its own (see readSettledPage in
   * postgres.ts); absent where no other thread can (embedded PGlite, KurrentDB).
   */
  readonly workerSource?: { url: string; schema: string };
  readSnapshot(stream: string): Promise<Snapshot | null>;
  /**
   * The last committed position: every event committed before the call is at or below it (what a
   * reader waits for). Positions are ordered but not dense: they do not count events.
   */
  headPosition(): Promise<number>;
  /**
   * The position to subscribe after so as to hear every event committed from now on: no event
   * can still commit at or below it. On PostgreSQL it may trail headPosition() while an older
   * transaction runs; elsewhere the two are the same.
   */
  readableHead(): Promise<number>;
  /** How many committed events follow `afterPosition` (counted up to `limit`). */
  countAfter?(afterPosition: number, limit: number): Promise<number>;
  subscribe(afterPosition: number, handler: EventHandler, options?: SubscribeOptions): Subscription;
  /**
   * Calls back when another process tells of a commit (PostgreSQL's NOTIFY), so the caches of this
   * one can read it at once instead of at their next poll; returns the way to stop. Absent where
   * no other process can append (embedded PGlite).
   */
  onOthersCommit?(listener: (position: number) => void): () => void;
  close(): Promise<void>;
}
