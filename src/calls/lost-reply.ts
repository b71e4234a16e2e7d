// Voids a charge whose call failed: its append reached the database before the connection died,
// but the gateway could not learn that within the call's bound and answered 503. The caller got
// an error, so the account must end as if uncharged (src/calls/charge-void.ts).
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams, type EventDataByType } from '../ledger/events.ts';
import type { AdjustedCharge } from '../accounts/index.ts';
import { DomainError } from '../ledger/errors.ts';
import { VOID_RANK, voidCorrectionId, voidEventId } from './charge-void.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import type { StoredEvent } from '../eventstore/port.ts';
import { accountCommand, accountState } from '../accounts/index.ts';

type Charge = EventDataByType['ChatCharged'] | EventDataByType['ImageCharged'];

/** Tries again when a correction adjusted the account between reading its state and the void. */
const CONFLICT_RETRIES = 5;

/** What the charge is billed now, from the account's own log (absent: never adjusted). */
async function currentFigure(ledger: Ledger, accountId: string, charge: StoredEvent): Promise<AdjustedCharge | undefined> {
  const adjustments = (await ledger.events.readStream(streams.account(accountId)))
    .filter((e) => e.type === 'ChargeAdjusted')
    .map((e) => e.data as EventDataByType['ChargeAdjusted'])
    .filter((a) => a.chargeEventId === charge.id);
  if (adjustments.length === 0) return undefined;
  const last = adjustments[adjustments.length - 1];
  return {
    billed: last.billedCorrected,
    quotaDelta: adjustments.reduce((sum, a) => sum + a.quotaDelta, 0),
    multiplierMilli: last.multiplierMilliCorrected,
    rank: Math.max(-1, ...adjustments.map((a) => a.correctionRevision ?? -1)),
  };
}

/**
 * Appends the void of `charge` (the charge event of hold `holdId`). Idempotent: a charge already
 * voided (by this process, another gateway, or before a restart) is left alone. True when this
 * call appended it.
 */
export async function voidLostCharge(ledger: Ledger, holdId: string, charge: StoredEvent): Promise<boolean> {
  const d = charge.data as unknown as Charge;
  for (let attempt = 0; ; attempt++) {
    const s = await accountState(ledger, d.accountId);
    const current = s.adjustments > 0 ? await currentFigure(ledger, d.accountId, charge) : undefined;
    try {
      const r = await accountCommand(
        ledger,
        d.accountId,
        {
          type: 'Adjust',
          correctionId: voidCorrectionId(holdId),
          correctionRevision: VOID_RANK,
          chargeEventId: charge.id,
          requestId: d.requestId,
          model: d.model,
          chargedAt: charge.timestamp,
          billedBefore: d.billed,
          billedCorrected: 0,
          multiplierMilliBefore: d.multiplierMilli,
          multiplierMilliCorrected: d.multiplierMilli,
          fromQuotaBefore: d.fromQuota,
          keyId: d.keyId,
          adjustmentsSeen: s.adjustments,
          lastAdjustment: s.lastAdjustment,
          ...(current ? { current } : {}),
        },
        metadataFor('system:gateway', d.requestId),
        () => voidEventId(holdId),
      );
      return r.events.length > 0;
    } catch (err) {
      if (err instanceof DuplicateEventError) return false;
      if (err instanceof DomainError && err.code === 'conflict' && attempt < CONFLICT_RETRIES) {
        continue;
      }
      throw err;
    }
  }
}
