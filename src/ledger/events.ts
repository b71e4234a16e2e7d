// The event catalogue as TypeScript types. schemas/events/*.json is the source of truth at run
// time (ajv checks every append); these types keep the deciders honest at compile time.

import type { MemberEvents } from './member-events.ts';
import type { CostPrices, UpstreamBillLine } from './cost-events.ts';

export interface PlanTerms {
  planId: string;
  name: string;
  quota: number;
  validityDays: number;
  requestsPerMinute: number;
  /** Enabled model ids; ['*'] enables every model. */
  models: string[];
}

export interface SubscriptionTerms {
  accountId: string;
  planId: string;
  planName: string;
  quota: number;
  requestsPerMinute: number;
  models: string[];
  startsAt: string;
  expiresAt: string;
  /** The payment this period was bought with (absent: granted by the operator, free). */
  paymentId?: string;
}

interface ChargeCommon {
  accountId: string;
  holdId: string;
  requestId: string;
  keyId: string;
  model: string;
  multiplierMilli: number;
  /** The hold this charge settles (the charge exceeds it only if the upstream counted more than the cap and the account still covers it). */
  reserved: number;
  billed: number;
  fromQuota: number;
  fromExtra: number;
}

export type ChatApi = 'chat.completions' | 'messages' | 'responses';

/** A channel tried and failed before the one that answered (or before the call gave up). */
export interface FailedChannel {
  channel: string;
  error: string;
  upstreamModel?: string;
}

/** Which upstream answered a call, for reconciliation against the provider's own usage export. */
export interface UpstreamTrail {
  channel?: string;
  /** The model name the channel's upstream knows. */
  upstreamModel?: string;
  upstreamId?: string | null;
  failovers?: FailedChannel[];
}

/** How the upstream split the counts it reported (each within promptTokens or completionTokens). */
export interface UsageDetail {
  cachedTokens?: number;
  cacheWriteTokens?: number;
  /** Of cacheWriteTokens, those written for one hour (priced apart upstream); absent on older charges: all 5-minute. */
  cacheWrite1hTokens?: number;
  reasoningTokens?: number;
}

/**
 * The priced inputs a retroactive correction can fix: the multiplier (chat and image charges), the
 * cache weights (chat charges) and the tokens counted per image (image charges).
 */
export type CorrectionComponent = 'multiplier' | 'cache_read_weight' | 'cache_write_weight' | 'image_tokens';
export const CORRECTION_COMPONENTS: readonly CorrectionComponent[] = ['multiplier', 'cache_read_weight', 'cache_write_weight', 'image_tokens'];

/** A model's optional cache weights (thousandths; absent: 1000, the specification's rule). */
export interface CachePrice {
  cacheReadMilli?: number;
  cacheWriteMilli?: number;
}
export type ReleaseReason = 'upstream_error' | 'client_aborted' | 'expired' | 'shutdown' | 'process_lost' | 'invalid_request' | 'other';

/** A key's own controls (each null: none). */
export interface KeyControls {
  name: string;
  /** At most `tokens` billed tokens per UTC period (daily, weekly from Monday, monthly; 'none': ever). */
  spendLimit: { tokens: number; period: 'none' | 'daily' | 'weekly' | 'monthly' } | null;
  /** Model ids the key may call (each also in the plan); null: every model of the plan. */
  models: string[] | null;
  /** ISO 8601: the key is refused from this instant on. */
  expiresAt: string | null;
}
export type KeyControlField = 'name' | 'spend_limit' | 'models' | 'expires_at';

