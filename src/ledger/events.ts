// The event catalogue as TypeScript types. schemas/events/*.json is the source of truth at run
// time (ajv checks every append); these types keep the deciders honest at compile time.

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
export type ReleaseReason = 'upstream_error' | 'client_aborted' | 'expired' | 'shutdown' | 'invalid_request' | 'other';

export interface EventDataByType {
  PlanDefined: PlanTerms;
  PlanUpdated: PlanTerms;
  AccountOpened: { accountId: string; name: string };
  SubscriptionStarted: SubscriptionTerms;
  SubscriptionRenewed: SubscriptionTerms;
  ExtraTokensGranted: { accountId: string; amount: number; reason: string };
  KeyIssued: { keyId: string; accountId: string; name: string; hash: string; last4: string };
  KeyRevoked: { keyId: string; accountId: string; reason: string };
  ModelPriced: { modelId: string; multiplierMilli: number; status: 'ACTIVE' | 'INACTIVE'; alias: string | null };
  QuotaReserved: {
    accountId: string; holdId: string; requestId: string; keyId: string; model: string;
    kind: 'chat' | 'image'; amount: number; expiresAt: string;
    /** When the hold was taken: advances the plan's call rate (absent on holds from before it was kept here). */
    at?: string;
  };
  ChatCharged: ChargeCommon & {
    promptTokens: number; completionTokens: number; reasoningEffort: string | null;
    api: ChatApi; streamed: boolean; aborted: boolean;
  };
  ImageCharged: ChargeCommon & { images: number; tokensPerImage: number; size: string; edit: boolean };
  ReservationReleased: { accountId: string; holdId: string; requestId: string; amount: number; reason: ReleaseReason };
  MultiplierCorrected: { modelId: string; correctionId: string; from: string; to: string; multiplierMilli: number; reason: string };
  ChargeAdjusted: {
    accountId: string; correctionId: string; chargeEventId: string; requestId: string; model: string;
    chargedAt: string; billedBefore: number; billedCorrected: number;
    multiplierMilliBefore: number; multiplierMilliCorrected: number;
    /** billedCorrected - billedBefore, split into the pools it comes from or returns to. */
    delta: number; quotaDelta: number; extraDelta: number;
  };
}

export type EventType = keyof EventDataByType;
export const EVENT_TYPES = [
  'PlanDefined', 'PlanUpdated', 'AccountOpened', 'SubscriptionStarted', 'SubscriptionRenewed',
  'ExtraTokensGranted', 'KeyIssued', 'KeyRevoked', 'ModelPriced', 'QuotaReserved', 'ChatCharged',
  'ImageCharged', 'ReservationReleased', 'MultiplierCorrected', 'ChargeAdjusted',
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
};
