// Plans and accounts, and the balance alerts an account sets: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import {
  Event,
  Described,
  Id,
  Count,
  Positive,
  Text200,
  Reason,
  Instant,
  Currency,
  ChannelId,
  ProcessorId,
  Sha256,
  Processor,
  PLAN_TERMS,
  SUBSCRIPTION_TERMS,
  CREDIT_TERMS,
} from '../event-atoms.ts';

export const ACCOUNT_EVENTS = {
  // Plans and accounts.
  PlanDefined: Event(PLAN_TERMS, "A plan is defined: its quota, validity, call rate and enabled models ('*' = all)."),
  PlanUpdated: Event(PLAN_TERMS, "A plan's terms change for subscriptions started or renewed from now on."),
  AccountOpened: Event({ accountId: Id, name: Text200 }, 'An account is opened.'),
  SubscriptionStarted: Event(SUBSCRIPTION_TERMS, "An account starts a main plan: the plan's terms are copied so later plan edits do not change it."),
  SubscriptionRenewed: Event(SUBSCRIPTION_TERMS, 'A new period of the main plan: quota resets, expiry moves.'),
  ExtraTokensGranted: Event(
    {
      accountId: Id,
      amount: Positive,
      reason: Reason,
      paymentId: Type.Optional(Described(Id, 'The payment this grant was bought with (absent: a free grant).')),
      ...CREDIT_TERMS,
    },
    'Top-up tokens that do not change the call rate; spent after the main plan. Each grant is a lot of credit, drawn down by src/accounts/credits.ts.',
  ),
  // Balance alerts (issue 43): thresholds the customer sets; each crossing is emailed and sent to webhooks.
  BalanceAlertsSet: Event(
    { accountId: Id, thresholdsTokens: Type.Array(Positive, { maxItems: 5, uniqueItems: true }) },
    'The tokens-left thresholds the account is alerted at, highest first (none: alerts off; the actor is in the metadata).',
  ),
  BalanceAlertCrossed: Event(
    { accountId: Id, alertId: Id, thresholdTokens: Positive, tokensLeft: Count, chargeHoldId: Id },
    'A charge took the tokens left from at or above a threshold to below it, appended with that charge: one alert per crossing, however many calls race on any gateway.',
  ),
  NoticeClaimed: Event(
    { accountId: Id, noticeId: Id, by: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' }), until: Instant },
    'A gateway process mails the notice: no other does until the claim lapses (it died before the mail went out).',
  ),
  NoticeEmailed: Event(
    { accountId: Id, noticeId: Id, recipients: Count },
    "A balance alert or a failed top-up was emailed to the account's owners and billing members (how many; 0: the account had none).",
  ),
  RedemptionCodesMinted: Event(
    {
      batchId: Id,
      item: Type.Union([
        Type.Object({ kind: Type.Literal('plan'), planId: Id, tokens: Count }, { additionalProperties: false }),
        Type.Object({ kind: Type.Literal('pack'), packId: Id, tokens: Positive }, { additionalProperties: false }),
      ]),
      amount: Count,
      currency: Currency,
      expiresAt: Type.Union([Instant, Type.Null()]),
      hashes: Type.Array(Sha256, { minItems: 1, maxItems: 1000, uniqueItems: true }),
    },
    'A batch of redemption codes, kept only as SHA-256 hashes; each pays for item at amount (sold elsewhere).',
  ),
  RedemptionCodeRefused: Event(
    { accountId: Id, hour: Type.String({ pattern: '^[0-9]{10}$' }) },
    'An account sent a redemption code that is unknown, expired or already redeemed (the code itself is not kept). Counted per account and UTC hour, on every gateway alike, to limit guessing.',
  ),
  PaymentUnmatched: Event(
    {
      processor: Processor,
      processorPaymentId: ProcessorId,
      amount: Count,
      currency: Type.String({ maxLength: 10 }),
      reason: Reason,
      details: Type.Record(Type.String(), Reason, { maxProperties: 40 }),
    },
    "A processor's payment that matched no account or price, or came in another currency: recorded for the operator, nothing granted.",
  ),
  UpstreamBillImported: Event(
    {
      billId: Type.String({ pattern: '^[a-f0-9]{16,64}$' }),
      provider: Type.Union([Type.Literal('openai'), Type.Literal('anthropic')]),
      channel: ChannelId,
      currency: Currency,
      sha256: Type.String({ pattern: '^[a-f0-9]{64}$' }),
      lines: Type.Array(
        Type.Object(
          {
            day: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' }),
            upstreamModel: Text200,
            costMinor: Count,
            inputTokens: Count,
            cacheReadTokens: Count,
            cacheWriteTokens: Count,
            outputTokens: Count,
          },
          { additionalProperties: false },
        ),
        { maxItems: 100000 },
      ),
    },
    "A provider's usage or cost export, normalised per UTC day and upstream model, for the channel the operator named.",
  ),
};