export interface EventDataByType extends MemberEvents {
  PlanDefined: PlanTerms;
  PlanUpdated: PlanTerms;
  AccountOpened: { accountId: string; name: string };
  SubscriptionStarted: SubscriptionTerms;
  SubscriptionRenewed: SubscriptionTerms;
  ExtraTokensGranted: { accountId: string; amount: number; reason: string; paymentId?: string };
  KeyIssued: { keyId: string; accountId: string; name: string; hash: string; last4: string };
  KeyRevoked: { keyId: string; accountId: string; reason: string };
  /**
   * A key's controls as they are from now on (on the ACCOUNT stream, so that its holds are decided
   * with them): a spend limit in billed tokens per UTC period, the models it may call (within the
   * plan's), when it expires, its name. `changed` names the fields this act changed; `rotatedFrom`
   * (rotation) makes the key count its spend with that key's.
   */
  KeyControlsSet: KeyControls & { accountId: string; keyId: string; changed: KeyControlField[]; rotatedFrom?: string };
  /** A key is replaced by `replacedBy`; it keeps working until `revokeAt`, then is revoked (reason 'rotated'). */
  KeyRotated: { keyId: string; accountId: string; replacedBy: string; revokeAt: string };
  ModelPriced: { modelId: string; multiplierMilli: number; status: 'ACTIVE' | 'INACTIVE'; alias: string | null } & CachePrice;
  QuotaReserved: {
    accountId: string;
    holdId: string;
    requestId: string;
    keyId: string;
    model: string;
    kind: 'chat' | 'image';
    amount: number;
    expiresAt: string;
    /** When the hold was taken: advances the plan's call rate (absent on holds from before it was kept here). */
    at?: string;
    /** The gateway process that took it: when that process's lease lapses, another releases the hold. */
    process?: string;
  };
  ChatCharged: ChargeCommon &
    UsageDetail &
    CachePrice &
    UpstreamTrail & {
      promptTokens: number;
      completionTokens: number;
      reasoningEffort: string | null;
      api: ChatApi;
      streamed: boolean;
      aborted: boolean;
    };
  ImageCharged: ChargeCommon & UpstreamTrail & { images: number; tokensPerImage: number; size: string; edit: boolean };
  ReservationReleased: { accountId: string; holdId: string; requestId: string; amount: number; reason: ReleaseReason; failovers?: FailedChannel[] };
  MultiplierCorrected: {
    modelId: string;
    correctionId: string;
    from: string;
    to: string;
    multiplierMilli: number;
    reason: string;
    /** The same act also set the multiplier from now on (the ModelPriced appended with it). */
    alsoFromNow?: boolean;
  };
  /** A retroactive fix of another priced input than the multiplier (see CorrectionComponent). */
  PriceComponentCorrected: {
    modelId: string;
    correctionId: string;
    from: string;
    to: string;
    component: Exclude<CorrectionComponent, 'multiplier'>;
    /** Thousandths for a cache weight, tokens for image_tokens. */
    value: number;
    reason: string;
    alsoFromNow?: boolean;
  };
  ChargeAdjusted: {
    accountId: string;
    correctionId: string;
    chargeEventId: string;
    requestId: string;
    model: string;
    /** What was billed for the charge just before this adjustment (the charge plus earlier adjustments) and what it is after. */
    chargedAt: string;
    billedBefore: number;
    billedCorrected: number;
    multiplierMilliBefore: number;
    multiplierMilliCorrected: number;
    /** billedCorrected - billedBefore, split into the pools it comes from or returns to. */
    delta: number;
    quotaDelta: number;
    extraDelta: number;
    /** A refund's part credited as extra tokens (its pools were reset since: a renewed plan). */
    extraCredited?: number;
    /** The key of the charge adjusted (absent on adjustments made before usage was kept per key). */
    keyId?: string;
    /** Model stream revision of the correction that decided this figure (absent on adjustments made before corrections could overlap). */
    correctionRevision?: number;
    /** Corrected price inputs other than the multiplier, when a correction changed them. */
    cacheReadMilliCorrected?: number;
    cacheWriteMilliCorrected?: number;
    tokensPerImageCorrected?: number;
  };
  ChannelDisabled: { channelId: string; reason: string };
  ChannelEnabled: { channelId: string; reason: string };
  /** A webhook endpoint for an account's notifications (src/webhooks). The signing secret is derived, never stored. */
  WebhookRegistered: {
    webhookId: string;
    accountId: string;
    url: string;
    events: string[];
    thresholds: number[];
    expiringDays: number;
    /** Fingerprint of the master secret the webhook's signing secret is derived from (not the secret). */
    signingKeyId: string;
    registeredAt: string;
  };
  WebhookRemoved: { webhookId: string; accountId: string; reason: string };
  // Money (src/money): prices on the price-list stream, payments on the account stream.
  SettlementCurrencySet: { currency: string };
  PlanPriced: { planId: string; amount: number; currency: string; active: boolean };
  TokenPackPriced: { packId: string; name: string; tokens: number; amount: number; currency: string; active: boolean };
  /** Appended in one append with the grant it paid for (which carries the same paymentId). */
  PaymentReceived: PaymentFacts & {
    accountId: string;
    paymentId: string;
    item: PaidItem;
    receivedAt: string;
    reference?: string;
  };
  /** Money given back: the unused tokens it bought are withdrawn (tokensWithdrawn); the rest was used (refundedRevenue). */
  PaymentRefunded: {
    accountId: string;
    paymentId: string;
    refundId: string;
    amount: number;
    currency: string;
    reason: 'refund' | 'dispute_lost';
    pool: 'main' | 'extra';
    tokensWithdrawn: number;
    /** The part of the amount that was still deferred (unused tokens) and the part already used. */
    fromDeferred: number;
    refundedRevenue: number;
  };
  PaymentDisputed: { accountId: string; paymentId: string; disputeId: string; amount: number; currency: string; suspendsKeys: boolean };
  DisputeClosed: { accountId: string; paymentId: string; disputeId: string; outcome: 'won' | 'lost'; fee: number };
  /** A recurring plan stops renewing (src/money/cancellation.ts): the paid period runs to `endsAt`, then the plan ends. */
  SubscriptionCancelled: {
    accountId: string;
    processor: PaymentProcessor;
    processorSubscriptionId: string;
    planId: string | null;
    /** at_period_end: the customer asked to stop at the period's end; deleted: the processor ended the subscription. */
    kind: 'at_period_end' | 'deleted';
    cancelledAt: string;
    /** The end of the period already paid for (the plan's expiry then); null: no plan. */
    endsAt: string | null;
  };
  /** A cancellation at period end taken back before the end: the subscription renews again. */
  SubscriptionResumed: { accountId: string; processor: PaymentProcessor; processorSubscriptionId: string };
  /** A batch of redemption codes: only their hashes. Each code pays for `item` at `amount` (sold elsewhere). */
  RedemptionCodesMinted: { batchId: string; item: PaidItem; amount: number; currency: string; expiresAt: string | null; hashes: string[] };
  /** A processor's payment that names no known account or price, or another currency: kept for the operator, granted nothing. */
  PaymentUnmatched: {
    processor: PaymentProcessor;
    processorPaymentId: string;
    amount: number;
    currency: string;
    reason: string;
    details: Record<string, string>;
  };
  /**
   * What a channel's upstream model costs from `effectiveAt` on (src/money/cost-rates.ts): decimal
   * strings in major units of `currency` per million tokens (`image`: per image; null: not priced).
   * An `effectiveAt` in the past re-prices the calls after it when the cost read model is read.
   */
  UpstreamCostRateSet: { channel: string; upstreamModel: string; currency: string; effectiveAt: string } & CostPrices;
  /** A provider's usage or cost export, normalised per UTC day and upstream model, for the channel the operator named. */
  UpstreamBillImported: {
    billId: string;
    provider: 'openai' | 'anthropic';
    channel: string;
    currency: string;
    /** SHA-256 of the file as imported: the same file is imported once. */
    sha256: string;
    lines: UpstreamBillLine[];
  };
  /** A wrong, expired or used redemption code sent by an account (the code is not kept), in a UTC hour (yyyymmddhh). */
  RedemptionCodeRefused: { accountId: string; hour: string };
}

