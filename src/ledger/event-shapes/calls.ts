// A call's hold, then its charge or its release: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Described, Id, Count, Positive, Name100, Text200, Instant, ChannelId, Bool, Failovers, CHARGE_COMMON } from '../event-atoms.ts';

export const CALL_EVENTS = {
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
};
