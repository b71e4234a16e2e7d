// The webhook dispatcher: reads the event log in order from a checkpoint of its own, turns what
// happens to accounts with webhooks into notifications (kinds.ts), queues them in the outbox
// (storage.ts) in the same transaction that moves the checkpoint, and sends them.
//
// - State: for each account with a webhook, the account decider's state, folded with its own
//   evolve from the account's stream (at start, and when a webhook is registered) and then event
//   by event as the log is read. Nothing is applied in memory before its batch commits.
// - Order: each webhook receives its notifications in the order they were queued (the log's
//   order); a later one is not sent before the earlier one is delivered or given up.
// - Retries: exponential backoff from retryBaseMs, doubling, capped at retryMaxMs, with jitter,
//   until retryForMs (24 h) after the notification; then the delivery is marked failed.
// - At least once: a delivery is marked delivered only after the receiver's 2xx; a crash in
//   between sends it again, with the same notification id and delivery id, for the receiver to
//   drop. Never twice on purpose: the outbox holds one row per (webhook, notification id).
import { outageReporter } from '../eventstore/outage.ts';
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Database } from '../eventstore/db.ts';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import { accountDecider, type AccountState } from '../accounts/index.ts';
import { SNAPSHOT_VERSION } from '../ledger/command-handler.ts';
import { streamEvent, streams, type DomainEvent, type EventDataByType } from '../ledger/events.ts';
import type { WebhookSettings } from '../config.ts';
import { mergeNotices, NOTIFICATION_KINDS, type Notice, type WebhookOptions } from './kinds.ts';
import type { MasterKey } from './signing.ts';
import type { EndpointPolicy } from './endpoint.ts';
import * as storage from './storage.ts';
import { startSender } from './sender.ts';

export type LogReader = Pick<EventStore, 'readStream' | 'readSnapshot' | 'subscribe' | 'headPosition'>;

export interface DispatcherOptions {
  db: Database;
  store: LogReader;
  schema: string;
  settings: Pick<WebhookSettings, 'retryBaseMs' | 'retryMaxMs' | 'retryForMs' | 'checkIntervalMs' | 'timeoutMs'>;
  master: MasterKey;
  policy: EndpointPolicy;
  log: Logger;
  /** Milliseconds since the epoch: when deliveries are due and what the expiry check calls now. */
  clock: () => number;
  /** Extra trusted CA certificates for https receivers (tests). */
  ca?: string | Buffer;
}

export interface Dispatcher {
  /** The position of the last event read into the outbox. */
  readonly position: number;
  /** Runs the time-based kinds (plan.expiring, plan.expired) now, or at `nowMs`; returns how many notifications were queued. */
  checkTime(nowMs?: number): Promise<number>;
  /** Resolves once every event committed before the call is read. */
  caughtUp(): Promise<void>;
  /** Looks at the outbox now (a replay was queued). */
  wake(): void;
  stop(): Promise<void>;
}

interface Subscriber {
  webhookId: string;
  events: ReadonlySet<string>;
  options: WebhookOptions;
}

interface Watch {
  state: AccountState;
  subscribers: ReadonlyMap<string, Subscriber>;
}

const LINGER_MS = 50;
/** How often the checkpoint is stored when the events read queue nothing. */
const CHECKPOINT_EVERY_MS = 1000;

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 32);
export const notificationId = (n: Pick<Notice, 'key'>) => `ntf_${digest(n.key)}`;
export const deliveryId = (webhookId: string, ntfId: string) => `dlv_${digest(`${webhookId}\u0000${ntfId}`)}`;

/** The body every attempt sends: {id, type, account_id, created_at, data}. */
export function notificationBody(n: Notice): string {
  return JSON.stringify({ id: notificationId(n), type: n.type, account_id: n.accountId, created_at: n.createdAt, data: n.data });
}

const subscriberOf = (d: EventDataByType['WebhookRegistered']): Subscriber => ({
  webhookId: d.webhookId,
  events: new Set(d.events),
  options: { thresholds: d.thresholds, expiringDays: d.expiringDays, registeredAt: d.registeredAt },
});

const domainEvent = (e: StoredEvent) => ({ type: e.type, data: e.data }) as DomainEvent;

