// Webhooks in a gateway process: the operator's actions (register, list, remove, read the delivery
// log, replay), and the dispatcher, run by one process at a time. On PostgreSQL every gateway
// competes for a lease (a session advisory lock, storage.tryLease); the holder dispatches, the
// others keep trying and take over when its session ends. Embedded PGlite has one process.
import { outageReporter } from '../eventstore/outage.ts';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Database } from '../eventstore/db.ts';
import type { EventMetadata, EventStore } from '../eventstore/port.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { validateEvent } from '../ledger/event-catalogue.ts';
import { createCommandHandler } from '../ledger/command-handler.ts';
import { DomainError } from '../ledger/errors.ts';
import { ReadModelsBehind } from '../ledger/read-your-writes.ts';
import { streamEvent, streams, type DomainEvent } from '../ledger/events.ts';
import type { Settings } from '../config.ts';
import { checkEndpoint, parseEndpoint, type EndpointPolicy } from './endpoint.ts';
import { masterKey, loadOrCreateMasterSecret, type MasterKey } from './signing.ts';
import { registrationInput, webhookDecider, type Registration, type WebhooksState } from './webhook.ts';
import { startDispatcher, type Dispatcher } from './dispatcher.ts';
import * as storage from './storage.ts';

export interface WebhookView {
  object: 'webhook';
  webhook_id: string;
  account_id: string;
  url: string;
  events: string[];
  thresholds: number[];
  expiring_days: number;
  created_at: string;
}

export interface DeliveryView {
  object: 'webhook_delivery';
  delivery_id: string;
  /** Queue order within the webhook (a replay moves the delivery to the end); `before` pages by it. */
  seq: number;
  webhook_id: string;
  notification_id: string;
  type: string;
  status: storage.DeliveryStatus;
  attempts: number;
  replays: number;
  created_at: string;
  next_attempt_at: string | null;
  give_up_at: string;
  last_attempt_at: string | null;
  last_error: string | null;
  response_status: number | null;
  delivered_at: string | null;
  notification: unknown;
}

export interface DeliveriesQuery {
  status?: unknown;
  limit?: unknown;
  before?: unknown;
}

export interface WebhookService {
  register(accountId: string, body: Record<string, unknown>, actor: string): Promise<WebhookView & { secret: string }>;
  list(accountId: string): Promise<WebhookView[]>;
  remove(accountId: string, webhookId: string, reason: string, actor: string): Promise<void>;
  deliveries(webhookId: string, query: DeliveriesQuery): Promise<DeliveryView[]>;
  replay(webhookId: string, deliveryId: string): Promise<DeliveryView>;
  /** Whether this process dispatches now (holds the lease). */
  readonly leading: boolean;
  /** Runs the time-based kinds now (or at `nowMs`) in this process, if it dispatches; the number queued. */
  checkTime(nowMs?: number): Promise<number>;
  /** Resolves once this process's dispatcher (if it leads) has read the log up to now. */
  caughtUp(): Promise<void>;
  /** For tests: the clock (ms) that decides when deliveries are due and when plans expire. */
  setClock(clock: (() => number) | null): void;
  close(): Promise<void>;
}

/** What the admin routes find for a gateway: its service, or why webhooks are off. */
export type WebhooksHandle = { service: WebhookService } | { disabled: string };

const handles = new WeakMap<object, WebhooksHandle>();

/** The webhooks of the gateway whose dependencies are `deps` (set by startWebhooks). */
export const webhooksOf = (deps: object): WebhooksHandle => handles.get(deps) ?? { disabled: 'webhooks are not started in this process' };

export interface StartOptions {
  settings: Settings;
  db: Database;
  /** The event store the ledger uses, when it is not the default PostgreSQL one (KurrentDB). */
  store?: EventStore;
  /** The gateway's dependencies: the admin routes find the service by them. */
  deps: object;
  log: Logger;
  /** Extra trusted CA certificates for https receivers (tests). */
  ca?: string | Buffer;
}

/** How long a lease-less gateway waits before it tries again. */
const LEASE_RETRY_MS = 2000;
const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$/;
const WEBHOOK_ID = /^wh_[a-f0-9]{16,32}$/;
const DELIVERY_ID = /^dlv_[a-f0-9]{32}$/;
const MAX_LIMIT = 1000;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function webhookView(r: Registration): WebhookView {
  return {
    object: 'webhook',
    webhook_id: r.webhookId,
    account_id: r.accountId,
    url: r.url,
    events: r.events,
    thresholds: r.thresholds,
    expiring_days: r.expiringDays,
    created_at: r.registeredAt,
  };
}

function deliveryView(d: storage.DeliveryRow): DeliveryView {
  return {
    object: 'webhook_delivery',
    delivery_id: d.deliveryId,
    seq: d.seq,
    webhook_id: d.webhookId,
    notification_id: d.notificationId,
    type: d.type,
    status: d.status,
    attempts: d.attempts,
    replays: d.replays,
    created_at: iso(d.createdMs)!,
    next_attempt_at: d.status === 'pending' ? iso(d.nextAttemptMs) : null,
    give_up_at: iso(d.deadlineMs)!,
    last_attempt_at: iso(d.lastAttemptMs),
    last_error: d.lastError,
    response_status: d.responseStatus,
    delivered_at: iso(d.deliveredMs),
    notification: JSON.parse(d.body),
  };
}

