// Releases holds that were never settled, through the account decider, so nothing is lost and
// nothing is charged: holds of a process whose lease lapsed (it died mid-call) within seconds,
// and any hold at its expiry. It also revokes the rotated keys whose grace period is over
// (authentication refuses them from the deadline on), closes lots of credit past their expiry,
// and purges expired idempotency records.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { accountCommand, accountsWithCreditsDue, holdsReadModel as holds } from '../accounts/index.ts';
import { revokeRotatedKeys } from '../keys/index.ts';
import type { Queryable } from '../eventstore/db.ts';
import { forgetOldLeases, leaseTable } from '../eventstore/process-lease.ts';
import { outageReporter, type OutageLog } from '../eventstore/outage.ts';
import { holdEventId } from '../ledger/event-ids.ts';
import { DomainError } from '../ledger/errors.ts';
import { purgeExpiredIdempotency } from '../eventstore/idempotency-store.ts';
import { purgeOldInvalidRequests } from '../eventstore/invalid-request-store.ts';

/** Where the gateway processes' leases are kept (src/eventstore/process-lease.ts). */
export interface LeaseTable {
  db: Queryable;
  schema: string;
  /** This process's own lease, if it has one: alive, whatever its row says. */
  self?: string;
}

export async function sweepExpiredHolds(ledger: Ledger, now = new Date()): Promise<number> {
  let released = 0;
  for (const accountId of await holds.accountsWithExpired(ledger.readModels.db, ledger.rmSchema, now)) {
    const result = await accountCommand(ledger, accountId, { type: 'ExpireHolds', now }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

/** Closes the lots of credit past their expiry: their unused tokens go to breakage. */
export async function sweepExpiredCredits(ledger: Ledger, now = new Date()): Promise<number> {
  let expired = 0;
  for (const accountId of await accountsWithCreditsDue(ledger.readModels.db, ledger.rmSchema, now)) {
    const result = await accountCommand(ledger, accountId, { type: 'ExpireCredits', now }, metadataFor('system:sweeper'));
    expired += result.events.length;
  }
  return expired;
}

/** Releases the open holds of processes whose lease lapsed; a hold whose charge committed is not open, so never released. */
export async function sweepOrphanedHolds(ledger: Ledger, leases: LeaseTable): Promise<number> {
  let released = 0;
  for (const [accountId, processes] of await holds.orphaned(ledger.readModels.db, ledger.rmSchema, leaseTable(leases.schema), leases.self)) {
    const result = await accountCommand(ledger, accountId, { type: 'ReleaseOrphaned', processes }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

/**
 * Releases this process's open holds whose calls it no longer runs (a release lost in an outage,
 * past the retry queue's bound), once they are older than `olderThanMs`. A call still running is
 * left alone, however long it takes.
 */
export async function sweepStaleHolds(
  ledger: Ledger,
  own: { processId: string; isInFlight: (holdId: string) => boolean; olderThanMs: number },
): Promise<number> {
  let released = 0;
  for (const h of await holds.ofProcess(ledger.readModels.db, ledger.rmSchema, own.processId, own.olderThanMs)) {
    if (own.isInFlight(h.holdId)) continue;
    try {
      await accountCommand(ledger, h.accountId, { type: 'Release', holdId: h.holdId, reason: 'other' }, metadataFor('system:sweeper'), (_e, i) =>
        holdEventId(h.holdId, 'release', i),
      );
      released++;
    } catch (err) {
      // Closed meanwhile (the read models lag the log): nothing to release.
      if (!(err instanceof DomainError && err.code === 'conflict')) throw err;
    }
  }
  return released;
}

export function startSweeper(
  ledger: Ledger,
  opts: {
    intervalMs: number;
    leases?: LeaseTable;
    log: OutageLog;
    extra?: () => Promise<unknown>;
    /** Idempotency records older than this are purged (with `leases`' table). */
    idempotencyTtlS?: number;
  },
) {
  let running = false;
  const outage = outageReporter(opts.log, 'hold sweep');
  /** Skipped ticks while the database is out of reach (the backoff). */
  let resumeAt = 0;
  const sweep = async () => {
    // One sweep at a time: a slow one is not overtaken by the next tick.
    if (running || Date.now() < resumeAt) return;
    running = true;
    try {
      if (opts.leases) {
        await sweepOrphanedHolds(ledger, opts.leases);
        await forgetOldLeases(opts.leases.db, opts.leases.schema);
        if (opts.idempotencyTtlS !== undefined) await purgeExpiredIdempotency(opts.leases.db, opts.leases.schema, opts.idempotencyTtlS);
        await purgeOldInvalidRequests(opts.leases.db, opts.leases.schema);
      }
      await sweepExpiredHolds(ledger);
      await revokeRotatedKeys(ledger);
      await opts.extra?.();
      // Last: a lot's expiry can wait a sweep; the holds above cannot.
      await sweepExpiredCredits(ledger);
      outage.ok();
    } catch (err) {
      resumeAt = Date.now() + outage.failed(err);
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), opts.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), sweep };
}