export type PaymentProcessor = 'manual' | 'stripe' | 'code';

/** What the processor says of a payment: who took it, its own id, how much, and its fee. */
export interface PaymentFacts {
  processor: PaymentProcessor;
  processorPaymentId: string;
  amount: number;
  currency: string;
  /** The processor's fee, when known. */
  fee: number | null;
}
/** What a payment bought: one period of a plan, or a pack of extra tokens. */
export type PaidItem = { kind: 'plan'; planId: string; tokens: number } | { kind: 'pack'; packId: string; tokens: number };

export type EventType = keyof EventDataByType;
export const EVENT_TYPES = [
  'PlanDefined',
  'PlanUpdated',
  'AccountOpened',
  'SubscriptionStarted',
  'SubscriptionRenewed',
  'ExtraTokensGranted',
  'KeyIssued',
  'KeyRevoked',
  'KeyControlsSet',
  'KeyRotated',
  'ModelPriced',
  'QuotaReserved',
  'ChatCharged',
  'ImageCharged',
  'ReservationReleased',
  'MultiplierCorrected',
  'ChargeAdjusted',
  'ChannelDisabled',
  'ChannelEnabled',
  'PriceComponentCorrected',
  'WebhookRegistered',
  'WebhookRemoved',
  'SettlementCurrencySet',
  'PlanPriced',
  'TokenPackPriced',
  'PaymentReceived',
  'PaymentRefunded',
  'PaymentDisputed',
  'DisputeClosed',
  'RedemptionCodesMinted',
  'PaymentUnmatched',
  'UpstreamCostRateSet',
  'UpstreamBillImported',
  'MemberInvited',
  'MemberJoined',
  'MemberRoleChanged',
  'MemberRemoved',
  'SignInLinkIssued',
  'SignInLinkUsed',
  'SessionStarted',
  'SessionEnded',
  'RedemptionCodeRefused',
  'SubscriptionCancelled',
  'SubscriptionResumed',
  'ManagementKeyIssued',
  'ManagementKeyRevoked',
  'SignInRequested',
] as const satisfies readonly EventType[];

