// The webhook sender: takes each webhook's oldest pending delivery from the outbox (storage.ts),
// signs and posts it, and records the attempt: delivered on the receiver's 2xx, otherwise
// retried with exponential backoff and jitter until its deadline, then marked failed. One
// delivery per webhook in flight, so each webhook receives its notifications in order.
import type { Logger } from 'pino';
import type { Database } from '../eventstore/db.ts';
import { outageReporter } from '../eventstore/outage.ts';
import type { WebhookSettings } from '../config.ts';
import type { MasterKey } from './signing.ts';
import { signatureHeader } from './signing.ts';
import { postNotification } from './post.ts';
import type { EndpointPolicy } from './endpoint.ts';
import * as storage from './storage.ts';

export interface SenderOptions {
  db: Database;
  schema: string;
  settings: Pick<WebhookSettings, 'retryBaseMs' | 'retryMaxMs' | 'timeoutMs'>;
  master: MasterKey;
  policy: EndpointPolicy;
  log: Logger;
  clock: () => number;
  ca?: string | Buffer;
}

export interface Sender {
  /** Looks at the outbox now (something was queued). */
  wake(): void;
  /** Aborts the attempts in flight (they stay pending) and ends the loop. */
  stop(): Promise<void>;
}

/** Deliveries sent at the same time (each to a different webhook). */
const MAX_PARALLEL = 16;
/** How often the outbox is looked at when nothing wakes the sender. */
const SENDER_POLL_MS = 1000;

/** Wakes a loop that sleeps; a wake while it is busy is not lost. */
function waker() {
  let pending = false;
  let resolve: (() => void) | null = null;
  let timer: NodeJS.Timeout | null = null;
  return {
    wake() {
      pending = true;
      resolve?.();
    },
    sleep(ms: number): Promise<void> {
      if (pending) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise<void>((r) => {
        resolve = () => {
          if (timer) clearTimeout(timer);
          resolve = null;
          pending = false;
          r();
        };
        timer = setTimeout(() => resolve?.(), Math.max(5, ms));
      });
    },
  };
}

export function startSender(o: SenderOptions): Sender {
  const { db, schema, log } = o;
  let stopping = false;
  const sender = waker();
  const inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();

  function backoffMs(attempts: number): number {
    const exp = o.settings.retryBaseMs * 2 ** Math.min(30, attempts - 1);
    return Math.round(Math.min(o.settings.retryMaxMs, exp) * (0.8 + Math.random() * 0.4));
  }

  async function attempt(h: storage.HeadRow, signal: AbortSignal): Promise<storage.AttemptOutcome | null> {
    let status: number | null = null;
    let error: string | null;
    if (h.signingKeyId !== o.master.keyId) {
      // Signing with another master secret would only produce signatures nobody can verify.
      error =
        'not sent: this gateway has another webhook master secret than the one the webhook was registered with (set the same TOLLGATE_WEBHOOK_SECRET everywhere)';
    } else {
      const headers = {
        'Tollgate-Webhook-Id': h.webhookId,
        'Tollgate-Delivery-Id': h.deliveryId,
        'Tollgate-Notification-Type': h.type,
        'Tollgate-Attempt': String(h.attempts + 1),
        // The real time, whatever the dispatcher's clock: receivers check it against theirs.
        'Tollgate-Signature': signatureHeader(o.master.secretFor(h.webhookId), h.body, Date.now() / 1000),
      };
      const res = await postNotification(h.url, h.body, headers, { policy: o.policy, timeoutMs: o.settings.timeoutMs, signal, ca: o.ca });
      if (signal.aborted) return null; // shutting down: still pending, sent again by whoever leads next
      status = res.status;
      error = res.error;
    }
    const at = o.clock();
    if (error === null) {
      log.debug({ webhookId: h.webhookId, deliveryId: h.deliveryId, attempt: h.attempts + 1, status }, 'webhook delivered');
      return {
        deliveryId: h.deliveryId,
        attemptsBefore: h.attempts,
        atMs: at,
        status: 'delivered',
        responseStatus: status,
        error: null,
        nextAttemptMs: h.nextAttemptMs,
      };
    }
    const next = at + backoffMs(h.attempts + 1);
    const giveUp = next > h.deadlineMs;
    log.warn(
      { webhookId: h.webhookId, deliveryId: h.deliveryId, attempt: h.attempts + 1, status, error, giveUp },
      giveUp ? 'webhook delivery failed; giving up' : 'webhook delivery failed; will retry',
    );
    return {
      deliveryId: h.deliveryId,
      attemptsBefore: h.attempts,
      atMs: at,
      status: giveUp ? 'failed' : 'pending',
      responseStatus: status,
      error,
      nextAttemptMs: giveUp ? h.nextAttemptMs : next,
    };
  }

  function send(h: storage.HeadRow): void {
    const abort = new AbortController();
    const done = (async () => {
      try {
        const outcome = await attempt(h, abort.signal);
        if (outcome) await storage.recordAttempt(db, schema, outcome);
      } catch (err) {
        log.warn({ webhookId: h.webhookId, deliveryId: h.deliveryId, err: (err as Error).message }, 'webhook delivery could not be recorded');
      } finally {
        inFlight.delete(h.webhookId);
        sender.wake();
      }
    })();
    inFlight.set(h.webhookId, { abort, done });
  }

  const outbox = outageReporter(log, 'webhook sender: reading the outbox');
  const sending = (async () => {
    while (!stopping) {
      let waitMs = SENDER_POLL_MS;
      try {
        const now = o.clock();
        for (const h of await storage.pendingHeads(db, schema, [...inFlight.keys()], 200)) {
          if (stopping) break;
          if (h.nextAttemptMs > now) {
            waitMs = Math.min(waitMs, h.nextAttemptMs - now);
            continue;
          }
          if (inFlight.size < MAX_PARALLEL) send(h);
        }
        outbox.ok();
      } catch (err) {
        if (!stopping) waitMs = Math.max(waitMs, outbox.failed(err));
      }
      if (!stopping) await sender.sleep(waitMs);
    }
  })();

  return {
    wake: () => sender.wake(),
    async stop() {
      stopping = true;
      for (const f of inFlight.values()) f.abort.abort();
      sender.wake();
      await sending;
      await Promise.all([...inFlight.values()].map((f) => f.done));
    },
  };
}