/**
 * Starts webhooks for a gateway (server.ts): the service its admin routes use and, when this
 * process wins the lease, the dispatcher. Without a master secret (TOLLGATE_WEBHOOK_SECRET, or a
 * data directory to keep one in) or with TOLLGATE_WEBHOOKS=off, webhooks are off and the admin
 * routes say why.
 */
export async function startWebhooks(opts: StartOptions): Promise<{ close(): Promise<void> }> {
  const { settings, db, log } = opts;
  const ws = settings.webhooks;
  const off = (why: string) => {
    handles.set(opts.deps, { disabled: why });
    return {
      async close() {
        handles.delete(opts.deps);
      },
    };
  };
  if (!ws.enabled) return off('webhooks are switched off on this gateway (TOLLGATE_WEBHOOKS=off)');
  let secret = ws.masterSecret;
  if (!secret && settings.dataDir) {
    const file = loadOrCreateMasterSecret(settings.dataDir);
    if (file.created) log.info({ path: file.path }, 'webhook master secret created (mode 0600)');
    secret = file.secret;
  }
  if (!secret) {
    log.info('webhooks are off: no master secret (set TOLLGATE_WEBHOOK_SECRET, or run with a data directory)');
    return off('webhooks need a master secret on this gateway: set TOLLGATE_WEBHOOK_SECRET (or run it with a data directory)');
  }
  const master = masterKey(secret);
  const ownStore = !opts.store;
  const store = opts.store ?? (await createPostgresEventStore(db, { schema: settings.schema, validate: validateEvent }));
  await storage.ensureTables(db, settings.schema);
  const service = createService({ ...opts, store, master, log });
  handles.set(opts.deps, { service });
  return {
    async close() {
      handles.delete(opts.deps);
      await service.close();
      if (ownStore) await store.close();
    },
  };
}

