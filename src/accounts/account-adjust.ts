// Adjusting charges (a correction re-pricing them, a failed call's charge voided): the account's
// part. One charge at a time (Adjust), or a page of one account's charges in one command
// (AdjustPage: one decision, one append), each charge's adjustment decided against the state the
// ones before it leave, so a page decides exactly what its charges one by one would.
import { definedOnly, type DomainEvent, type EventDataByType, type StreamEvents } from '../ledger/events.ts';
import { DomainError, requireTokenAmount } from '../ledger/errors.ts';
import * as balance from './balance.ts';
import { balanceOf, requireOpen, type AccountState, type AdjustedCharge } from './account-state.ts';
import { evolveCredited, returnable, termedSplit, withExtraMoved } from './credit-rules.ts';

/** One charge re-priced to `billedCorrected` (see AdjustCommand): the adjustment's terms, less what the account decides. */
export interface ChargeToAdjust extends Omit<
  EventDataByType['ChargeAdjusted'],
  'accountId' | 'delta' | 'quotaDelta' | 'extraDelta' | 'extraCredited' | 'credits'
> {
  /** What the charge took from the main plan when it was charged. */
  fromQuotaBefore: number;
  /** The charge's figure now; absent: never adjusted. */
  current?: AdjustedCharge;
}

/** Where the figures of the charges were read: the account's count of adjustments and its last one then. */
interface ReadAt {
  /** The account's count of adjustments when `current` was read. */
  adjustmentsSeen: number;
  /** The account's last adjustment then (`correctionId|chargeEventId`; '' or absent: none): with the count, two writers interleaving cannot both match. */
  lastAdjustment?: string;
}

/**
 * Re-price one charge to `billedCorrected`. billedBefore, multiplierMilliBefore and fromQuotaBefore
 * are the charge as it was charged (its event); `current` is what is billed for it now (the charge
 * plus earlier adjustments) as the charge log read it, at the account's `adjustmentsSeen`-th
 * adjustment: if the account has had another adjustment since, the figure may be stale and the
 * command is refused (a conflict: read again). The adjustment is the difference from it.
 * With `correctionRevision`, a correction older than the one that last decided the charge is
 * refused (nothing appended): a later-applied older correction never overrides a newer one.
 */
export interface AdjustCommand extends ChargeToAdjust, ReadAt {
  type: 'Adjust';
}

/**
 * A page of one account's charges re-priced in one command: its figures were all read at the
 * account's `adjustmentsSeen`-th adjustment (refused as a whole if the account moved since), and
 * each charge is decided as an Adjust would be, after the ones before it in the page.
 */
export interface AdjustPageCommand extends ReadAt {
  type: 'AdjustPage';
  charges: ChargeToAdjust[];
}

function requireReadAtNow(c: ReadAt, s: AccountState): void {
  requireOpen(s);
  if (c.adjustmentsSeen !== s.adjustments || (c.lastAdjustment ?? '') !== s.lastAdjustment)
    throw new DomainError('conflict', `the account has ${s.adjustments} adjustments, not ${c.adjustmentsSeen}: read the charge's figure again`);
}

export function decideAdjust(c: AdjustCommand, s: AccountState): StreamEvents['account'][] {
  requireReadAtNow(c, s);
  const e = adjustmentOf(c, s);
  return e ? [e] : [];
}

export function decideAdjustPage(c: AdjustPageCommand, s: AccountState): StreamEvents['account'][] {
  requireReadAtNow(c, s);
  const events: StreamEvents['account'][] = [];
  let state = s;
  for (const charge of c.charges) {
    const e = adjustmentOf(charge, state);
    if (!e) continue;
    events.push(e);
    state = evolveAdjusted(state, e.data);
  }
  return events;
}

/** The charge's adjustment against the account as it is, or null when it needs none. */
function adjustmentOf(c: ChargeToAdjust, s: AccountState): Extract<DomainEvent, { type: 'ChargeAdjusted' }> | null {
  requireTokenAmount(c.billedCorrected, 'billed_corrected', { allowZero: true });
  const now = c.current;
  // A newer correction (or this one) already decided this charge.
  if (now && c.correctionRevision !== undefined && c.correctionRevision <= now.rank) return null;
  const billedNow = now?.billed ?? c.billedBefore;
  const delta = c.billedCorrected - billedNow;
  if (delta === 0) return null;
  // A refund goes back to the main plan up to what that charge (net of its adjustments so far)
  // took from it; an extra charge is taken like any charge: main plan first, then extra tokens.
  const fromQuotaNow = Math.max(0, c.fromQuotaBefore + (now?.quotaDelta ?? 0));
  const quotaDelta = delta < 0 ? -Math.min(-delta, fromQuotaNow, s.quotaUsed) : Math.min(delta, balance.mainRemaining(balanceOf(s)));
  // The rest of a refund goes back to extra tokens used; what they cannot take (the charge was
  // made on a plan period since renewed) is credited as extra tokens, never a negative use.
  const rest = delta - quotaDelta;
  const extraDelta = rest < 0 ? -Math.min(-rest, returnable(s)) : rest;
  const extraCredited = rest < 0 ? -rest + extraDelta : 0;
  const credits = termedSplit(s, extraDelta, c.model);
  return {
    type: 'ChargeAdjusted',
    data: {
      accountId: s.accountId,
      correctionId: c.correctionId,
      chargeEventId: c.chargeEventId,
      requestId: c.requestId,
      model: c.model,
      chargedAt: c.chargedAt,
      billedBefore: billedNow,
      billedCorrected: c.billedCorrected,
      multiplierMilliBefore: now?.multiplierMilli ?? c.multiplierMilliBefore,
      multiplierMilliCorrected: c.multiplierMilliCorrected,
      delta,
      quotaDelta,
      extraDelta,
      ...definedOnly({
        credits: credits.length ? credits : undefined,
        extraCredited: extraCredited || undefined,
        keyId: c.keyId,
        correctionRevision: c.correctionRevision,
        cacheReadMilliCorrected: c.cacheReadMilliCorrected,
        cacheWriteMilliCorrected: c.cacheWriteMilliCorrected,
        tokensPerImageCorrected: c.tokensPerImageCorrected,
      }),
    },
  };
}

export function evolveAdjusted(s: AccountState, d: EventDataByType['ChargeAdjusted']): AccountState {
  const moved = evolveCredited({ ...s, ...withExtraMoved(s, d.extraDelta, d.credits) }, d.extraCredited ?? 0);
  return {
    ...moved,
    quotaUsed: s.quotaUsed + d.quotaDelta,
    adjustments: s.adjustments + 1,
    lastAdjustment: `${d.correctionId}|${d.chargeEventId}`,
  };
}
