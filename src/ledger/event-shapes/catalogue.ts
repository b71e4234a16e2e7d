// Model prices, channels and upstream cost rates: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Described, Name100, Text200, Reason, Instant, Milli, Currency, ChannelId, Decimal, FX_RATE_USED } from '../event-atoms.ts';

/** An upstream cost rate's prices: decimal major units per million tokens (image: per image, null: not priced). */
const COST_PRICES = {
  input: Decimal,
  cacheRead: Decimal,
  cacheWrite5m: Decimal,
  cacheWrite1h: Decimal,
  output: Decimal,
  image: Type.Union([Decimal, Type.Null()]),
};

export const CATALOGUE_EVENTS = {
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
};
