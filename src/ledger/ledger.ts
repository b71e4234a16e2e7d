// The ledger as the rest of the application sees it: commands that append events, and the
// read models they feed. Every write goes through a pure decider; nothing is updated in place.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from '../eventstore/db.ts';
import type { EventMetadata, EventStore } from '../eventstore/port.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createGroupCommitter } from '../eventstore/group-commit.ts';
import { validateEvent } from './catalogue.ts';
import { createCommandHandler, type CommandHandler } from './command-handler.ts';
import { accountDecider, type AccountCommand, type AccountState } from './account.ts';
import { keyDecider } from './key.ts';
import { planDecider, type PlanState } from './plan.ts';
import { modelDecider, type ModelCommand } from './model.ts';
import { streams, type DomainEvent, type PlanTerms } from './events.ts';
import { DomainError, invalid } from './errors.ts';
import { generateKeySecret, hashKey, lastFour } from './keys.ts';
import { SEED_MODELS } from './price-list.ts';
import { toMilli } from './pricing.ts';
import { startProjectionRunner, ensureReadModels, readCheckpoint, type ProjectionRunner } from '../../projections/runner.ts';

export interface LedgerOptions {
  db: Database;
  /** Schema of the event store; read models live in `<schema>_rm`. */
  schema?: string;
  /** Run the projections in this process (default true). */
  projections?: boolean;
  /** Told how long each group-committed append took (seconds). */
  onAppendTimed?: (seconds: number) => void;
  store?: EventStore;
}

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
  const rmSchema = `${schema}_rm`;
  const store = opts.store ?? await createPostgresEventStore(opts.db, { schema, validate: validateEvent });
  const timed: EventStore = opts.onAppendTimed ? {
    ...store,
    appendMany: async (requests) => {
      const started = process.hrtime.bigint();
      try { return await store.appendMany(requests); } finally { opts.onAppendTimed!(Number(process.hrtime.bigint() - started) / 1e9); }
    },
  } : store;
  const committer = createGroupCommitter(timed);
  // In-process listeners (caches) hear of this process's own appends at once; other processes'
  // appends reach them through the store's subscription.
  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  const handler: CommandHandler = createCommandHandler({ store, append: committer.append, onAppended: (events) => appended.emit('events', events) });
  await ensureReadModels(opts.db, rmSchema);
  const runner: ProjectionRunner | null = opts.projections === false ? null : await startProjectionRunner({ db: opts.db, store, schema: rmSchema });

  const account = (accountId: string, command: AccountCommand, md: EventMetadata, eventIds?: (e: DomainEvent, i: number) => string) =>
    handler.handle(accountDecider, streams.account(accountId), command, md, eventIds);

  async function planTerms(planId: string): Promise<PlanTerms> {
    const { state } = await handler.state<PlanState>(planDecider as never, streams.plan(planId));
    if (!state.terms) throw new DomainError('not_found', `plan ${planId} not found`);
    return state.terms;
  }

  const ledger = {
    db: opts.db, store, schema, rmSchema, handler, runner, committer,
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
      const plan = await planTerms(planId);
      return account(accountId, { type: 'Subscribe', accountId, plan: { ...plan, name: plan.name }, now }, metadataFor(actor));
    },
    async grantExtra(accountId: string, amount: number, reason: string, actor: string) {
      return account(accountId, { type: 'GrantExtra', accountId, amount, reason }, metadataFor(actor));
    },
    async accountState(accountId: string): Promise<AccountState> {
      return (await handler.state<AccountState>(accountDecider as never, streams.account(accountId))).state;
    },
    async issueKey(accountId: string, name: string, actor: string) {
      const acct = await ledger.accountState(accountId);
      if (!acct.opened) throw new DomainError('not_found', `account ${accountId} not found`);
      const secret = generateKeySecret();
      const keyId = `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
      await handler.handle(keyDecider, streams.key(keyId), { type: 'Issue', keyId, accountId, name, hash: hashKey(secret), last4: lastFour(secret) }, metadataFor(actor));
      return { keyId, secret, last4: lastFour(secret) };
    },
    async revokeKey(keyId: string, reason: string, actor: string) {
      requireId(keyId, 'key_id');
      return handler.handle(keyDecider, streams.key(keyId), { type: 'Revoke', reason }, metadataFor(actor));
    },
    async priceModel(cmd: Omit<Extract<ModelCommand, { type: 'Price' }>, 'type'>, actor: string) {
      return handler.handle(modelDecider, streams.model(cmd.modelId), { type: 'Price', ...cmd }, metadataFor(actor));
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
    /** An account command answered at its decision and again at its commit (CommandHandler.decideEarly). */
    accountDecideEarly: (accountId: string, command: AccountCommand, md: EventMetadata) =>
      handler.decideEarly<AccountState, AccountCommand>(accountDecider, streams.account(accountId), command, md),
    /**
     * Waits until the read models include everything appended so far. With projections in
     * another process (`tollgate projector`) this process cannot hurry them: it waits, at most
     * `boundMs`, for their checkpoint to reach the head of the log as of the call.
     */
    async caughtUp(boundMs = 2000) {
      if (runner) return runner.caughtUp();
      const head = await store.headPosition();
      for (const until = Date.now() + boundMs; Date.now() < until && (await readCheckpoint(opts.db, rmSchema)) < head;) {
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    async close() {
      // Leave the read models with what this process appended, so readers do not wait for a
      // restart; bounded, so a lost database cannot hold the shutdown.
      if (runner) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([runner.caughtUp().catch(() => undefined), new Promise((r) => { timer = setTimeout(r, 10_000); })]);
        clearTimeout(timer);
      }
      await runner?.stop();
      await store.close();
    },
  };
  return ledger;
}

export type Ledger = Awaited<ReturnType<typeof openLedger>>;
