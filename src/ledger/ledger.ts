// The ledger as the rest of the application sees it: commands that append events, and the
// read models they feed. Every write goes through a pure decider; nothing is updated in place.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from '../eventstore/db.ts';
import type { Decider } from './decider.ts';
import type { EventMetadata, EventReader, EventStore, StoredEvent, StreamRevision } from '../eventstore/port.ts';
import { StaleReadError } from '../eventstore/errors.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createGroupCommitter } from '../eventstore/group-commit.ts';
import { validateEvent } from './catalogue.ts';
import { createCommandHandler, type CommandHandler, type CommandOptions } from './command-handler.ts';
import { accountDecider, type AccountCommand } from './account.ts';
import { type AccountState } from './account-state.ts';
import { keyDecider, type KeyCommand } from './key.ts';
import { planDecider, type PlanState } from './plan.ts';
import { modelDecider, type ModelCommand } from './model.ts';
import { channelDecider } from './channel.ts';
import { streams, type DomainEvent, type PlanTerms } from './events.ts';
import { DomainError, invalid } from './errors.ts';
import { generateKeySecret, hashKey, lastFour } from './keys.ts';
import { SEED_MODELS } from './price-list.ts';
import { toMilli } from './pricing.ts';
import { ReadModelsBehind, trackAppends } from './read-your-writes.ts';

/** The read models' database and schema, for the typed reads beside each projection. */
export interface ReadModelsHandle {
  db: Database;
  schema: string;
}

