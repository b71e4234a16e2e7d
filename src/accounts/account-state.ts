// An account's state as its decider folds it (holds, balances, corrections, keys), and the
// questions asked of it outside the decider: what it may spend, which models it has.
import { Map as ImmutableMap } from 'immutable';
import type { EventDataByType, KeyControls, SubscriptionTerms } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import * as balance from './balance.ts';
import type { Balance, KeySpend } from './balance.ts';
import type { DisputeRecord, PaidLot } from './lots.ts';
import type { CreditLot } from './credits.ts';

export interface Hold {
  amount: number;
  kind: 'chat' | 'image';
  model: string;
  keyId: string;
  requestId: string;
  expiresAt: string;
  /** When it was taken (absent on holds from before that was recorded): its charge counts in the key's period of this time. */
  at?: string;
  /** The gateway process that took it (absent on holds from before processes held leases). */
  process?: string;
}

/** A key's controls as the account knows them, and whose spend it counts with (itself, or the key it was rotated from). */
export interface AccountKey {
  controls: KeyControls;
  pool: string;
}

/** A notice (balance alert, failed top-up) not emailed yet, and which mailer has claimed it until when (null: unclaimed). */
export interface UnmailedNotice {
  id: string;
  claimedBy: string | null;
  claimedUntil: string | null;
}

/** Auto top-up as the account has it set (src/accounts/auto-top-up.ts has its rules). */
export interface AutoTopUp {
  thresholdTokens: number;
  packId: string;
  /** The top-up started and not ended (null: none). */
  pending: string | null;
  /** Why the last top-up failed (null: none since it was set): none starts until it is set again. */
  failed: string | null;
}

export interface AccountState {
  opened: boolean;
  accountId: string;
  name: string;
  subscription: SubscriptionTerms | null;
  quotaUsed: number;
  /** The pool of extra tokens without terms: granted (less withdrawn), and used oldest first. */
  extraGranted: number;
  extraUsed: number;
  /** The grants of extra tokens with terms (expiry, priority, scope), one lot each (src/accounts/credits.ts). */
  credits: CreditLot[];
  /** How many grants of extra tokens the account has had (tokens given back included): the next one's place. */
  extraLots: number;
  /**
   * Open holds by hold id. A persistent map: adding or removing one hold shares the rest, so a
   * busy account with hundreds of calls in flight does not copy all of them on every event.
   */
  holds: ImmutableMap<string, Hold>;
  /** Sum of the open holds' amounts, kept with them. */
  reserved: number;
  /** The call rate's theoretical arrival time (ms since the epoch) after the holds so far. */
  rateTat?: number;
  /**
   * How many ChargeAdjusted events the stream holds. What each charge is billed now lives in the
   * charge log (read per charge), not here, so the state stays small however many are corrected;
   * an adjustment names the count its figures were read at, and is refused if it moved.
   */
  adjustments: number;
  /** The last adjustment (`correctionId|chargeEventId`; '' before any): a writer's figures are current only if it knows which one it is. */
  lastAdjustment: string;
  /** Keys with controls set (KeyControlsSet), by key id. */
  keys: ImmutableMap<string, AccountKey>;
  /**
   * What each key has spent and holds, by pool: a key's own id, or, for a key that replaced
   * another by rotation, that key's pool. Kept for every key, with controls or not, so a limit
   * set mid-period counts the period's spend so far.
   */
  keySpend: ImmutableMap<string, KeySpend>;
  /** Payments (paid lots) by paymentId, and every dispute by its processor id (src/accounts/payment-rules.ts). */
  payments: ImmutableMap<string, PaidLot>;
  disputes: ImmutableMap<string, DisputeRecord>;
  /** The recurring plan's cancellation, while its paid period runs out (src/accounts/cancellation.ts); absent or null: none. */
  cancellation?: Omit<EventDataByType['SubscriptionCancelled'], 'accountId'> | null;
  /** The card saved for charges made without the customer, and auto top-up (src/accounts/auto-top-up.ts); absent or null: none. */
  paymentMethod?: Omit<EventDataByType['PaymentMethodSaved'], 'accountId'> | null;
  autoTopUp?: AutoTopUp | null;
  /** Balance alert thresholds in tokens left, highest first, and the notices not emailed yet (src/accounts/balance-alerts.ts); absent: none. */
  balanceAlerts?: number[];
  unmailed?: UnmailedNotice[];
}

/** A charge's figure after its adjustments so far (as the charge log has it). */
export interface AdjustedCharge {
  /** Billed now: the charge plus every adjustment of it. */
  billed: number;
  /** Sum of the adjustments' quotaDelta (what they returned to or took from the main plan). */
  quotaDelta: number;
  /** The multiplier of the latest adjustment. */
  multiplierMilli: number;
  /** Model stream revision of the correction that decided the figure (-1: before corrections were ordered). */
  rank: number;
}

export const initialAccountState = (): AccountState => ({
  opened: false,
  accountId: '',
  name: '',
  subscription: null,
  quotaUsed: 0,
  extraGranted: 0,
  extraUsed: 0,
  credits: [],
  extraLots: 0,
  holds: ImmutableMap(),
  reserved: 0,
  adjustments: 0,
  lastAdjustment: '',
  keys: ImmutableMap(),
  keySpend: ImmutableMap(),
  payments: ImmutableMap(),
  disputes: ImmutableMap(),
  cancellation: null,
  paymentMethod: null,
  autoTopUp: null,
});

export const reservedTokens = (s: AccountState): number => s.reserved;

/** The state from its JSON form (a snapshot): holds come back as the persistent map. */
export function reviveAccountState(json: unknown): AccountState {
  const j = json as Omit<AccountState, 'holds' | 'keys' | 'keySpend' | 'payments' | 'disputes'> & {
    holds: Record<string, Hold>;
    keys?: Record<string, AccountKey>;
    keySpend?: Record<string, KeySpend>;
    payments?: Record<string, PaidLot>;
    disputes?: Record<string, DisputeRecord>;
  };
  return {
    ...j,
    lastAdjustment: j.lastAdjustment ?? '',
    holds: ImmutableMap(Object.entries(j.holds)),
    keys: ImmutableMap(Object.entries(j.keys ?? {})),
    keySpend: ImmutableMap(Object.entries(j.keySpend ?? {})),
    payments: ImmutableMap(Object.entries(j.payments ?? {})),
    disputes: ImmutableMap(Object.entries(j.disputes ?? {})),
  };
}

/** The account's money as the money rule (balance.ts) reads it. */
export function balanceOf(s: AccountState): Balance {
  return {
    quota: s.subscription?.quota ?? 0,
    quotaUsed: s.quotaUsed,
    extraGranted: s.extraGranted,
    extraUsed: s.extraUsed,
    credits: s.credits,
    reserved: s.reserved,
    startsAt: s.subscription?.startsAt ?? null,
    expiresAt: s.subscription?.expiresAt ?? null,
  };
}

export const isModelEnabled = (s: AccountState, model: string): boolean =>
  !!s.subscription && (s.subscription.models.includes('*') || s.subscription.models.includes(model));

/** Tokens a new hold for `model` may take now (the money rule, on this account's state). */
export const availableTokens = (s: AccountState, now: Date, model: string | null = null): number => balance.availableTokens(balanceOf(s), now, model);

/** Commands on an account that was never opened are refused as unknown. */
export function requireOpen(s: AccountState): void {
  if (!s.opened) throw new DomainError('not_found', 'account not found');
}
