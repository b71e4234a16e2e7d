// The ledger as the rest of the application sees it: commands that append events, and the
// read models they feed. Every write goes through a pure decider; nothing is updated in place.
// It knows no feature: each feature sends its commands with its own decider (src/accounts/commands.ts,
// src/keys/commands.ts, …), so the base holds only how a command is decided and appended.
import { addPhase } from '../tracing/call-phases.ts';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from '../eventstore/db.ts';
import type { Decider } from './decider.ts';
import type { EventMetadata, EventReader, EventStore, StoredEvent } from '../eventstore/port.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createGroupCommitter } from '../eventstore/group-commit.ts';
import { validateEvent } from './event-catalogue.ts';
import { createCommandHandler, type CommandHandler, type CommandOptions, type CommandResult } from './command-handler.ts';
import type { DomainEvent } from './events.ts';
import { invalid } from './errors.ts';
import { ReadModelsBehind, trackAppends } from './read-your-writes.ts';

/** The read models' database and schema, for the typed reads beside each projection. */
export interface ReadModelsHandle {
  db: Database;
  schema: string;
}

/** What the ledger needs of the read side (projections/runner/read-side.ts `ReadSide`). */
export interface ReadSideHandle {
  readonly schema: string;
  readonly projectsHere: boolean;
  waitForPosition(position: number, timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * A fast upstream answers within a few milliseconds of the hold's decision: waiting that long lets
 * hold and charge commit in one append (one round trip and one WAL flush instead of two), while a
 * slow upstream's reply never waits for it (the hold commits long before).
 */
export const DEFAULT_HOLD_LINGER_MS = 3;

export interface LedgerOptions {
  db: Database;
  /** Schema of the event store (the read side names the read models' own). */
  schema?: string;
  /**
   * The read models and how a read waits for them (projections/runner/read-side.ts builds it; the
   * ledger only calls it, so the write side depends on no read model).
   */
  readSide: (store: EventStore) => Promise<ReadSideHandle>;
  /** Told how long each group-committed append took (seconds). */
  onAppendTimed?: (seconds: number) => void;
  store?: EventStore;
  /** How long a fast call's hold waits for its charge to share one append (ms; 0: never). */
  holdLingerMs?: number;
  /** Holds back the answers of commits (CommandHandlerOptions.beforeAnswer): until other gateways have read a change they keep in memory. */
  beforeAnswer?: (events: StoredEvent[]) => Promise<unknown> | undefined;
}

/** How long a request's read waits for the read models before it is answered 503. */
export const READ_WAIT_MS = 2000;
/** How long start-up, shutdown and tests wait for them (a large batch may be projecting). */
const CATCH_UP_WAIT_MS = 30_000;

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

export function requireId(value: unknown, name: string): string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) throw invalid(`${name} must be 1-64 letters, digits, '_', '.', ':' or '-'`, { param: name });
  return value;
}

export function metadataFor(actor: string, correlationId: string = randomUUID(), causationId: string | null = null): EventMetadata {
  return { correlationId, causationId, actor };
}

