// The event catalogue's TypeScript types, derived from the one declaration of each shape
// (event-shapes.ts): what ajv checks at every append is what the deciders are typed with.
import type { Static } from '@sinclair/typebox';
import { EVENT_SHAPES } from './event-shapes.ts';

type Shapes = typeof EVENT_SHAPES;
export type EventDataByType = { [T in keyof Shapes]: Static<Shapes[T]> };
type Data<T extends keyof EventDataByType> = EventDataByType[T];

/** A plan's terms: quota, validity, call rate and enabled model ids (['*']: every model). */
export type PlanTerms = Data<'PlanDefined'>;
/** One period of a plan on an account (paymentId absent: granted by the operator, free). */
export type SubscriptionTerms = Data<'SubscriptionStarted'>;
export type ChatApi = Data<'ChatCharged'>['api'];
/** Which upstream answered a call, for reconciliation against the provider's own usage export. */
export type UpstreamTrail = Pick<Data<'ChatCharged'>, 'channel' | 'upstreamModel' | 'upstreamId' | 'failovers'>;
/** A channel tried and failed before the one that answered (or before the call gave up). */
export type FailedChannel = NonNullable<UpstreamTrail['failovers']>[number];
/** How the upstream split the counts it reported (each within promptTokens or completionTokens). */
export type UsageDetail = Pick<Data<'ChatCharged'>, 'cachedTokens' | 'cacheWriteTokens' | 'cacheWrite1hTokens' | 'reasoningTokens'>;
/** A model's optional cache weights (thousandths; absent: 1000, the specification's rule). */
export type CachePrice = Pick<Data<'ModelPriced'>, 'cacheReadMilli' | 'cacheWriteMilli'>;
export type ReleaseReason = Data<'ReservationReleased'>['reason'];
/** A key's own controls (each null: none). */
export type KeyControls = Pick<Data<'KeyControlsSet'>, 'name' | 'spendLimit' | 'models' | 'expiresAt'>;
export type KeyControlField = Data<'KeyControlsSet'>['changed'][number];
export type PaymentProcessor = Data<'PaymentReceived'>['processor'];
/** What the processor says of a payment: who took it, its own id, how much, and its fee (null: unknown). */
export type PaymentFacts = Pick<Data<'PaymentReceived'>, 'processor' | 'processorPaymentId' | 'amount' | 'currency' | 'fee'>;
/** What a payment bought: one period of a plan, or a pack of extra tokens. */
export type PaidItem = Data<'PaymentReceived'>['item'];
/** Prices of one upstream model on one channel: decimal major units per million tokens. */
export type CostPrices = Pick<Data<'UpstreamCostRateSet'>, 'input' | 'cacheRead' | 'cacheWrite5m' | 'cacheWrite1h' | 'output' | 'image'>;
/** One line of an imported bill: a UTC day and upstream model, the cost in minor units and the tokens it names. */
export type UpstreamBillLine = Data<'UpstreamBillImported'>['lines'][number];

/**
 * The priced inputs a retroactive correction can fix: the multiplier (chat and image charges), the
 * cache weights (chat charges) and the tokens counted per image (image charges).
 */
export type CorrectionComponent = 'multiplier' | Data<'PriceComponentCorrected'>['component'];
export const CORRECTION_COMPONENTS: readonly CorrectionComponent[] = ['multiplier', 'cache_read_weight', 'cache_write_weight', 'image_tokens'];

export type EventType = keyof EventDataByType;

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
  /** The settlement currency, plan prices and token packs (src/books/prices.ts). */
  priceList: () => 'price-list',
  /** The exchange rates into the settlement currency, every currency's (src/books/exchange-rates.ts). */
  exchangeRates: () => 'exchange-rates',
  /** A batch of redemption codes (their hashes). */
  codeBatch: (batchId: string) => `codes-${batchId}`,
  /** Processor payments that matched nothing (src/books/unmatched.ts). */
  unmatchedPayments: () => 'unmatched-payments',
  /** Upstream cost rates, every channel's (src/catalogue/cost-rates.ts). */
  upstreamCosts: () => 'upstream-costs',
  /** An imported upstream bill (src/catalogue/cost-bills.ts). */
  upstreamBill: (billId: string) => `upstream-bill-${billId}`,
  /** An account's members and invitations (src/customers/member-decider.ts). */
  members: (accountId: string) => `members-${accountId}`,
  /** One sign-in link, used at most once (src/customers/sign-in-decider.ts). */
  signInLink: (linkId: string) => `signin-${linkId}`,
  /** One session of a member (src/customers/sign-in-decider.ts). */
  session: (sessionId: string) => `session-${sessionId}`,
  /** An account's refused redemption codes in one UTC hour (src/books/code-attempts.ts). */
  codeAttempts: (accountId: string, hour: string) => `code-attempts-${accountId}-${hour}`,
  /** Sign-in link requests for one address (its hash) in one UTC minute (src/customers/sign-in-decider.ts). */
  signInAttempts: (addressHash: string, minute: string) => `signin-attempts-${addressHash.slice(0, 32)}-${minute}`,
  /** An account's management keys (src/keys/management-key-decider.ts). */
  managementKeys: (accountId: string) => `management-keys-${accountId}`,
  /** The books' closed and reopened months (src/books/period-decider.ts). */
  periods: () => 'book-periods',
  /** Who an account's invoices are made out to (src/books/billing-profile.ts). */
  billingProfile: (accountId: string) => `billing-profile-${accountId}`,
  /** One series' invoices or credit notes of one year, in number order (src/books/documents.ts). */
  documents: (series: string, year: number) => `documents-${series}-${year}`,
};