/**
 * Events whose commit need not wait for the disk. A hold only guards the budget while its call
 * runs: it is visible to every process as soon as it commits, and the charge or release that
 * closes it is committed durably, which flushes the write-ahead log up to and including the
 * hold. A database crash can only lose holds of calls that never got a durable charge; those
 * calls fail, so nothing delivered goes unbilled. Saves one disk flush per metered call.
 */
export const PROVISIONAL_EVENT_TYPES: ReadonlySet<EventType> = new Set<EventType>(['QuotaReserved']);

/** An event as a decider returns it: type and data; the application adds id and metadata. */
export type DomainEvent = { [T in EventType]: { type: T; data: EventDataByType[T] } }[EventType];
export type EventOf<T extends EventType> = Extract<DomainEvent, { type: T }>;

export const streams = {
  plan: (id: string) => `plan-${id}`,
  account: (id: string) => `account-${id}`,
  key: (id: string) => `key-${id}`,
  model: (id: string) => `model-${id}`,
  channel: (id: string) => `channel-${id}`,
  /** An account's webhook registrations (src/webhooks). */
  webhooks: (accountId: string) => `webhooks-${accountId}`,
  /** The settlement currency, plan prices and token packs (src/money/prices.ts). */
  priceList: () => 'price-list',
  /** A batch of redemption codes (their hashes). */
  codeBatch: (batchId: string) => `codes-${batchId}`,
  /** Processor payments that matched nothing (src/money/unmatched.ts). */
  unmatchedPayments: () => 'unmatched-payments',
  /** Upstream cost rates, every channel's (src/money/cost-rates.ts). */
  upstreamCosts: () => 'upstream-costs',
  /** An imported upstream bill (src/money/cost-bills.ts). */
  upstreamBill: (billId: string) => `upstream-bill-${billId}`,
  /** An account's members and invitations (src/ledger/members.ts). */
  members: (accountId: string) => `members-${accountId}`,
  /** One sign-in link, used at most once (src/ledger/sign-in.ts). */
  signInLink: (linkId: string) => `signin-${linkId}`,
  /** One session of a member (src/ledger/sign-in.ts). */
  session: (sessionId: string) => `session-${sessionId}`,
  /** An account's refused redemption codes in one UTC hour (src/money/code-attempts.ts). */
  codeAttempts: (accountId: string, hour: string) => `code-attempts-${accountId}-${hour}`,
  /** Sign-in link requests for one address (its hash) in one UTC minute (src/ledger/sign-in.ts). */
  signInAttempts: (addressHash: string, minute: string) => `signin-attempts-${addressHash.slice(0, 32)}-${minute}`,
  /** An account's management keys (src/ledger/management-keys.ts). */
  managementKeys: (accountId: string) => `management-keys-${accountId}`,
};

/** The fields that are set: optional event fields are left out, never stored as undefined or null. */
export function definedOnly<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) out[k] = v;
  return out as { [K in keyof T]?: Exclude<T[K], undefined> };
}
