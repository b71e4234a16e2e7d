// Holds whose release could not be written while the database was out of reach (or whose charge
// has an unknown outcome: the connection died after COMMIT was sent). They are released when the
// database is back, through the account decider, so a hold already closed (charged, released) is
// left alone; a charge that committed although its call failed is voided (lost-reply.ts). Kept in
// memory and bounded: past the bound, or if this process dies, the sweeper releases the holds
// (of calls no longer in flight, or of a process whose lease lapsed).
import type { Ledger } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import type { FailedChannel, ReleaseReason } from '../ledger/events.ts';
import { holdEventId } from '../ledger/event-ids.ts';
import { DomainError } from '../ledger/errors.ts';
import type { EventMetadata, StoredEvent } from '../eventstore/port.ts';
import { isDatabaseUnavailable } from '../eventstore/db.ts';
import { outageReporter, type OutageLog } from '../eventstore/outage.ts';
import { voidLostCharge } from './lost-reply.ts';
import { accountCommand } from '../accounts/index.ts';

export interface UnreleasedHold {
  holdId: string;
  accountId: string;
  metadata: EventMetadata;
  reason: ReleaseReason;
  failovers: FailedChannel[];
  /** Set when the hold's charge may have committed: the log is read for it before releasing. */
  chargeMayHaveCommitted?: boolean;
}

export interface RetryLog extends OutageLog {
  error(obj: object, msg: string): void;
}

/** The committed event with `id`, read from the log (the account's stream where the store cannot look an id up). */
export async function findEvent(ledger: Ledger, accountId: string, id: string): Promise<StoredEvent | null> {
  if (ledger.events.findEvent) return ledger.events.findEvent(id);
  return (await ledger.events.readStream(streams.account(accountId))).find((e) => e.id === id) ?? null;
}

/** A hold no longer open (charged, released, or never committed): nothing left to release. */
const holdClosed = (err: unknown) => err instanceof DomainError && err.code === 'conflict';

export function createReleaseRetry(ledger: Ledger, opts: { max: number; log: RetryLog }) {
  const queue = new Map<string, UnreleasedHold>();
  const outage = outageReporter(opts.log, 'releasing holds left by the outage');
  let timer: NodeJS.Timeout | null = null;
  let running = false;
  let full = false;
  let stopped = false;
  /** Charges voided after the fact (the last resort: the charge committed in time, its answer was lost). */
  let voids = 0;

  const schedule = (ms: number) => {
    if (timer || stopped) return;
    timer = setTimeout(() => {
      timer = null;
      void run();
    }, ms);
    timer.unref();
  };

  /** A charge that committed although its call failed (its reply was lost): voided, so the caller who got an error is not charged. */
  async function voidIfCharged(h: UnreleasedHold): Promise<boolean> {
    const charge = await findEvent(ledger, h.accountId, holdEventId(h.holdId, 'charge'));
    if (!charge) return false;
    const voided = await voidLostCharge(ledger, h.holdId, charge);
    if (voided) voids++;
    opts.log.warn({ holdId: h.holdId, requestId: h.metadata.correlationId, voided }, 'charge committed although its call failed (its reply was lost): voided');
    return true;
  }

  /** Settles one queued hold; throws only while the database is out of reach. */
  async function settle(h: UnreleasedHold): Promise<void> {
    if (h.chargeMayHaveCommitted && (await voidIfCharged(h))) return;
    try {
      await accountCommand(ledger, h.accountId, { type: 'Release', holdId: h.holdId, reason: h.reason, failovers: h.failovers }, h.metadata, (_e, i) =>
        holdEventId(h.holdId, 'release', i),
      );
    } catch (err) {
      if (!holdClosed(err)) throw err;
      // The charge's own append, held up on a stalled link, may have committed after the read above.
      if (h.chargeMayHaveCommitted) await voidIfCharged(h);
    }
  }

  async function run(): Promise<void> {
    if (running) return;
    running = true;
    try {
      for (const h of [...queue.values()]) {
        try {
          await settle(h);
          // Queued again meanwhile (its charge failed too): that entry is settled on the next pass.
          if (queue.get(h.holdId) === h) queue.delete(h.holdId);
        } catch (err) {
          if (isDatabaseUnavailable(err)) {
            schedule(outage.failed(err));
            return;
          }
          // Not the database's absence: retrying will not help; the sweeper has the last word.
          queue.delete(h.holdId);
          opts.log.error({ holdId: h.holdId, err: (err as Error).message }, 'a hold could not be released after the outage');
        }
      }
      outage.ok();
      full = false;
    } finally {
      running = false;
      if (queue.size > 0) schedule(0);
    }
  }

  return {
    /** Queues a hold to release; false when the queue is full (the sweeper will release it). */
    add(h: UnreleasedHold): boolean {
      // A hold whose charge may have committed is kept past the bound: only this process can void
      // that charge (the sweeper releases holds, it cannot know the call failed). There are at
      // most as many as calls were settling when the connection died.
      if (!queue.has(h.holdId) && queue.size >= opts.max && !h.chargeMayHaveCommitted) {
        if (!full) opts.log.warn({ max: opts.max }, 'release retry queue full: further holds are left to the sweeper');
        full = true;
        return false;
      }
      // Queued twice (its hold's append and its charge both failed): the charge is looked for if either says so.
      const before = queue.get(h.holdId);
      queue.set(h.holdId, before?.chargeMayHaveCommitted ? { ...h, chargeMayHaveCommitted: true } : h);
      schedule(250);
      return true;
    },
    has: (holdId: string) => queue.has(holdId),
    /** How many charges this process voided because their calls had failed (a metric). */
    voidedCount: () => voids,
    get size() {
      return queue.size;
    },
    /** Tries every queued hold now (tests, shutdown). */
    flush: () => run(),
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

export type ReleaseRetry = ReturnType<typeof createReleaseRetry>;
