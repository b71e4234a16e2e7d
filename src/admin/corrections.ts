// Retroactive multiplier corrections. A correction never edits a charge: it appends the
// correction to the model's stream and one compensating ChargeAdjusted per affected charge, with
// event ids derived from (correction, charge), so applying it twice, or again after an
// interruption, appends each adjustment exactly once.
import { createHash } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { modelDecider } from '../ledger/model.ts';
import { streams } from '../ledger/events.ts';
import { chatCharge, imageCharge } from '../ledger/pricing.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import type { ChargeRow } from '../../projections/read-models.ts';

export interface CorrectionInput { modelId: string; from: Date; to: Date; multiplierMilli: number; reason: string }

export interface AffectedCharge { eventId: string; requestId: string; at: string; billed: number; corrected: number; difference: number; multiplierMilli: number; fromQuota: number }

export interface AccountReconciliation { accountId: string; charges: number; billed: number; corrected: number; difference: number; items: AffectedCharge[] }

export interface ReconciliationReport {
  correctionId: string; modelId: string; from: string; to: string; multiplierMilli: number;
  accounts: AccountReconciliation[];
  totals: { charges: number; billed: number; corrected: number; difference: number };
}

/** Same correction, same id: the key to applying it exactly once. */
export function correctionIdOf(c: CorrectionInput): string {
  return uuidFrom(`correction|${c.modelId}|${c.from.toISOString()}|${c.to.toISOString()}|${c.multiplierMilli}`);
}

function uuidFrom(text: string): string {
  const h = createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export const adjustmentEventId = (correctionId: string, chargeEventId: string) => uuidFrom(`adjustment|${correctionId}|${chargeEventId}`);

function repriced(row: ChargeRow, milli: number): number {
  return row.kind === 'image' ? imageCharge(milli, Number(row.images), Number(row.tokens_per_image)) : chatCharge(Number(row.prompt_tokens), Number(row.completion_tokens), milli);
}

function checkInput(c: CorrectionInput): void {
  if (!(c.from instanceof Date) || Number.isNaN(c.from.getTime())) throw invalid("'from' must be an ISO 8601 time", { param: 'from' });
  if (!(c.to instanceof Date) || Number.isNaN(c.to.getTime())) throw invalid("'to' must be an ISO 8601 time", { param: 'to' });
  if (c.from.getTime() >= c.to.getTime()) throw invalid('correction window is inverted or empty: from must be before to', { param: 'from' });
  if (!Number.isSafeInteger(c.multiplierMilli) || c.multiplierMilli < 1) throw invalid('multiplier must be greater than 0', { param: 'multiplier' });
}

/** The reconciliation report: every charge of the model in [from, to), as billed and as corrected. */
export async function dryRunCorrection(ledger: Ledger, c: CorrectionInput): Promise<ReconciliationReport> {
  checkInput(c);
  const { state } = await ledger.handler.state(modelDecider as never, streams.model(c.modelId));
  if (!(state as { exists: boolean }).exists) throw new DomainError('not_found', `model ${c.modelId} not found`);
  await ledger.caughtUp();
  const rows = await ledger.db.query<ChargeRow>(
    `SELECT * FROM "${ledger.rmSchema}".charges WHERE model = $1 AND kind IN ('chat', 'image') AND at >= $2 AND at < $3 ORDER BY account_id, position`,
    [c.modelId, c.from.toISOString(), c.to.toISOString()]);
  const byAccount = new Map<string, AccountReconciliation>();
  for (const r of rows) {
    const corrected = repriced(r, c.multiplierMilli);
    const item: AffectedCharge = { eventId: r.event_id, requestId: r.request_id, at: new Date(r.at).toISOString(), billed: Number(r.billed), corrected, difference: corrected - Number(r.billed), multiplierMilli: r.multiplier_milli, fromQuota: Number(r.from_quota) };
    let a = byAccount.get(r.account_id);
    if (!a) byAccount.set(r.account_id, a = { accountId: r.account_id, charges: 0, billed: 0, corrected: 0, difference: 0, items: [] });
    a.charges++; a.billed += item.billed; a.corrected += item.corrected; a.difference += item.difference; a.items.push(item);
  }
  const accounts = [...byAccount.values()];
  const sum = (k: 'charges' | 'billed' | 'corrected' | 'difference') => accounts.reduce((n, a) => n + a[k], 0);
  return {
    correctionId: correctionIdOf(c), modelId: c.modelId, from: c.from.toISOString(), to: c.to.toISOString(), multiplierMilli: c.multiplierMilli,
    accounts, totals: { charges: sum('charges'), billed: sum('billed'), corrected: sum('corrected'), difference: sum('difference') },
  };
}

/** Appends the correction and its adjustments; safe to run again. Returns the report and how many adjustments were new. */
export async function applyCorrection(ledger: Ledger, c: CorrectionInput, actor: string): Promise<{ report: ReconciliationReport; appended: number; alreadyApplied: number }> {
  const report = await dryRunCorrection(ledger, c);
  const md = metadataFor(actor, report.correctionId);
  await ledger.handler.handle(modelDecider, streams.model(c.modelId), { type: 'Correct', correctionId: report.correctionId, from: c.from, to: c.to, multiplierMilli: c.multiplierMilli, reason: c.reason, now: new Date() }, md);
  let appended = 0;
  let alreadyApplied = 0;
  for (const account of report.accounts) {
    for (const item of account.items) {
      if (item.difference === 0) continue;
      try {
        const r = await ledger.account(account.accountId, {
          type: 'Adjust', correctionId: report.correctionId, chargeEventId: item.eventId, requestId: item.requestId, model: c.modelId,
          chargedAt: item.at, billedBefore: item.billed, billedCorrected: item.corrected, multiplierMilliBefore: item.multiplierMilli,
          multiplierMilliCorrected: c.multiplierMilli, fromQuotaBefore: item.fromQuota,
        }, md, () => adjustmentEventId(report.correctionId, item.eventId));
        appended += r.events.length;
      } catch (err) {
        if (!(err instanceof DuplicateEventError)) throw err;
        alreadyApplied++;
      }
    }
  }
  await ledger.caughtUp();
  return { report, appended, alreadyApplied };
}
