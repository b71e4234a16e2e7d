// Releases holds that were never settled, through the account decider, so nothing is lost and
// nothing is charged: holds of a process whose lease lapsed (it died mid-call) within seconds,
// and any hold at its expiry. It also revokes the rotated keys whose grace period is over
// (authentication refuses them from the deadline on), and purges expired idempotency records.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import * as holds from '../../projections/holds.ts';
import { revokeRotatedKeys } from '../admin/key-controls.ts';
import type { Queryable } from '../eventstore/db.ts';
import { forgetOldLeases, leaseTable } from '../eventstore/process-lease.ts';
import { purgeExpiredIdempotency } from '../eventstore/idempotency-store.ts';

/** Where the gateway processes' leases are kept (src/eventstore/process-lease.ts). */
export interface LeaseTable {
  db: Queryable;
  schema: string;
}

export async function sweepExpiredHolds(ledger: Ledger, now = new Date()): Promise<number> {
  let released = 0;
  for (const accountId of await holds.accountsWithExpired(ledger.readModels.db, ledger.rmSchema, now)) {
    ledger.forgetAccount(accountId);
    const result = await ledger.account(accountId, { type: 'ExpireHolds', now }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

/** Releases the open holds of processes whose lease lapsed; a hold whose charge committed is not open, so never released. */
export async function sweepOrphanedHolds(ledger: Ledger, leases: LeaseTable): Promise<number> {
  let released = 0;
  for (const [accountId, processes] of await holds.orphaned(ledger.readModels.db, ledger.rmSchema, leaseTable(leases.schema))) {
    ledger.forgetAccount(accountId);
    const result = await ledger.account(accountId, { type: 'ReleaseOrphaned', processes }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

export function startSweeper(
  ledger: Ledger,
  opts: { intervalMs: number; leases?: LeaseTable; /** Idempotency records older than this are purged (with `leases`' table). */ idempotencyTtlS?: number },
  onError: (e: Error) => void = () => undefined,
) {
  let running = false;
  const sweep = async () => {
    // One sweep at a time: a slow one is not overtaken by the next tick.
    if (running) return;
    running = true;
    try {
      if (opts.leases) {
        await sweepOrphanedHolds(ledger, opts.leases).catch(onError);
        await forgetOldLeases(opts.leases.db, opts.leases.schema).catch(onError);
        if (opts.idempotencyTtlS !== undefined) await purgeExpiredIdempotency(opts.leases.db, opts.leases.schema, opts.idempotencyTtlS).catch(onError);
      }
      await sweepExpiredHolds(ledger).catch(onError);
      await revokeRotatedKeys(ledger).catch(onError);
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), opts.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), sweep };
}
