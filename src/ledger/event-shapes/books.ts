// Payments and the books: prices, payments, refunds, disputes, codes, upstream bills, auto top-up, periods and invoicing: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
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
  Currency,
  Email,
  ProcessorId,
  Processor,
  Bool,
  DOCUMENT_COMMON,
  DocumentNumber,
  TaxApplied,
  CREDIT_TERMS,
  FX_RATE_USED,
} from '../event-atoms.ts';

export const BOOK_EVENTS = {
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
};