/**
 * What each kind of stream holds (named as in `streams`): its decider decides these events and is
 * evolved with these alone.
 */
const STREAM_EVENT_TYPES = {
  plan: ['PlanDefined', 'PlanUpdated'],
  account: [
    'AccountOpened',
    'SubscriptionStarted',
    'SubscriptionRenewed',
    'ExtraTokensGranted',
    'CreditsExpired',
    'KeyControlsSet',
    'QuotaReserved',
    'ChatCharged',
    'ImageCharged',
    'ReservationReleased',
    'ChargeAdjusted',
    'PaymentReceived',
    'PaymentRefunded',
    'PaymentDisputed',
    'DisputeClosed',
    'SubscriptionCancelled',
    'SubscriptionResumed',
    'PaymentMethodSaved',
    'AutoTopUpSet',
    'AutoTopUpTurnedOff',
    'AutoTopUpTriggered',
    'AutoTopUpSucceeded',
    'AutoTopUpFailed',
    'BalanceAlertsSet',
    'BalanceAlertCrossed',
    'NoticeClaimed',
    'NoticeEmailed',
  ],
  key: ['KeyIssued', 'KeyRevoked', 'KeyRotated'],
  model: ['ModelPriced', 'MultiplierCorrected', 'PriceComponentCorrected'],
  channel: ['ChannelDisabled', 'ChannelEnabled'],
  webhooks: ['WebhookRegistered', 'WebhookRemoved'],
  priceList: ['SettlementCurrencySet', 'PlanPriced', 'TokenPackPriced'],
  exchangeRates: ['ExchangeRateSet'],
  codeBatch: ['RedemptionCodesMinted'],
  unmatchedPayments: ['PaymentUnmatched'],
  upstreamCosts: ['UpstreamCostRateSet'],
  upstreamBill: ['UpstreamBillImported'],
  members: ['MemberInvited', 'MemberJoined', 'MemberRoleChanged', 'MemberRemoved'],
  signInLink: ['SignInLinkIssued', 'SignInLinkUsed'],
  session: ['SessionStarted', 'SessionEnded'],
  codeAttempts: ['RedemptionCodeRefused'],
  signInAttempts: ['SignInRequested'],
  managementKeys: ['ManagementKeyIssued', 'ManagementKeyRevoked'],
  periods: ['PeriodClosed', 'PeriodReopened'],
  billingProfile: ['BillingProfileSet'],
  documents: ['InvoiceIssued', 'CreditNoteIssued'],
} as const satisfies { [K in keyof typeof streams]: readonly EventType[] };

export type StreamKind = keyof typeof STREAM_EVENT_TYPES;
export type StreamEvents = { [K in StreamKind]: EventOf<(typeof STREAM_EVENT_TYPES)[K][number]> };

/** Whether a stream of `kind` holds events of this type. */
export function belongsTo<K extends StreamKind>(kind: K, event: DomainEvent): event is StreamEvents[K] {
  return (STREAM_EVENT_TYPES[kind] as readonly EventType[]).includes(event.type);
}

/** An event read from a stream of `kind`, checked to be one such a stream holds (anything else is a broken log or a bug: it throws). */
export function streamEvent<K extends StreamKind>(kind: K, event: DomainEvent): StreamEvents[K] {
  if (!belongsTo(kind, event)) throw new Error(`${event.type} read from a ${kind} stream, which holds only ${STREAM_EVENT_TYPES[kind].join(', ')}`);
  return event;
}

/** The fields that are set: optional event fields are left out, never stored as undefined or null. */
export function definedOnly<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) out[k] = v;
  return out as { [K in keyof T]?: Exclude<T[K], undefined> };
}
