// Releases holds that were never settled (a crash mid-call): they expire and are released
// through the account decider, so nothing is lost and nothing is charged. It also revokes the
// rotated keys whose grace period is over (authentication refuses them from the deadline on).
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import * as holds from '../../projections/holds.ts';
import { revokeRotatedKeys } from '../admin/key-controls.ts';

export async function sweepExpiredHolds(ledger: Ledger, now = new Date()): Promise<number> {
  let released = 0;
  for (const accountId of await holds.accountsWithExpired(ledger.readModels.db, ledger.rmSchema, now)) {
    ledger.forgetAccount(accountId);
    const result = await ledger.account(accountId, { type: 'ExpireHolds', now }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

export function startSweeper(ledger: Ledger, intervalMs = 30_000, onError: (e: Error) => void = () => undefined) {
  const timer = setInterval(() => {
    sweepExpiredHolds(ledger).catch(onError);
    revokeRotatedKeys(ledger).catch(onError);
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