export async function startDispatcher(o: DispatcherOptions): Promise<Dispatcher> {
  const { db, store, schema, log } = o;
  let position = await storage.readCheckpoint(db, schema);
  /** The checkpoint as stored (position may be ahead of it by batches that queued nothing). */
  let persisted = position;
  let persistedAt = Date.now();
  const watches = new Map<string, Watch>();
  let stopping = false;

  /**
   * The account's state just before `beforePosition`: its stream folded with the account
   * decider's evolve, from the ledger's own snapshot when that is older than the position (a busy
   * account is not read from its first event).
   */
  async function loadState(accountId: string, beforePosition: number): Promise<AccountState> {
    const stream = streams.account(accountId);
    const fold = (events: StoredEvent[], from: AccountState) =>
      events.filter((e) => e.position < beforePosition).reduce((s, e) => accountDecider.evolve(s, streamEvent('account', domainEvent(e))), from);
    const snap = await store.readSnapshot(stream);
    const json = snap && (snap.state as { v?: number })?.v === SNAPSHOT_VERSION ? (snap.state as { s: unknown }).s : undefined;
    if (snap && json !== undefined && accountDecider.revive) {
      const [at, ...after] = await store.readStream(stream, snap.revision);
      if (at && at.revision === snap.revision && at.position < beforePosition) return fold(after, accountDecider.revive(json));
    }
    return fold(await store.readStream(stream), accountDecider.initialState());
  }

  async function loadWatches(): Promise<void> {
    watches.clear();
    position = await storage.readCheckpoint(db, schema);
    persisted = position;
    const byAccount = new Map<string, Map<string, Subscriber>>();
    for (const r of await storage.activeRegistrations(db, schema)) {
      const subs = byAccount.get(r.accountId) ?? new Map<string, Subscriber>();
      subs.set(r.webhookId, subscriberOf({ ...r }));
      byAccount.set(r.accountId, subs);
    }
    for (const [accountId, subscribers] of byAccount) watches.set(accountId, { state: await loadState(accountId, position + 1), subscribers });
  }

  // Reading the log and the expiry check take turns, so both see one state.
  let turn: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = turn.then(fn);
    turn = next.catch(() => undefined);
    return next;
  };

  function outboxRows(found: Array<[Subscriber, Notice]>, accountOf: (s: Subscriber) => string): storage.OutboxRow[] {
    const bySubscriber = new Map<Subscriber, Notice[]>();
    for (const [sub, n] of found) bySubscriber.set(sub, [...(bySubscriber.get(sub) ?? []), n]);
    const now = o.clock();
    const rows: storage.OutboxRow[] = [];
    for (const [sub, notices] of bySubscriber) {
      for (const n of mergeNotices(notices)) {
        const ntf = notificationId(n);
        const createdMs = Date.parse(n.createdAt);
        rows.push({
          deliveryId: deliveryId(sub.webhookId, ntf),
          webhookId: sub.webhookId,
          accountId: accountOf(sub),
          notificationId: ntf,
          type: n.type,
          body: notificationBody(n),
          createdMs,
          nextAttemptMs: now,
          deadlineMs: createdMs + o.settings.retryForMs,
        });
      }
    }
    return rows;
  }

  const handle = (events: StoredEvent[]) =>
    serial(async () => {
      const fresh = events.filter((e) => e.position > position);
      if (fresh.length === 0 || stopping) return;
      // Changes of this batch, applied to `watches` once committed (null: the account has no webhook left).
      const staged = new Map<string, Watch | null>();
      const view = (accountId: string): Watch | undefined => (staged.has(accountId) ? (staged.get(accountId) ?? undefined) : watches.get(accountId));
      const found: Array<[Subscriber, Notice]> = [];
      const owner = new Map<Subscriber, string>();
      const registered: storage.RegistryRow[] = [];
      const removed: Array<{ webhookId: string; removedMs: number }> = [];
      for (const e of fresh) {
        const event = domainEvent(e);
        if (event.type === 'WebhookRegistered') {
          const d = event.data;
          const w = view(d.accountId) ?? { state: await loadState(d.accountId, e.position), subscribers: new Map() };
          staged.set(d.accountId, { state: w.state, subscribers: new Map(w.subscribers).set(d.webhookId, subscriberOf(d)) });
          registered.push({ ...d, position: e.position, removedMs: null });
          continue;
        }
        if (event.type === 'WebhookRemoved') {
          const d = event.data;
          const w = view(d.accountId);
          if (w) {
            const subscribers = new Map(w.subscribers);
            subscribers.delete(d.webhookId);
            staged.set(d.accountId, subscribers.size > 0 ? { state: w.state, subscribers } : null);
          }
          removed.push({ webhookId: d.webhookId, removedMs: Date.parse(e.timestamp) });
          continue;
        }
        const accountId = typeof e.data.accountId === 'string' ? e.data.accountId : null;
        const w = accountId === null ? undefined : view(accountId);
        if (!w || accountId === null) continue;
        const before = w.state;
        const after = e.stream === streams.account(accountId) ? accountDecider.evolve(before, streamEvent('account', event)) : before;
        const change = { before, logged: { id: e.id, timestamp: e.timestamp, event }, after };
        for (const sub of w.subscribers.values()) {
          owner.set(sub, accountId);
          for (const kind of NOTIFICATION_KINDS) {
            if (!kind.onEvent || !sub.events.has(kind.type)) continue;
            for (const n of kind.onEvent(change, sub.options)) found.push([sub, n]);
          }
        }
        if (after !== before) staged.set(accountId, { state: after, subscribers: w.subscribers });
      }
      const rows = outboxRows(found, (s) => owner.get(s)!);
      const last = fresh[fresh.length - 1].position;
      // A batch that queues nothing need not move the stored checkpoint at once: read again after
      // a restart, the same events give the same nothing (notices are a pure function of them).
      const quiet = rows.length === 0 && registered.length === 0 && removed.length === 0;
      if (!quiet || Date.now() - persistedAt >= CHECKPOINT_EVERY_MS) {
        try {
          await storage.commitBatch(db, schema, { expected: persisted, position: last, registered, rows, removed });
        } catch (err) {
          if (!(err instanceof storage.CheckpointMoved)) throw err;
          // Another dispatcher got further (the lease was lost meanwhile): start again from where it is.
          log.warn({ position: persisted, actual: err.actual }, 'webhook dispatcher: checkpoint moved by another process; reloading');
          await loadWatches();
          return;
        }
        persisted = last;
        persistedAt = Date.now();
      }
      for (const [accountId, w] of staged) {
        if (w) watches.set(accountId, w);
        else watches.delete(accountId);
      }
      position = last;
      if (rows.length > 0) sender.wake();
    });

  /** Stores the checkpoint of batches that queued nothing (on stop). */
  const persist = () =>
    serial(async () => {
      if (position === persisted) return;
      try {
        await storage.commitBatch(db, schema, { expected: persisted, position, registered: [], rows: [], removed: [] });
      } catch (err) {
        if (!(err instanceof storage.CheckpointMoved)) throw err;
        log.warn({ position: persisted, actual: err.actual }, 'webhook dispatcher: checkpoint moved by another process; reloading');
        await loadWatches();
        return;
      }
      persisted = position;
      persistedAt = Date.now();
    });

  const checkTime = (nowMs?: number) =>
    serial(async () => {
      const now = new Date(nowMs ?? o.clock());
      const found: Array<[Subscriber, Notice]> = [];
      const owner = new Map<Subscriber, string>();
      for (const [accountId, w] of watches) {
        for (const sub of w.subscribers.values()) {
          owner.set(sub, accountId);
          for (const kind of NOTIFICATION_KINDS) {
            if (!kind.onTime || !sub.events.has(kind.type)) continue;
            for (const n of kind.onTime(w.state, now, sub.options)) found.push([sub, n]);
          }
        }
      }
      const queued = await storage.queue(
        db,
        schema,
        outboxRows(found, (s) => owner.get(s)!),
      );
      if (queued > 0) sender.wake();
      return queued;
    });

  const sender = startSender(o);
  await loadWatches();
  const batches = outageReporter(log, 'webhook dispatcher: reading the log');
  const subscription: Subscription = store.subscribe(
    position,
    async (events) => {
      try {
        await handle(events);
        batches.ok();
      } catch (err) {
        batches.failed(err);
        throw err;
      }
    },
    { lingerMs: LINGER_MS },
  );
  log.info({ position }, 'webhook dispatcher running');

  const runCheck = () => {
    checkTime().catch((err) => log.warn({ err: (err as Error).message }, 'webhook expiry check failed'));
  };
  const ticker = setInterval(runCheck, o.settings.checkIntervalMs);
  ticker.unref();
  const flusher = setInterval(() => {
    persist().catch((err) => log.warn({ err: (err as Error).message }, 'webhook dispatcher: checkpoint not stored'));
  }, CHECKPOINT_EVERY_MS);
  flusher.unref();
  // The first check once the log is read, so it sees the accounts as they are now.
  subscription.caughtUp().then(runCheck, () => undefined);

  return {
    get position() {
      return position;
    },
    checkTime,
    async caughtUp() {
      await subscription.caughtUp();
      await serial(async () => undefined);
    },
    wake: () => sender.wake(),
    async stop() {
      stopping = true;
      clearInterval(ticker);
      clearInterval(flusher);
      await subscription.close().catch(() => undefined);
      await turn;
      await persist().catch((err) => log.warn({ err: (err as Error).message }, 'webhook dispatcher: checkpoint not stored'));
      await sender.stop();
    },
  };
}
