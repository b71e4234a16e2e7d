// The values events are made of (ids, counts, instants, money, hashes), and the parts several
// events share (plan terms, a charge's common fields, failovers): each declared once, for the
// event catalogue (event-shapes.ts).
import { Type, type TProperties, type TSchema } from '@sinclair/typebox';
import { ROLES } from './roles.ts';

/** An event's data: exactly these properties, none other. */
export function Event<P extends TProperties>(properties: P, description: string) {
  return Type.Object(properties, { additionalProperties: false, description });
}

/** An atom with a description of its own use. */
export function Described<T extends TSchema>(schema: T, description: string): T {
  return { ...schema, description };
}

/** An id: accounts, keys, payments, plans, batches, members. */
export const Id = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$' });
/** Tokens, images or minor units: a safe integer, never negative. */
export const Count = Type.Integer({ maximum: 9007199254740991, minimum: 0 });
/** A count that is at least one. */
export const Positive = Type.Integer({ maximum: 9007199254740991, minimum: 1 });
/** A signed difference of counts. */
export const Signed = Type.Integer({ maximum: 9007199254740991, minimum: -9007199254740991 });
/** A model id, a hold or request id, a correction id. */
export const Name100 = Type.String({ maxLength: 100, minLength: 1 });
/** A name, an actor, an upstream model. */
export const Text200 = Type.String({ maxLength: 200, minLength: 1 });
/** A free-text reason or reference. */
export const Reason = Type.String({ maxLength: 500 });
/** An ISO 8601 instant. */
export const Instant = Type.String({ format: 'date-time' });
/** A multiplier in thousandths (1.25 -> 1250), or a rate per minute. */
export const Milli = Type.Integer({ maximum: 1000000, minimum: 1 });
/** An ISO 4217 currency code. */
export const Currency = Type.String({ pattern: '^[A-Z]{3}$' });
/** An upstream channel id. */
/** A channel id: its provider and upstream model by default, so `@` too (Vertex's model versions: claude-sonnet-4-5@20250929). */
export const CHANNEL_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,199}$';
export const ChannelId = Type.String({ pattern: CHANNEL_ID_PATTERN });
/** An e-mail address. */
export const Email = Type.String({ maxLength: 254, minLength: 3, pattern: '^[^\\s@]+@[^\\s@]+$' });
/** A payment processor's own id (payment, refund, dispute, subscription). */
export const ProcessorId = Type.String({ maxLength: 255, minLength: 1, pattern: '^[\\x21-\\x7e]+$' });
/** A SHA-256 hash in hex (secrets are stored only so). */
export const Sha256 = Type.String({ pattern: '^[0-9a-f]{64}$' });
/** A member's role. */
export const Role = Type.Union(ROLES.map((role) => Type.Literal(role)));
/** A decimal amount in major units, as a string. */
export const Decimal = Type.String({ pattern: '^(0|[1-9][0-9]{0,11})(\\.[0-9]{1,12})?$' });
/** A UTC day, YYYY-MM-DD. */
export const Day = Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' });
/** An exchange rate: settlement currency major units per one major unit of the other (decimal, exact). */
export const FxRate = Type.String({ pattern: '^(0|[1-9][0-9]{0,11})(\\.[0-9]{1,12})?$' });
/** The exchange rate a foreign amount was booked at: its currency, rate, the day it is for and its source. */
export const FX_RATE_USED = {
  rate: FxRate,
  day: Day,
  source: Type.String({ minLength: 1, maxLength: 200 }),
};

/** Who took a payment. */
export const Processor = Type.Union([Type.Literal('manual'), Type.Literal('stripe'), Type.Literal('code')]);
/** An error code (no message: messages may quote a prompt). */
export const ErrorCode = Type.String({ pattern: '^[a-z0-9_]{1,40}$' });
export const Bool = Type.Boolean();

/** Channels tried and failed before the one that answered (or before the call gave up). */
export const Failovers = Type.Array(
  Type.Object({ channel: ChannelId, error: ErrorCode, upstreamModel: Type.Optional(Text200) }, { additionalProperties: false }),
  {
    maxItems: 16,
    description: 'Channels tried and failed before the one that answered (or before giving up).',
  },
);

/** A plan's terms (PlanDefined, PlanUpdated). */
export const PLAN_TERMS = {
  planId: Id,
  name: Text200,
  quota: Count,
  validityDays: Type.Integer({ minimum: 1, maximum: 3650 }),
  requestsPerMinute: Milli,
  models: Type.Array(Name100, { minItems: 1, maxItems: 500, uniqueItems: true }),
};

/** One period of a main plan on an account (SubscriptionStarted, SubscriptionRenewed): the plan's terms as they were. */
export const SUBSCRIPTION_TERMS = {
  accountId: Id,
  planId: Id,
  planName: Text200,
  quota: Count,
  requestsPerMinute: Milli,
  models: Type.Array(Name100, { minItems: 1, maxItems: 500, uniqueItems: true }),
  startsAt: Instant,
  expiresAt: Instant,
  paymentId: Type.Optional(Described(Id, 'The payment this grant was bought with (absent: a free grant).')),
};