export async function openLedger(opts: LedgerOptions) {
  const schema = opts.schema ?? 'tollgate';
  const tracker = trackAppends(opts.store ?? (await createPostgresEventStore(opts.db, { schema, validate: validateEvent })));
  const store = tracker.store;
  // Embedded PGlite lives inside this process: nobody else can append to its log.
  const logIsShared = !(store.kind === 'pglite' && opts.db.kind === 'pglite');
  const timed: EventStore = opts.onAppendTimed
    ? {
        ...store,
        appendMany: async (requests) => {
          const started = process.hrtime.bigint();
          try {
            return await store.appendMany(requests);
          } finally {
            const seconds = Number(process.hrtime.bigint() - started) / 1e9;
            opts.onAppendTimed!(seconds);
            addPhase('store_append', seconds * 1000);
          }
        },
      }
    : store;
  const committer = createGroupCommitter(timed);
  // In-process listeners (caches) hear of this process's own appends at once; other processes'
  // appends reach them through the store's subscription.
  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  const handler: CommandHandler = createCommandHandler({
    store,
    append: committer.append,
    onAppended: (events) => appended.emit('events', events),
    lingerMs: opts.holdLingerMs ?? DEFAULT_HOLD_LINGER_MS,
    beforeAnswer: opts.beforeAnswer,
  });
  const reads = await opts.readSide(store);
  const rmSchema = reads.schema;

  const ledger = {
    schema,
    rmSchema,
    /** Where the read models live, for their typed queries (projections/*.ts). */
    readModels: { db: opts.db, schema: rmSchema } as ReadModelsHandle,
    /** The event log, to read: every write goes through the commands below. */
    events: store as EventReader,
    /** Whether this process runs the projections (else a separate projector does). */
    projectsHere: reads.projectsHere,
    /** Waits (bounded) until the read models include `position`; false on timeout. */
    waitForPosition: (position: number, timeoutMs: number): Promise<boolean> => reads.waitForPosition(position, timeoutMs),
    /** Resolves once appends in flight are committed (shutdown). */
    drain: () => committer.drain(),
    /** How many commands were withdrawn because their callers had already been answered (a metric). */
    withdrawnCommands: () => handler.withdrawnCount(),
    /** Cached states confirmed against the log before an answer, and how many had moved (metrics). */
    confirmations: () => handler.confirmationCounts(),
    /** Subscribe with `appended.on('events', (events: StoredEvent[]) => ...)`. */
    appended,

    /** Decides and appends a command on a stream by its decider (CommandHandler.handle). */
    command: <S, C>(
      decider: Decider<S, C>,
      stream: string,
      command: C,
      md: EventMetadata,
      eventIds?: (e: DomainEvent, i: number) => string,
      options: CommandOptions = {},
    ): Promise<CommandResult<S>> => handler.handle(decider, stream, command, md, eventIds, options),
    /** A stream's state by its decider, as the log has it now (another process may have written it). */
    async streamState<S, C>(decider: Decider<S, C>, stream: string, options: { cached?: boolean } = {}): Promise<S> {
      return (await handler.state(decider, stream, options)).state;
    },
    /**
     * The same with its revision and whether it is confirmed against the log. `cached`: this
     * process's copy, unconfirmed, for a decision that an append checks anyway, or that is
     * confirmed (`confirmed: false` tells) before it refuses.
     */
    streamStateChecked: <S, C>(decider: Decider<S, C>, stream: string, options: { cached?: boolean } = {}) => handler.state(decider, stream, options),
    /** A command answered at its decision and again at its commit (CommandHandler.decideEarly). */
    decideEarly: <S, C>(decider: Decider<S, C>, stream: string, command: C, md: EventMetadata, options: { linger?: boolean; gone?: () => boolean } = {}) =>
      handler.decideEarly<S, C>(decider, stream, command, md, options),
    /**
     * Waits until the read models include every event this process appended and, when other
     * processes can append to the same log, everything committed before the call (an account
     * opened through another gateway a moment ago). Throws ReadModelsBehind after `boundMs`.
     */
    async readYourWrites(boundMs = READ_WAIT_MS) {
      const target = Math.max(tracker.lastAppended(), logIsShared ? await store.headPosition() : 0);
      if (!(await ledger.waitForPosition(target, boundMs))) throw new ReadModelsBehind(`the read models have not reached position ${target} yet`);
    },
    /** readYourWrites with the patience of start-up, shutdown and tests. */
    caughtUp: (boundMs = CATCH_UP_WAIT_MS): Promise<void> => ledger.readYourWrites(boundMs),
    async close() {
      // Leave the read models with what this process appended, so readers do not wait for a
      // restart; bounded, so a lost database cannot hold the shutdown.
      if (reads.projectsHere) await ledger.readYourWrites(10_000).catch(() => undefined);
      await reads.stop();
      await store.close();
    },
  };
  return ledger;
}

export type Ledger = Awaited<ReturnType<typeof openLedger>>;
