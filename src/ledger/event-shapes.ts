// Every event's shape, declared once. TypeBox gives both the JSON Schema that ajv checks at every
// append (catalogue.ts; schemas/events/*.json is written from it by `npm run schemas`) and the
// TypeScript type the deciders use (events.ts), so the two cannot drift apart.
import { Type } from '@sinclair/typebox';
import {
  Event,
  Described,
  Id,
  Count,
  Positive,
  Signed,
  Name100,
  Text200,
  Reason,
  Instant,
  Milli,
  Currency,
  ChannelId,
  Email,
  ProcessorId,
  Sha256,
  Role,
  Decimal,
  Processor,
  Bool,
  Failovers,
  PLAN_TERMS,
  SUBSCRIPTION_TERMS,
  CHARGE_COMMON,
  DOCUMENT_COMMON,
  DocumentNumber,
  TaxApplied,
  CREDIT_TERMS,
  CREDIT_SPLIT,
  FX_RATE_USED,
} from './event-atoms.ts';

/** An upstream cost rate's prices: decimal major units per million tokens (image: per image, null: not priced). */
const COST_PRICES = {
  input: Decimal,
  cacheRead: Decimal,
  cacheWrite5m: Decimal,
  cacheWrite1h: Decimal,
  output: Decimal,
  image: Type.Union([Decimal, Type.Null()]),
};