function createService(o: StartOptions & { store: EventStore; master: MasterKey }): WebhookService {
  const { settings, db, store, master, log } = o;
  const schema = settings.schema;
  const policy: EndpointPolicy = { allowHosts: settings.webhooks.allowHosts };
  const handler = createCommandHandler({ store });
  let clock: () => number = Date.now;
  let dispatcher: Dispatcher | null = null;
  let closed = false;

  const metadata = (actor: string): EventMetadata => ({ correlationId: randomUUID(), causationId: null, actor });

  const launch = () =>
    startDispatcher({
      db,
      store,
      schema,
      settings: settings.webhooks,
      master,
      policy,
      log,
      clock: () => clock(),
      ca: o.ca,
    });

  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((r) => {
    stop = r;
  });

  // Who dispatches: this process alone on PGlite; on PostgreSQL, whoever holds the lease.
  const leaseOutage = outageReporter(log, 'webhook dispatcher lease');
  const leadership = (async () => {
    if (!settings.databaseUrl) {
      dispatcher = await launch();
      return;
    }
    while (!closed) {
      let lost: () => void = () => undefined;
      const gone = new Promise<void>((r) => {
        lost = r;
      });
      try {
        const lease = await storage.tryLease(settings.databaseUrl, `${schema}:webhooks`, (err) => {
          log.error({ err: err.message }, 'webhook dispatcher lease lost');
          lost();
        });
        if (lease) {
          try {
            if (!closed) {
              dispatcher = await launch();
              await Promise.race([gone, stopped]);
            }
          } finally {
            await dispatcher?.stop().catch(() => undefined);
            dispatcher = null;
            await lease.release();
          }
          continue;
        }
        leaseOutage.ok();
      } catch (err) {
        if (!closed) leaseOutage.failed(err);
      }
      await Promise.race([new Promise((r) => setTimeout(r, LEASE_RETRY_MS).unref()), stopped]);
    }
  })().catch((err) => log.error({ err: (err as Error).message }, 'webhook dispatcher stopped'));

  async function requireAccount(accountId: string): Promise<void> {
    const missing = () => new DomainError('not_found', `account ${String(accountId).slice(0, 100)} not found`, { param: 'account_id' });
    if (typeof accountId !== 'string' || !ACCOUNT_ID.test(accountId)) throw missing();
    // A snapshot exists only for a stream that has events; an account stream starts with AccountOpened.
    if (await store.readSnapshot(streams.account(accountId))) return;
    const [first] = await store.readStream(streams.account(accountId));
    if (first?.type !== 'AccountOpened') throw missing();
  }

  async function current(accountId: string): Promise<WebhooksState> {
    const events = await store.readStream(streams.webhooks(accountId));
    return events.reduce(
      (s, e) => webhookDecider.evolve(s, streamEvent('webhooks', { type: e.type, data: e.data } as DomainEvent)),
      webhookDecider.initialState(),
    );
  }

  /** Waits (bounded) until the dispatcher, wherever it runs, has read what is in the log now. */
  async function dispatcherReached(boundMs = 2000): Promise<boolean> {
    const head = await store.headPosition();
    for (const until = Date.now() + boundMs; ;) {
      if ((await storage.readCheckpoint(db, schema)) >= head) return true;
      if (Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function requireWebhook(webhookId: string): Promise<void> {
    const missing = () => new DomainError('not_found', `webhook ${String(webhookId).slice(0, 100)} not found`, { param: 'webhook_id' });
    if (typeof webhookId !== 'string' || !WEBHOOK_ID.test(webhookId)) throw missing();
    if (await storage.registration(db, schema, webhookId)) return;
    // Registered a moment ago: the dispatcher may not have read it yet.
    if (!(await dispatcherReached())) throw new ReadModelsBehind('the webhook dispatcher has not read the latest events yet');
    if (!(await storage.registration(db, schema, webhookId))) throw missing();
  }

  return {
    get leading() {
      return dispatcher !== null;
    },

    async register(accountId, body, actor) {
      const input = registrationInput(body);
      parseEndpoint(input.url, policy);
      await requireAccount(accountId);
      const url = await checkEndpoint(input.url, policy);
      const registration: Registration = {
        webhookId: `wh_${randomBytes(8).toString('hex')}`,
        accountId,
        url: url.href,
        events: input.events,
        thresholds: input.thresholds,
        expiringDays: input.expiringDays,
        signingKeyId: master.keyId,
        registeredAt: new Date().toISOString(),
      };
      const stream = streams.webhooks(accountId);
      // Another gateway may have changed the stream since this one last read it.
      handler.forget(stream);
      await handler.handle(webhookDecider, stream, { type: 'Register', registration }, metadata(actor));
      log.info({ webhookId: registration.webhookId, accountId, actor }, 'webhook registered');
      // The only time the secret leaves the gateway.
      return { ...webhookView(registration), secret: master.secretFor(registration.webhookId) };
    },

    async list(accountId) {
      await requireAccount(accountId);
      return Object.values((await current(accountId)).active)
        .sort((a, b) => a.registeredAt.localeCompare(b.registeredAt))
        .map(webhookView);
    },

    async remove(accountId, webhookId, reason, actor) {
      await requireAccount(accountId);
      if (typeof webhookId !== 'string' || !WEBHOOK_ID.test(webhookId))
        throw new DomainError('not_found', `webhook ${String(webhookId).slice(0, 100)} not found`, { param: 'webhook_id' });
      const stream = streams.webhooks(accountId);
      handler.forget(stream);
      await handler.handle(webhookDecider, stream, { type: 'Remove', accountId, webhookId, reason }, metadata(actor));
      log.info({ webhookId, accountId, actor }, 'webhook removed');
    },

    async deliveries(webhookId, query) {
      await requireWebhook(webhookId);
      const status = query.status;
      if (status !== undefined && !(storage.DELIVERY_STATUSES as readonly unknown[]).includes(status)) {
        throw new DomainError('invalid', `'status' must be one of ${storage.DELIVERY_STATUSES.join(', ')}.`, { param: 'status' });
      }
      const limit = query.limit === undefined ? 100 : Number(query.limit);
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new DomainError('invalid', `'limit' must be a whole number from 1 to ${MAX_LIMIT}.`, { param: 'limit' });
      const before = query.before === undefined ? undefined : Number(query.before);
      if (before !== undefined && (!Number.isSafeInteger(before) || before < 1))
        throw new DomainError('invalid', `'before' must be a delivery sequence number.`, { param: 'before' });
      const rows = await storage.deliveries(db, schema, webhookId, { status: status as storage.DeliveryStatus | undefined, limit, beforeSeq: before });
      return rows.map(deliveryView);
    },

    async replay(webhookId, deliveryId) {
      await requireWebhook(webhookId);
      if (typeof deliveryId !== 'string' || !DELIVERY_ID.test(deliveryId))
        throw new DomainError('not_found', `delivery ${String(deliveryId).slice(0, 100)} not found`, { param: 'delivery_id' });
      const now = clock();
      const r = await storage.replay(db, schema, webhookId, deliveryId, now, now + settings.webhooks.retryForMs);
      if (!r.ok) {
        if (r.reason === 'not_found') throw new DomainError('not_found', `delivery ${deliveryId} not found for webhook ${webhookId}`, { param: 'delivery_id' });
        throw new DomainError('conflict', r.reason === 'pending' ? `delivery ${deliveryId} is still queued` : `webhook ${webhookId} was removed`);
      }
      dispatcher?.wake();
      log.info({ webhookId, deliveryId }, 'webhook delivery queued again');
      return deliveryView(r.row);
    },

    checkTime: async (nowMs) => (dispatcher ? dispatcher.checkTime(nowMs) : 0),
    caughtUp: async () => {
      await dispatcher?.caughtUp();
    },
    setClock(c) {
      clock = c ?? Date.now;
      dispatcher?.wake();
    },

    async close() {
      closed = true;
      stop();
      await leadership;
      await dispatcher?.stop();
      dispatcher = null;
    },
  };
}
