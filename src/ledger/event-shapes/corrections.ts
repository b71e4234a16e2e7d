// Retroactive corrections and the adjustments they make: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Described, Id, Count, Positive, Signed, Name100, Reason, Instant, Milli, Bool, CREDIT_SPLIT } from '../event-atoms.ts';

export const CORRECTION_EVENTS = {
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
};