/** What the ledger needs of the read side (projections/read-side.ts `ReadSide`). */
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
   * The read models and how a read waits for them (projections/read-side.ts builds it; the
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

/** How often a decision that reads a plan is decided again because the plan kept changing under it. */
const PLAN_READ_ATTEMPTS = 10;

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
            opts.onAppendTimed!(Number(process.hrtime.bigint() - started) / 1e9);
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

  const account = (
    accountId: string,
    command: AccountCommand,
    md: EventMetadata,
    eventIds?: (e: DomainEvent, i: number) => string,
    options: CommandOptions = {},
  ) => handler.handle(accountDecider, streams.account(accountId), command, md, eventIds, options);

  /** A plan's terms as the log has them now, with the revision they were read at. */
  async function planAt(planId: string): Promise<{ terms: PlanTerms; read: StreamRevision }> {
    const { state, revision } = await handler.state<PlanState>(planDecider as never, streams.plan(planId));
    if (!state.terms) throw new DomainError('not_found', `plan ${planId} not found`);
    return { terms: state.terms, read: { stream: streams.plan(planId), revision } };
  }
  const planTerms = async (planId: string): Promise<PlanTerms> => (await planAt(planId)).terms;

  /**
   * Runs a decision that reads a plan: it names the plan's revision, and when the plan changed
   * before the append committed (an update on another gateway) it reads the plan again and decides again.
   */
  async function withPlan<T>(planId: string, decide: (plan: PlanTerms, read: StreamRevision) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const { terms, read } = await planAt(planId);
      try {
        return await decide(terms, read);
      } catch (err) {
        if (!(err instanceof StaleReadError) || attempt >= PLAN_READ_ATTEMPTS) throw err;
      }
    }
  }

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
    /** A key command through the key decider (issueKey is the way to issue one with a fresh secret). */
    key: (keyId: string, command: KeyCommand, md: EventMetadata) => handler.handle(keyDecider, streams.key(keyId), command, md),
    /** A model command (price, correction) through the model decider. */
    model: (modelId: string, command: ModelCommand, md: EventMetadata) => handler.handle(modelDecider, streams.model(modelId), command, md),
    /** Subscribe with `appended.on('events', (events: StoredEvent[]) => ...)`. */
    appended,

    async definePlan(terms: PlanTerms, actor: string) {
      requireId(terms.planId, 'plan_id');
      return handler.handle(planDecider, streams.plan(terms.planId), { type: 'Define', terms }, metadataFor(actor));
    },
    async updatePlan(terms: PlanTerms, actor: string) {
      requireId(terms.planId, 'plan_id');
      return handler.handle(planDecider, streams.plan(terms.planId), { type: 'Update', terms }, metadataFor(actor));
    },
    planTerms,
    async openAccount(input: { accountId?: string; name: string }, actor: string) {
      const accountId = requireId(input.accountId ?? `acct_${randomUUID().slice(0, 8)}`, 'account_id');
      await account(accountId, { type: 'Open', accountId, name: input.name }, metadataFor(actor));
      return accountId;
    },
    async subscribe(accountId: string, planId: string, actor: string, now = new Date()) {
      return withPlan(planId, (plan, read) =>
        account(accountId, { type: 'Subscribe', accountId, plan: { ...plan, name: plan.name }, now }, metadataFor(actor), undefined, { unchanged: [read] }),
      );
    },
    withPlan,
    async grantExtra(accountId: string, amount: number, reason: string, actor: string) {
      return account(accountId, { type: 'GrantExtra', accountId, amount, reason }, metadataFor(actor));
    },
    /**
     * The account as the log has it now. `cached`: this process's copy, unconfirmed, for a decision
     * that an append checks anyway, or that is confirmed (`confirmed: false` tells) before it refuses.
     */
    async accountState(accountId: string, options: { cached?: boolean } = {}): Promise<AccountState> {
      return (await handler.state<AccountState>(accountDecider as never, streams.account(accountId), options)).state;
    },
    /** The account's state with whether it is confirmed against the log (see accountState). */
    accountStateChecked: (accountId: string, options: { cached?: boolean } = {}) =>
      handler.state<AccountState>(accountDecider as never, streams.account(accountId), options),
    async issueKey(accountId: string, name: string, actor: string) {
      const acct = await ledger.accountState(accountId);
      if (!acct.opened) throw new DomainError('not_found', `account ${accountId} not found`);
      const secret = generateKeySecret();
      const keyId = `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
      await handler.handle(
        keyDecider,
        streams.key(keyId),
        { type: 'Issue', keyId, accountId, name, hash: hashKey(secret), last4: lastFour(secret) },
        metadataFor(actor),
      );
      return { keyId, secret, last4: lastFour(secret) };
    },
    async revokeKey(keyId: string, reason: string, actor: string) {
      requireId(keyId, 'key_id');
      return handler.handle(keyDecider, streams.key(keyId), { type: 'Revoke', reason }, metadataFor(actor));
    },
    async priceModel(cmd: Omit<Extract<ModelCommand, { type: 'Price' }>, 'type'>, actor: string) {
      return handler.handle(modelDecider, streams.model(cmd.modelId), { type: 'Price', ...cmd }, metadataFor(actor));
    },
    /** Takes an upstream channel out of rotation, or puts it back (no event if it already is). */
    async setChannelEnabled(channelId: string, enabled: boolean, reason: string, actor: string) {
      return handler.handle(channelDecider, streams.channel(channelId), { type: enabled ? 'Enable' : 'Disable', channelId, reason }, metadataFor(actor));
    },
    /** Prices the spec's models once, on a ledger that has none. */
    async seedModels(actor = 'system:seed') {
      for (const m of SEED_MODELS) {
        const { state } = await handler.state(modelDecider as never, streams.model(m.id));
        if ((state as { exists: boolean }).exists) continue;
        await ledger.priceModel({ modelId: m.id, multiplierMilli: toMilli(m.multiplier), status: 'ACTIVE', alias: m.alias }, actor);
      }
    },
    account,
    /** A command on a stream of its own decider (src/money: the price list, code batches). */
    command: <S, C>(decider: Decider<S, C>, stream: string, command: C, md: EventMetadata, eventIds?: (e: DomainEvent, i: number) => string) =>
      handler.handle(decider, stream, command, md, eventIds),
    /** A stream's state by its decider, as the log has it now (another process may have written it). */
    async streamState<S>(decider: Decider<S, unknown>, stream: string): Promise<S> {
      return (await handler.state<S>(decider, stream)).state;
    },
    /** An account command answered at its decision and again at its commit (CommandHandler.decideEarly). */
    accountDecideEarly: (accountId: string, command: AccountCommand, md: EventMetadata, options: { linger?: boolean; gone?: () => boolean } = {}) =>
      handler.decideEarly<AccountState, AccountCommand>(accountDecider, streams.account(accountId), command, md, options),
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