/** The data of each event type. */
export const EVENT_SHAPES = {
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
  // Keys: API keys on their own streams, their controls on the account stream, management keys.
  KeyIssued: Event(
    { keyId: Id, accountId: Id, name: Text200, hash: Sha256, last4: Type.String({ pattern: '^[A-Za-z0-9]{4}$' }) },
    'An API key is issued. Only its SHA-256 hash and last 4 characters are kept, never the secret.',
  ),
  KeyRevoked: Event({ keyId: Id, accountId: Id, reason: Reason }, 'An API key is revoked; requests with it fail with 401.'),
  KeyControlsSet: Event(
    {
      accountId: Id,
      keyId: Id,
      name: Text200,
      spendLimit: Type.Union([
        Type.Null(),
        Type.Object(
          {
            tokens: Type.Integer({ minimum: 0, maximum: 1000000000000000 }),
            period: Type.Union([Type.Literal('none'), Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('monthly')]),
          },
          { additionalProperties: false },
        ),
      ]),
      models: Type.Union([Type.Null(), Type.Array(Name100, { minItems: 1, maxItems: 500, uniqueItems: true })]),
      expiresAt: Type.Union([Type.Null(), Instant]),
      changed: Type.Array(Type.Union([Type.Literal('name'), Type.Literal('spend_limit'), Type.Literal('models'), Type.Literal('expires_at')]), {
        uniqueItems: true,
        maxItems: 4,
      }),
      rotatedFrom: Type.Optional(Id),
    },
    "A key's controls from now on, on its account's stream (the account decider checks them with every hold): a spend limit in billed tokens per UTC period, the models the key may call (within the plan's), an expiry, a name. Each control is null when not set. `changed` names the fields this act changed (the actor is in the metadata); `rotatedFrom` (a rotation) makes the key count its spend together with that key's.",
  ),
  KeyRotated: Event(
    { keyId: Id, accountId: Id, replacedBy: Id, revokeAt: Instant },
    "A key is replaced by a new one (replacedBy, issued with the same controls). It keeps working until revokeAt, when authentication refuses it; a KeyRevoked with reason 'rotated' follows (the sweeper, or the first process that refuses it).",
  ),
  ManagementKeyIssued: Event(
    { accountId: Id, keyId: Id, name: Text200, hash: Sha256, last4: Type.String({ pattern: '^[A-Za-z0-9]{4}$' }), issuedAt: Instant },
    "A management key is issued for an account: it creates, lists, updates and revokes the account's API keys over HTTP and can call no model. Only its SHA-256 hash and last 4 characters are kept.",
  ),
  ManagementKeyRevoked: Event({ accountId: Id, keyId: Id }, 'A management key is revoked: it stops working at once, on every gateway.'),
  // Calls: a hold, then its charge or its release.
  QuotaReserved: Event(
    {
      accountId: Id,
      holdId: Name100,
      requestId: Name100,
      keyId: Id,
      model: Name100,
      kind: Type.Union([Type.Literal('chat'), Type.Literal('image')]),
      amount: Positive,
      expiresAt: Instant,
      at: Type.Optional(Described(Instant, "When the hold was taken; advances the plan's call rate.")),
      process: Type.Optional(
        Type.String({
          pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$',
          description: 'The gateway process that took the hold: when its lease lapses (the process died), any other process releases the hold.',
        }),
      ),
    },
    "A hold on the account's tokens before an upstream call: the upper bound of its cost.",
  ),
  ChatCharged: Event(
    {
      ...CHARGE_COMMON,
      promptTokens: Count,
      completionTokens: Count,
      reasoningEffort: Type.Union([
        Type.Literal('low'),
        Type.Literal('medium'),
        Type.Literal('high'),
        Type.Literal('xhigh'),
        Type.Literal('max'),
        Type.Literal('minimal'),
        Type.Literal('none'),
        Type.Null(),
      ]),
      api: Type.Union([Type.Literal('chat.completions'), Type.Literal('messages'), Type.Literal('responses'), Type.Literal('embeddings')], {
        description: 'The endpoint called: an embeddings call is charged like a chat call without completion tokens.',
      }),
      streamed: Bool,
      aborted: Bool,
      cachedTokens: Type.Optional(Described(Count, 'Prompt tokens the upstream served from its cache (within promptTokens).')),
      cacheWriteTokens: Type.Optional(Described(Count, 'Prompt tokens the upstream wrote to its cache (within promptTokens).')),
      cacheWrite1hTokens: Type.Optional(
        Described(Count, 'Of cacheWriteTokens, those written for one hour (priced apart upstream). Absent: every write is a 5-minute one.'),
      ),
      reasoningTokens: Type.Optional(Described(Count, 'Completion tokens spent reasoning (within completionTokens).')),
      cacheReadMilli: Type.Optional(
        Type.Integer({ minimum: 0, maximum: 1000000, description: 'Weight of a cached prompt token in the price, thousandths (absent: 1000).' }),
      ),
      cacheWriteMilli: Type.Optional(
        Type.Integer({ minimum: 0, maximum: 1000000, description: 'Weight of a cache-written prompt token, thousandths (absent: 1000).' }),
      ),
      channel: Type.Optional(Described(ChannelId, 'The channel (provider/upstream model) that answered.')),
      upstreamId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { description: "The upstream's id of its response." })),
      failovers: Type.Optional(Failovers),
      upstreamModel: Type.Optional(Described(Text200, "The model name the channel's upstream knows.")),
    },
    'A chat call settled: the raw inputs are kept so it can be re-priced.',
  ),
  ImageCharged: Event(
    {
      ...CHARGE_COMMON,
      images: Positive,
      tokensPerImage: Positive,
      size: Type.Union([Type.Literal('1024x1024'), Type.Literal('1024x1536'), Type.Literal('1536x1024')]),
      edit: Bool,
      channel: Type.Optional(ChannelId),
      upstreamId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
      failovers: Type.Optional(Failovers),
      upstreamModel: Type.Optional(Described(Text200, "The model name the channel's upstream knows.")),
    },
    'An image call settled, charged only on success.',
  ),
  ReservationReleased: Event(
    {
      accountId: Id,
      holdId: Name100,
      requestId: Name100,
      amount: Count,
      reason: Type.Union([
        Type.Literal('upstream_error'),
        Type.Literal('client_aborted'),
        Type.Literal('expired'),
        Type.Literal('shutdown'),
        Type.Literal('process_lost'),
        Type.Literal('invalid_request'),
        Type.Literal('other'),
      ]),
      failovers: Type.Optional(Failovers),
    },
    'A hold is released without a charge (upstream failure, client gone, expiry).',
  ),
  // Catalogue: model prices, channels, upstream cost rates.
  ModelPriced: Event(
    {
      modelId: Name100,
      multiplierMilli: Milli,
      status: Type.Union([Type.Literal('ACTIVE'), Type.Literal('INACTIVE')]),
      alias: Type.Union([Type.String({ maxLength: 100 }), Type.Null()]),
      cacheReadMilli: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: 1000000,
          description: "Optional price weight of a cached prompt token, thousandths (absent: 1000, the specification's rule).",
        }),
      ),
      cacheWriteMilli: Type.Optional(
        Type.Integer({ minimum: 0, maximum: 1000000, description: 'Optional price weight of a cache-written prompt token, thousandths (absent: 1000).' }),
      ),
    },
    "A model's multiplier (integer thousandths), status and alias, effective from now.",
  ),
  ChannelDisabled: Event({ channelId: ChannelId, reason: Reason }, 'An operator took an upstream channel out of rotation (the actor is in the metadata).'),
  ChannelEnabled: Event({ channelId: ChannelId, reason: Reason }, 'An operator put an upstream channel back into rotation.'),
  UpstreamCostRateSet: Event(
    {
      channel: ChannelId,
      upstreamModel: Text200,
      currency: Currency,
      effectiveAt: Instant,
      ...COST_PRICES,
      fx: Type.Optional(
        Described(
          Type.Object(
            {
              currency: Currency,
              ...FX_RATE_USED,
              given: Type.Object(COST_PRICES, { additionalProperties: false }),
            },
            { additionalProperties: false },
          ),
          'A rate given in another currency (an upstream billing in US dollars): the prices as given, and the exchange rate they were converted into the settlement currency at (absent: given in it).',
        ),
      ),
    },
    "What a channel's upstream model costs from effectiveAt on: decimal major units of currency (the settlement currency) per million tokens (image: per image, null: not priced).",
  ),
  // Corrections: retroactive fixes, and one adjustment per charge they change.
  MultiplierCorrected: Event(
    {
      modelId: Name100,
      correctionId: Name100,
      from: Instant,
      to: Instant,
      multiplierMilli: Milli,
      reason: Reason,
      alsoFromNow: Type.Optional(
        Described(Bool, 'The same act also set the multiplier from now on: a ModelPriced with the same correlation id follows in the same append.'),
      ),
    },
    "A retroactive fix of a model's multiplier over a time window [from, to). Windows of one model may overlap: where they do, the correction appended later (higher stream revision) decides.",
  ),
  PriceComponentCorrected: Event(
    {
      modelId: Name100,
      correctionId: Name100,
      from: Instant,
      to: Instant,
      component: Type.Union([Type.Literal('cache_read_weight'), Type.Literal('cache_write_weight'), Type.Literal('image_tokens')]),
      value: Type.Integer({
        minimum: 0,
        maximum: 1000000000,
        description: 'Thousandths of a plain prompt token for a cache weight (0 to 1000000); tokens per image for image_tokens (at least 1).',
      }),
      reason: Reason,
      alsoFromNow: Type.Optional(
        Described(Bool, 'The same act also set the weight from now on: a ModelPriced with the same correlation id follows in the same append.'),
      ),
    },
    "A retroactive fix of a priced input other than the multiplier over a time window [from, to): a cache weight (chat charges) or the tokens counted per image (image charges). Ordered with the model's MultiplierCorrected events by stream revision: where windows overlap, the later one decides its component.",
  ),
  CreditsExpired: Event(
    {
      accountId: Id,
      lot: Described(Count, "The lot's place in the account's grants of extra tokens (0: the first)."),
      tokens: Described(Count, 'Its unused tokens, which are gone (breakage); 0 when it was used up.'),
      expiresAt: Instant,
    },
    'A lot of extra tokens reached its expiry: it is closed, and its unused tokens go to breakage.',
  ),
  ChargeAdjusted: Event(
    {
      accountId: Id,
      correctionId: Name100,
      chargeEventId: Name100,
      requestId: Name100,
      model: Name100,
      chargedAt: Instant,
      billedBefore: Count,
      billedCorrected: Count,
      multiplierMilliBefore: Milli,
      multiplierMilliCorrected: Milli,
      delta: Signed,
      quotaDelta: Signed,
      extraDelta: Signed,
      correctionRevision: Type.Optional(
        Described(
          Count,
          "Revision, in the model's stream, of the correction that decided this figure: a correction of a lower revision never overrides it. Absent on adjustments from before corrections could overlap.",
        ),
      ),
      cacheReadMilliCorrected: Type.Optional(
        Type.Integer({ minimum: 0, maximum: 1000000, description: 'Corrected weight of a cached prompt token (thousandths), when a correction changed it.' }),
      ),
      cacheWriteMilliCorrected: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: 1000000,
          description: 'Corrected weight of a cache-written prompt token (thousandths), when a correction changed it.',
        }),
      ),
      tokensPerImageCorrected: Type.Optional(Described(Positive, 'Corrected tokens counted per image, when a correction changed it.')),
      keyId: Type.Optional(Described(Id, 'The key of the charge adjusted (absent on adjustments made before usage was kept per key).')),
      credits: CREDIT_SPLIT,
      extraCredited: Type.Optional(
        Described(
          Positive,
          'The part of a refund credited as extra tokens because the pools it came from were reset since (a renewed plan): delta = quotaDelta + extraDelta - extraCredited.',
        ),
      ),
    },
    'One compensating adjustment of one charge by a correction; the charge itself is never edited. billedBefore is what was billed for the charge just before this adjustment (the charge plus every earlier adjustment of it), billedCorrected what is billed after it.',
  ),
  // Payments and books: prices, payments, refunds, disputes, codes, upstream bills.
  SettlementCurrencySet: Event({ currency: Currency }, "The ledger's one settlement currency (ISO 4217), set once."),
  PlanPriced: Event(
    { planId: Id, amount: Count, currency: Currency, active: Bool },
    "A plan's price per period from now on, in minor units of its currency: the settlement currency's, or another the operator offers it in; old purchases keep theirs.",
  ),
  ExchangeRateSet: Event(
    { currency: Currency, settlement: Currency, ...FX_RATE_USED },
    'An exchange rate into the settlement currency for a UTC day, with its source: foreign amounts of that day on are booked at it until a later day has one.',
  ),
  TokenPackPriced: Event(
    {
      packId: Id,
      name: Text200,
      tokens: Positive,
      amount: Count,
      currency: Currency,
      active: Bool,
      expiresInDays: Type.Optional(
        Described(Type.Integer({ minimum: 1, maximum: 3650 }), "Days after the purchase that the pack's unused tokens expire (absent: never)."),
      ),
      priority: CREDIT_TERMS.priority,
      models: CREDIT_TERMS.models,
    },
    'A pack of extra tokens for sale at a price from now on (minor units), with the terms of the credit it grants.',
  ),
  PaymentReceived: Event(
    {
      accountId: Id,
      paymentId: Id,
      processor: Processor,
      processorPaymentId: ProcessorId,
      amount: Count,
      currency: Currency,
      fee: Type.Union([Count, Type.Null()]),
      item: Type.Union([
        Type.Object({ kind: Type.Literal('plan'), planId: Id, tokens: Count }, { additionalProperties: false }),
        Type.Object({ kind: Type.Literal('pack'), packId: Id, tokens: Positive }, { additionalProperties: false }),
      ]),
      reference: Type.Optional(Reason),
      receivedAt: Instant,
      tax: Type.Optional(Described(TaxApplied, 'The tax the amount holds and how it was decided (absent: untaxed).')),
      fx: Type.Optional(
        Described(
          Type.Object(
            { currency: Currency, amount: Count, fee: Type.Union([Count, Type.Null()]), tax: Count, ...FX_RATE_USED },
            { additionalProperties: false },
          ),
          'The payment as made in another currency the item is offered in, and the exchange rate it was booked at: amount, fee and tax above are their conversions into the settlement currency (a fee the processor took in the settlement currency is not converted: this fee is then null). Absent: paid in the settlement currency.',
        ),
      ),
    },
    'Money received for a plan period or a pack, appended in one append with the grant it pays for (same paymentId). The amount is what was paid, tax included; its tax part is owed, not deferred revenue.',
  ),
  PaymentRefunded: Event(
    {
      accountId: Id,
      paymentId: Id,
      refundId: ProcessorId,
      amount: Count,
      currency: Currency,
      reason: Type.Union([Type.Literal('refund'), Type.Literal('dispute_lost')]),
      pool: Type.Union([Type.Literal('main'), Type.Literal('extra')]),
      tokensWithdrawn: Count,
      fromDeferred: Count,
      refundedRevenue: Count,
      taxRefunded: Type.Optional(Described(Count, "The payment's tax given back with it (absent: none).")),
      fx: Type.Optional(
        Described(
          Type.Object(
            {
              currency: Currency,
              amount: Count,
              taxRefunded: Count,
              ...FX_RATE_USED,
              now: Described(Type.Object(FX_RATE_USED, { additionalProperties: false }), "The day's exchange rate when the money went back."),
              gainLoss: Described(
                Signed,
                "amount at the payment's rate less amount at the rate of now, in settlement minor units: positive is an FX gain, negative a loss.",
              ),
            },
            { additionalProperties: false },
          ),
          "A refund of a payment made in another currency: the amount given back in it, booked at the payment's rate (amount and taxRefunded above), and the difference from the day's rate (absent: the settlement currency).",
        ),
      ),
    },
    'Money given back on a payment: the tax it held goes back in proportion, the unused tokens it bought are withdrawn (deferred), the rest of the amount is refunded revenue.',
  ),
  PaymentDisputed: Event(
    { accountId: Id, paymentId: Id, disputeId: ProcessorId, amount: Count, currency: Currency, suspendsKeys: Bool },
    "A payment disputed by the payer (a chargeback opened); the account's keys may be suspended until it closes.",
  ),
  DisputeClosed: Event(
    { accountId: Id, paymentId: Id, disputeId: ProcessorId, outcome: Type.Union([Type.Literal('won'), Type.Literal('lost')]), fee: Count },
    "A dispute closed: won (nothing changes) or lost (a PaymentRefunded follows; the fee is the processor's).",
  ),
  SubscriptionCancelled: Event(
    {
      accountId: Id,
      processor: Processor,
      processorSubscriptionId: ProcessorId,
      planId: Type.Union([Id, Type.Null()]),
      kind: Type.Union([Type.Literal('at_period_end'), Type.Literal('deleted')]),
      cancelledAt: Instant,
      endsAt: Type.Union([Instant, Type.Null()]),
    },
    'A recurring plan stops renewing at the processor: the period already paid for runs to endsAt, then the plan ends.',
  ),
  SubscriptionResumed: Event(
    { accountId: Id, processor: Processor, processorSubscriptionId: ProcessorId },
    'A cancellation at period end taken back before the end: the subscription renews again.',
  ),
  // Auto top-up (issue 43): a saved card charged for a pack when the balance falls below a threshold.
  PaymentMethodSaved: Event(
    {
      accountId: Id,
      processor: Type.Literal('stripe'),
      customerId: ProcessorId,
      paymentMethodId: ProcessorId,
      brand: Type.Union([Type.Null(), Type.String({ maxLength: 30 })]),
      last4: Type.Union([Type.Null(), Type.String({ pattern: '^[0-9]{4}$' })]),
    },
    "A card the customer saved through Stripe Checkout (setup mode) for charges made without them (auto top-up). Only the processor's ids and the card's brand and last four digits: no card data.",
  ),
  AutoTopUpSet: Event(
    { accountId: Id, thresholdTokens: Positive, packId: Id },
    'Auto top-up on (or changed, the actor is in the metadata): when a charge takes the tokens left below the threshold, the pack is bought with the saved card.',
  ),
  AutoTopUpTurnedOff: Event({ accountId: Id }, 'Auto top-up off (the actor is in the metadata).'),
  AutoTopUpTriggered: Event(
    {
      accountId: Id,
      topUpId: Id,
      packId: Id,
      thresholdTokens: Positive,
      tokensLeft: Count,
      chargeHoldId: Id,
    },
    'A charge took the tokens left below the threshold: one top-up is started, appended with that charge, so concurrent calls on any gateway start exactly one. No other starts until this one ends and the balance is back at or above the threshold.',
  ),
  AutoTopUpSucceeded: Event({ accountId: Id, topUpId: Id, paymentId: Id }, "A top-up's charge succeeded; its payment and pack are the payment's own events."),
  AutoTopUpFailed: Event(
    { accountId: Id, topUpId: Id, reason: Reason },
    'A top-up could not be charged (a declined card, a card that needs the customer). It is not tried again: auto top-up waits until the customer sets it again.',
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
  // Customers: members, sign-in links and sessions (secrets only as SHA-256 hashes).
  MemberInvited: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role },
    'An address is invited to an account with a role; it joins when it signs in.',
  ),
  MemberJoined: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role, invited: Bool },
    'A person is a member of the account from now on: an invitation accepted at sign-in, or the founder of an account opened by sign-up.',
  ),
  MemberRoleChanged: Event(
    { accountId: Id, memberId: Id, email: Email, from: Role, to: Role },
    "A member's role changes; the account keeps at least one owner.",
  ),
  MemberRemoved: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role, status: Type.Union([Type.Literal('invited'), Type.Literal('active')]) },
    'A member is removed or an invitation withdrawn; the account keeps at least one owner.',
  ),
  SignInRequested: Event(
    { address: Sha256, minute: Type.String({ pattern: '^[0-9]{12}$' }) },
    'A sign-in link was asked for an address in a UTC minute (the address is kept only as its SHA-256): the per-address limit counts these on every gateway.',
  ),
  SignInLinkIssued: Event(
    { linkId: Id, email: Email, hash: Sha256, expiresAt: Instant },
    'A single-use sign-in link is sent to an address; only the SHA-256 hash of its secret is kept.',
  ),
  SignInLinkUsed: Event({ linkId: Id, email: Email }, 'A sign-in link is used (it cannot be used again).'),
  SessionStarted: Event(
    { sessionId: Id, email: Email, hash: Sha256, method: Type.Union([Type.Literal('email'), Type.Literal('oidc')]), expiresAt: Instant },
    'A person signed in to /app; only the hash of the session secret is kept (the CSRF token is derived from the secret).',
  ),
  SessionEnded: Event(
    { sessionId: Id, email: Email, reason: Type.Union([Type.Literal('sign_out'), Type.Literal('ended_by_member'), Type.Literal('ended_by_operator')]) },
    'A session ends on the server: signed out, ended from another session of the member, or by the operator.',
  ),
  // The books' periods: a month closed for reporting, or opened again.
  PeriodClosed: Event(
    {
      period: Type.String({ pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$', description: 'The UTC calendar month closed (YYYY-MM).' }),
      reconciliationDifference: Described(Signed, "The month's money reconciliation difference when it was closed (minor units; 0 when it closed)."),
      billLinesDiffering: Described(Count, "Lines of the month's imported upstream bills outside the tolerance when it was closed."),
      overrideReason: Type.Optional(Described(Reason, 'Why the month was closed although its checks did not pass.')),
    },
    'A month of the books is closed (the actor is in the metadata): nothing booked in it changes after this; later corrections, refunds and disputes are booked in an open month.',
  ),
  PeriodReopened: Event(
    { period: Type.String({ pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$' }), reason: Reason },
    'A closed month of the books is opened again, with the reason (the actor is in the metadata).',
  ),
  // Invoicing: who an account's invoices are made out to.
  BillingProfileSet: Event(
    {
      accountId: Id,
      legalName: Text200,
      addressLines: Type.Array(Text200, { minItems: 1, maxItems: 3 }),
      city: Name100,
      postalCode: Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 20 })]),
      region: Type.Union([Type.Null(), Name100]),
      country: Described(Type.String({ pattern: '^[A-Z]{2}$' }), 'ISO 3166-1 alpha-2.'),
      taxId: Described(
        Type.Union([Type.Null(), Type.String({ pattern: '^[A-Z0-9]{2,32}$' })]),
        "A business's tax id (VAT number), normalised; null for a consumer.",
      ),
      taxIdChecked: Described(Bool, "Whether the tax id matched the public format of its country's VAT numbers (false where none is known)."),
      invoiceEmail: Email,
      changed: Type.Array(
        Type.Union([
          Type.Literal('legalName'),
          Type.Literal('addressLines'),
          Type.Literal('city'),
          Type.Literal('postalCode'),
          Type.Literal('region'),
          Type.Literal('country'),
          Type.Literal('taxId'),
          Type.Literal('invoiceEmail'),
        ]),
        { minItems: 1, maxItems: 8, uniqueItems: true },
      ),
    },
    "An account's billing profile from now on, whole (the actor is in the metadata): the legal name, address, country, tax id and invoice address its invoices are made out to. `changed` names the fields this act changed. An invoice copies the profile as it was when issued.",
  ),
  InvoiceIssued: Event(
    { ...DOCUMENT_COMMON, paymentId: Id },
    "An invoice for a payment, numbered in its series and year without gap or duplicate (its stream's revision is the number). It copies the seller's details and the buyer's billing profile as they were at issue, so nothing later changes it; a correction is a credit note.",
  ),
  CreditNoteIssued: Event(
    {
      ...DOCUMENT_COMMON,
      paymentId: Id,
      refundId: ProcessorId,
      invoiceNumber: DocumentNumber,
      reason: Type.Union([Type.Literal('refund'), Type.Literal('dispute_lost')]),
    },
    'A credit note for money given back on a paid invoice (a refund or a lost dispute), numbered in its own series; its lines are the amounts credited.',
  ),
  // Webhooks: an account's notification endpoints.
  WebhookRegistered: Event(
    {
      webhookId: Type.String({ pattern: '^wh_[a-f0-9]{16,32}$' }),
      accountId: Id,
      url: Type.String({ minLength: 8, maxLength: 2000 }),
      events: Type.Array(Type.String({ pattern: '^[a-z_]+\\.[a-z_]+$' }), { minItems: 1, maxItems: 50, uniqueItems: true }),
      thresholds: Type.Array(Type.Integer({ minimum: 1, maximum: 100 }), { minItems: 1, maxItems: 100, uniqueItems: true }),
      expiringDays: Type.Integer({ minimum: 1, maximum: 365 }),
      signingKeyId: Type.String({ pattern: '^[a-f0-9]{16}$' }),
      registeredAt: Instant,
    },
    "An endpoint that receives the account's notifications (src/webhooks). Its signing secret is derived from the server's master secret and the webhook id, shown once, and never stored; signingKeyId only fingerprints the master secret used.",
  ),
  WebhookRemoved: Event(
    { webhookId: Type.String({ pattern: '^wh_[a-f0-9]{16,32}$' }), accountId: Id, reason: Reason },
    'A webhook stops receiving notifications; deliveries still pending for it are cancelled.',
  ),
};

/** Who and what caused an event (every event's metadata). */
export const EVENT_METADATA = Type.Object(
  {
    correlationId: Text200,
    causationId: Type.Union([Type.String({ maxLength: 200 }), Type.Null()]),
    actor: Text200,
    requestId: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false, description: 'Who and what caused an event: the request or admin action that led to it.' },
);