/** What every settled call records: whose hold, at which price, and the pools the billed tokens came from. */
export const CHARGE_COMMON = {
  accountId: Id,
  holdId: Name100,
  requestId: Name100,
  keyId: Id,
  model: Name100,
  multiplierMilli: Milli,
  reserved: Positive,
  billed: Count,
  fromQuota: Count,
  fromExtra: Count,
  credits: Type.Optional(
    Described(
      Type.Array(Type.Object({ lot: Count, tokens: Signed }, { additionalProperties: false }), { maxItems: 10000 }),
      'fromExtra split over the lots of extra tokens it came from (absent on charges from before lots were kept: oldest first).',
    ),
  ),
};

/** A change of the extra tokens used, split over the lots (negative tokens: given back). */
export const CREDIT_SPLIT = CHARGE_COMMON.credits;

/** What a grant of extra tokens may carry (src/accounts/credits.ts): absent, it never expires, has priority 50 and pays for every model. */
export const CREDIT_TERMS = {
  expiresAt: Type.Optional(Described(Instant, 'When its unused tokens expire.')),
  priority: Type.Optional(Described(Type.Integer({ minimum: 1, maximum: 100 }), 'Lower numbers are drawn first.')),
  models: Type.Optional(Described(Type.Array(Name100, { minItems: 1, maxItems: 50, uniqueItems: true }), 'The models it may pay for (absent: every model).')),
};

/** An invoice's or credit note's number: its series, year and place in both (TG-2026-000123, TG-CN-2026-000007). */
export const DocumentNumber = Type.String({ pattern: '^[A-Z][A-Z0-9]{0,9}(-CN)?-[0-9]{4}-[0-9]{6,}$' });
const Country = Type.String({ pattern: '^[A-Z]{2}$' });
const NullOr = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** How a payment was taxed: the buyer's country's entry of the operator's tax table, as it was then. */
const TAX_TREATMENT = {
  country: Described(Country, "The country whose rate applied: the buyer's, or the seller's for a buyer without a billing profile."),
  name: Type.String({ minLength: 1, maxLength: 50 }),
  rateBasisPoints: Described(Type.Integer({ minimum: 0, maximum: 10_000 }), 'The rate in hundredths of a percent (1900 is 19 %); 0 under the reverse charge.'),
  inclusive: Described(Bool, "Whether the country's prices hold the tax (inclusive) or have it added (exclusive)."),
  reverseCharge: Described(Bool, 'A business abroad with a checked tax id accounts for the tax itself: none is charged.'),
};
export const TaxTreatment = Type.Object(TAX_TREATMENT, { additionalProperties: false });
/** The tax a payment held, and how it was decided. */
export const TaxApplied = Type.Object(
  { ...TAX_TREATMENT, amount: Described(Count, 'The tax held in the amount paid (minor units): owed to the tax authority, never revenue.') },
  { additionalProperties: false },
);

/** What every invoice and credit note carries: its number, both parties as they were at issue, its lines and totals (minor units). */
export const DOCUMENT_COMMON = {
  number: DocumentNumber,
  series: Type.String({ pattern: '^[A-Z][A-Z0-9]{0,9}(-CN)?$' }),
  year: Type.Integer({ minimum: 2000, maximum: 9999 }),
  sequence: Described(Positive, "The document's place in its series and year: its stream's revision + 1."),
  accountId: Id,
  issuedAt: Instant,
  seller: Type.Object(
    {
      name: Text200,
      addressLines: Type.Array(Text200, { maxItems: 4 }),
      country: NullOr(Country),
      taxId: NullOr(Type.String({ minLength: 2, maxLength: 32 })),
      email: NullOr(Email),
    },
    { additionalProperties: false, description: "The operator's details as configured when the document was issued." },
  ),
  buyer: Type.Object(
    {
      accountId: Id,
      name: Text200,
      profile: NullOr(
        Type.Object(
          {
            legalName: Text200,
            addressLines: Type.Array(Text200, { minItems: 1, maxItems: 3 }),
            city: Name100,
            postalCode: NullOr(Type.String({ minLength: 1, maxLength: 20 })),
            region: NullOr(Name100),
            country: Country,
            taxId: NullOr(Type.String({ pattern: '^[A-Z0-9]{2,32}$' })),
            taxIdChecked: Bool,
            invoiceEmail: Email,
          },
          { additionalProperties: false },
        ),
      ),
    },
    {
      additionalProperties: false,
      description: "The account and its billing profile as it was at issue (null: none was set; the account's name stands alone).",
    },
  ),
  lines: Type.Array(
    Type.Object(
      {
        description: Text200,
        quantity: Positive,
        unitAmount: Count,
        amount: Count,
        taxRateBasisPoints: Type.Integer({ minimum: 0, maximum: 10_000 }),
        tax: Count,
      },
      { additionalProperties: false },
    ),
    { minItems: 1, maxItems: 50 },
  ),
  subtotal: Count,
  tax: Count,
  total: Count,
  currency: Currency,
  taxTreatment: Type.Optional(Described(TaxTreatment, 'How the payment was taxed (absent: documents issued before tax was recorded, untaxed).')),
  booked: Type.Optional(
    Described(
      Type.Object({ currency: Currency, total: Count, tax: Count, ...FX_RATE_USED }, { additionalProperties: false }),
      'A document in another currency than the settlement currency: its total and tax as booked in the settlement currency, and the exchange rate they were booked at (absent: in the settlement currency).',
    ),
  ),
};
