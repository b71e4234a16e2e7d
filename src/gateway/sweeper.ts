// Releases holds that were never settled (a crash mid-call): they expire and are released
// through the account decider, so nothing is lost and nothing is charged.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';

export async function sweepExpiredHolds(ledger: Ledger, now = new Date()): Promise<number> {
  const rows = await ledger.db.query<{ account_id: string }>(
    `SELECT DISTINCT account_id FROM "${ledger.rmSchema}".holds WHERE expires_at <= $1`, [now.toISOString()]);
  let released = 0;
  for (const r of rows) {
    ledger.handler.forget(`account-${r.account_id}`);
    const result = await ledger.account(r.account_id, { type: 'ExpireHolds', now }, metadataFor('system:sweeper'));
    released += result.events.length;
  }
  return released;
}

export function startSweeper(ledger: Ledger, intervalMs = 30_000, onError: (e: Error) => void = () => undefined) {
  const timer = setInterval(() => { sweepExpiredHolds(ledger).catch(onError); }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
