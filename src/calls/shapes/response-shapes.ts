// The /v1 replies, each declared once: schemas/responses/*.json is written from these (`npm run
// schemas`) and test/request-response-shapes checks real replies against those files. A reply that
// may be an upstream's own body passed through (a chat completion, a message, a Response and the
// chunks of a stream) is open: it has at least these fields, and may carry more. A reply the
// gateway alone makes (images, count_tokens, models, subscription, errors) is closed.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ChatToolCall } from './request-shapes.ts';
import { IMAGE_SIZES } from '../../upstream/port.ts';
import { AnyObject, Closed, OneOf, OtherThan, type SchemaDocument } from './shape-parts.ts';

const Count = Type.Integer({ minimum: 0 });
const UnixTime = Type.Integer({ minimum: 0, description: 'Seconds since 1970-01-01 UTC.' });
const Instant = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
/** What the call cost, in the account's tokens (the model's multiplier applied). */
const Billed = Type.Integer({ minimum: 0, description: 'What the call cost: billed tokens, the model multiplier applied.' });
const Base64 = Type.String({ pattern: '^[A-Za-z0-9+/]+={0,2}$' });

// ------------------------------------------------------------------ OpenAI chat completions

/** Why a choice ended: the gateway renders the first three; an upstream's body may give the others. */
const FINISH_REASONS = ['stop', 'length', 'tool_calls', 'content_filter', 'function_call'] as const;

const CHAT_USAGE = {
  prompt_tokens: Count,
  completion_tokens: Count,
  total_tokens: Count,
  prompt_tokens_details: Type.Optional(Type.Object({ cached_tokens: Type.Optional(Count) })),
  completion_tokens_details: Type.Optional(Type.Object({ reasoning_tokens: Type.Optional(Count) })),
};

/** What a chat completion and each of its chunks begin with. */
const chatReplyHead = <O extends string>(object: O) => ({
  id: Type.String(),
  object: Type.Literal(object),
  created: UnixTime,
  model: Type.String(),
  system_fingerprint: Type.Optional(Nullable(Type.String())),
});

/** The usage of a finished call, with what it cost. */
export const ChatUsage = Type.Object({ ...CHAT_USAGE, billed_tokens: Billed });

export const ChatCompletion = Type.Object(
  {
    ...chatReplyHead('chat.completion'),
    choices: Type.Array(
      Type.Object({
        index: Count,
        finish_reason: OneOf(FINISH_REASONS),
        logprobs: Nullable(AnyObject),
        message: Type.Object({
          role: Type.Literal('assistant'),
          content: Nullable(Type.String()),
          refusal: Nullable(Type.String()),
          tool_calls: Type.Optional(Type.Array(ChatToolCall)),
        }),
      }),
      { minItems: 1 },
    ),
    usage: ChatUsage,
  },
  { description: 'POST /v1/chat/completions without stream. usage.billed_tokens is what the call cost.' },
);

const ChunkToolCall = Type.Object({
  index: Count,
  id: Type.Optional(Type.String()),
  type: Type.Optional(Type.Literal('function')),
  function: Type.Optional(Type.Object({ name: Type.Optional(Type.String()), arguments: Type.Optional(Type.String()) })),
});

export const ChatCompletionChunk = Type.Object(
  {
    ...chatReplyHead('chat.completion.chunk'),
    choices: Type.Array(
      Type.Object({
        index: Count,
        delta: Type.Object({
          role: Type.Optional(Type.Literal('assistant')),
          content: Type.Optional(Nullable(Type.String())),
          refusal: Type.Optional(Nullable(Type.String())),
          tool_calls: Type.Optional(Type.Array(ChunkToolCall)),
        }),
        finish_reason: Nullable(OneOf(FINISH_REASONS)),
        logprobs: Type.Optional(Nullable(AnyObject)),
      }),
    ),
    usage: Type.Optional(Nullable(Type.Object({ ...CHAT_USAGE, billed_tokens: Type.Optional(Billed) }))),
    billed_tokens: Type.Optional(Billed),
  },
  {
    description:
      "One data line of a POST /v1/chat/completions stream (then `[DONE]`). What the call cost: usage.billed_tokens in the usage chunk when the caller asked for one (stream_options.include_usage), else a top-level billed_tokens on the final chunk. An error during the stream is a line in error.json's shape.",
  },
);

// ------------------------------------------------------------------ images

export const ImagesReply = Closed(
  {
    created: UnixTime,
    data: Type.Array(Closed({ b64_json: Base64 }), { minItems: 1, maxItems: 1 }),
    output_format: Type.Literal('jpeg'),
    size: OneOf(IMAGE_SIZES),
    billed_tokens: Billed,
  },
  { description: 'POST /v1/images/generations and /v1/images/edits: one JPEG, in base64.' },
);

export const EmbeddingsReply = Closed(
  {
    object: Type.Literal('list'),
    data: Type.Array(
      Closed({
        object: Type.Literal('embedding'),
        index: Count,
        embedding: Type.Union([Type.Array(Type.Number(), { minItems: 1 }), Base64], {
          description: 'The vector: floats, or with encoding_format base64 its float32 values as little-endian bytes in base64.',
        }),
      }),
      { minItems: 1 },
    ),
    model: Type.String({ minLength: 1 }),
    usage: Closed({ prompt_tokens: Count, total_tokens: Count, billed_tokens: Billed }),
  },
  { description: 'POST /v1/embeddings: one vector per input, in input order.' },
);

// ------------------------------------------------------------------ Anthropic Messages

const STOP_REASONS = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'pause_turn', 'refusal', 'model_context_window_exceeded'] as const;

const MessageContentBlock = Type.Union([
  Type.Object({ type: Type.Literal('text'), text: Type.String() }),
  Type.Object({ type: Type.Literal('tool_use'), id: Type.String(), name: Type.String(), input: AnyObject }),
  Type.Object({ type: OtherThan(['text', 'tool_use']) }),
]);

export const MessageUsage = Type.Object({
  input_tokens: Count,
  output_tokens: Count,
  cache_creation_input_tokens: Type.Optional(Nullable(Count)),
  cache_read_input_tokens: Type.Optional(Nullable(Count)),
  service_tier: Type.Optional(Nullable(Type.String())),
  billed_tokens: Billed,
});

export const MessageReply = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('message'),
    role: Type.Literal('assistant'),
    model: Type.String(),
    content: Type.Array(MessageContentBlock),
    stop_reason: Nullable(OneOf(STOP_REASONS)),
    stop_sequence: Nullable(Type.String()),
    usage: MessageUsage,
  },
  { description: 'POST /v1/messages without stream (the Anthropic Messages API). usage.billed_tokens is what the call cost.' },
);

export const CountTokensReply = Closed(
  { input_tokens: Count },
  { description: 'POST /v1/messages/count_tokens: the input a /v1/messages call with this body would send; nothing is charged.' },
);

// ------------------------------------------------------------------ OpenAI Responses

const ITEM_STATUSES = ['in_progress', 'completed', 'incomplete'] as const;

const ResponseOutputItem = Type.Union([
  Type.Object({
    id: Type.String(),
    type: Type.Literal('message'),
    status: OneOf(ITEM_STATUSES),
    role: Type.Literal('assistant'),
    content: Type.Array(
      Type.Union([
        Type.Object({
          type: Type.Literal('output_text'),
          text: Type.String(),
          annotations: Type.Array(AnyObject),
          logprobs: Type.Optional(Type.Array(AnyObject)),
        }),
        Type.Object({ type: Type.Literal('refusal'), refusal: Type.String() }),
      ]),
    ),
  }),
  Type.Object({
    id: Type.Optional(Type.String()),
    type: Type.Literal('function_call'),
    status: Type.Optional(OneOf(ITEM_STATUSES)),
    call_id: Type.String(),
    name: Type.String(),
    arguments: Type.String(),
  }),
  Type.Object({ type: OtherThan(['message', 'function_call']) }),
]);

const ResponseTool = Type.Union([
  Type.Object({
    type: Type.Literal('function'),
    name: Type.String(),
    description: Type.Optional(Nullable(Type.String())),
    parameters: Nullable(AnyObject),
    strict: Nullable(Type.Boolean()),
  }),
  Type.Object({ type: OtherThan(['function']) }),
]);

export const ResponseUsage = Type.Object({
  input_tokens: Count,
  input_tokens_details: Type.Object({ cached_tokens: Count, cache_write_tokens: Type.Optional(Count) }),
  output_tokens: Count,
  output_tokens_details: Type.Object({ reasoning_tokens: Count }),
  total_tokens: Count,
  billed_tokens: Billed,
});

export const ResponsesReply = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('response'),
    created_at: UnixTime,
    status: OneOf(['completed', 'incomplete', 'failed', 'in_progress', 'cancelled', 'queued']),
    completed_at: Type.Optional(Nullable(UnixTime)),
    error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
    incomplete_details: Nullable(Type.Object({ reason: Type.String() })),
    instructions: Nullable(Type.Union([Type.String(), Type.Array(AnyObject)])),
    max_output_tokens: Type.Optional(Nullable(Count)),
    model: Type.String(),
    output: Type.Array(ResponseOutputItem),
    parallel_tool_calls: Type.Boolean(),
    previous_response_id: Type.Optional(Nullable(Type.String())),
    reasoning: Type.Optional(Nullable(Type.Object({ effort: Nullable(Type.String()), summary: Type.Optional(Nullable(Type.String())) }))),
    service_tier: Type.Optional(Nullable(Type.String())),
    store: Type.Optional(Type.Boolean()),
    temperature: Nullable(Type.Number()),
    text: Type.Optional(
      Type.Object({
        format: Type.Optional(
          Type.Object({ type: Type.String() }, { additionalProperties: true, description: "The caller's text.format as it came (else {type: 'text'})." }),
        ),
      }),
    ),
    tool_choice: Type.Union([Type.String(), AnyObject]),
    tools: Type.Array(ResponseTool),
    top_p: Nullable(Type.Number()),
    truncation: Type.Optional(Nullable(OneOf(['auto', 'disabled']))),
    metadata: Nullable(Type.Unsafe<Record<string, string>>({ type: 'object', additionalProperties: Type.String() })),
    usage: ResponseUsage,
  },
  { description: 'POST /v1/responses without stream (the OpenAI Responses API). usage.billed_tokens is what the call cost.' },
);

// ------------------------------------------------------------------ the account's reads

export const ModelsList = Closed(
  {
    object: Type.Literal('list'),
    data: Type.Array(
      Closed({
        id: Type.String(),
        object: Type.Literal('model'),
        created: UnixTime,
        owned_by: Type.Literal('tollgate'),
        status: Type.Literal('ACTIVE'),
        multiplier: Type.Number({ exclusiveMinimum: 0, description: "The model's token cost factor (1.25: a billed token per 0.8 tokens)." }),
        aliases: Type.Array(Type.String()),
      }),
    ),
  },
  { description: 'GET /v1/models: the active models the calling key may use.' },
);

const TOKEN_POOL = { used: Count, remaining: Count };
const CREDIT = Closed({
  granted: Count,
  ...TOKEN_POOL,
  expires_at: Nullable(Instant),
  priority: Type.Integer({ minimum: 1, maximum: 100, description: 'Lower numbers are drawn first.' }),
  models: Nullable(Type.Array(Type.String(), { description: 'The models it pays for (null: every model).' })),
  status: OneOf(['active', 'expired']),
});

const Payment = Closed({
  object: Type.Literal('payment'),
  id: Type.String(),
  account_id: Type.String(),
  processor: OneOf(['manual', 'stripe', 'code']),
  amount: Count,
  currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  display: Type.String({ description: 'The amount in major units, as a decimal string.' }),
  fee: Nullable(Count),
  tax: Type.Integer({ minimum: 0, description: 'The tax held in the amount (0: untaxed): docs/payments.md#tax.' }),
  received_at: Instant,
  reference: Nullable(Type.String()),
  item: Type.Union([
    Closed({ kind: Type.Literal('plan'), plan_id: Type.String(), tokens: Count }),
    Closed({ kind: Type.Literal('pack'), pack_id: Type.String(), tokens: Count }),
  ]),
  period_starts_at: Nullable(Instant),
  refunded: Count,
  tax_refunded: Type.Integer({ minimum: 0, description: 'The tax refunds gave back.' }),
  tokens_withdrawn: Count,
  paid_in: Nullable(
    Closed(
      {
        amount: Count,
        currency: Type.String({ pattern: '^[A-Z]{3}$' }),
        display: Type.String(),
        refunded: Count,
        rate: Type.String({ description: 'Settlement currency per 1 unit of this one.' }),
        day: Type.String(),
        source: Type.String(),
      },
      {
        description:
          'Paid in another currency than the settlement currency: as paid, and the exchange rate it was booked at (amount, fee and tax above are in the settlement currency).',
      },
    ),
  ),
});

const Cancellation = Closed({
  object: Type.Literal('cancellation'),
  processor: OneOf(['manual', 'stripe', 'code']),
  subscription_id: Type.String(),
  plan_id: Nullable(Type.String()),
  kind: OneOf(['at_period_end', 'deleted']),
  cancelled_at: Instant,
  ends_at: Nullable(Instant),
});

export const SubscriptionReply = Closed(
  {
    object: Type.Literal('subscription'),
    account_id: Type.String(),
    plan: Nullable(Closed({ id: Type.String(), name: Nullable(Type.String()) })),
    status: OneOf(['active', 'expired']),
    quota: Closed({ total: Count, ...TOKEN_POOL, reserved: Count }),
    extra_tokens: Closed({
      granted: Count,
      ...TOKEN_POOL,
      credits: Type.Array(CREDIT, {
        description:
          'The grants of extra tokens with terms (an expiry, a priority, a scope of models), in draw-down order; the other extra tokens never expire.',
      }),
    }),
    remaining_tokens: Type.Integer({ minimum: 0, description: 'What a new call may hold: the main quota (while the plan is active) and the extra tokens.' }),
    starts_at: Nullable(Instant),
    expires_at: Nullable(Instant),
    rate_limit: Closed({ requests_per_minute: Nullable(Type.Integer({ minimum: 1 })) }),
    models: Type.Array(Type.String(), { description: "The plan's models ('*': all)." }),
    purchases: Type.Array(Payment),
    cancellation: Nullable(Cancellation),
  },
  { description: "GET /v1/subscription: the plan, the remaining quota and extra tokens, the plan's expiry, purchases." },
);

// ------------------------------------------------------------------ errors

export const OpenAIErrorBody = Closed(
  {
    error: Closed({
      message: Type.String({ minLength: 1 }),
      type: Type.String(),
      param: Nullable(Type.String()),
      code: Nullable(Type.String()),
    }),
  },
  { description: 'Every failure outside the Anthropic routes (and an error line in a chat completions stream).' },
);

/** Anthropic's broad category of a failure, by HTTP status (src/dialects/anthropic-messages/render.ts). */
export const ANTHROPIC_ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'billing_error',
  'permission_error',
  'not_found_error',
  'request_too_large',
  'rate_limit_error',
  'api_error',
  'overloaded_error',
  'timeout_error',
] as const;

export const AnthropicErrorBody = Closed(
  {
    type: Type.Literal('error'),
    error: Closed({
      type: OneOf(ANTHROPIC_ERROR_TYPES),
      message: Type.String({ minLength: 1 }),
      details: Type.Optional(Closed({ error_code: Type.String({ description: "The gateway's own code (OpenAI's `code`)." }) })),
    }),
    request_id: Type.Optional(Type.String()),
  },
  { description: "Every failure of /v1/messages and /v1/messages/count_tokens, in Anthropic's shape." },
);

/** The replies, by file name under schemas/responses/ (a request's reply has its request's name). */
export const RESPONSE_SHAPES: Record<string, SchemaDocument> = {
  'chat-completions': { title: 'ChatCompletion', shape: ChatCompletion },
  'chat-completions-chunk': { title: 'ChatCompletionChunk', shape: ChatCompletionChunk },
  images: { title: 'ImagesResponse', shape: ImagesReply },
  embeddings: { title: 'CreateEmbeddingResponse', shape: EmbeddingsReply },
  messages: { title: 'Message (Anthropic Messages API)', shape: MessageReply },
  'messages-count-tokens': { title: 'MessageTokensCount (Anthropic Messages API)', shape: CountTokensReply },
  responses: { title: 'Response (OpenAI Responses API)', shape: ResponsesReply },
  models: { title: 'ModelsList', shape: ModelsList },
  subscription: { title: 'Subscription', shape: SubscriptionReply },
  error: { title: 'Error', shape: OpenAIErrorBody },
  'messages-error': { title: 'Error (Anthropic Messages API)', shape: AnthropicErrorBody },
};

export type ChatCompletion = Static<typeof ChatCompletion>;
export type ChatCompletionChunk = Static<typeof ChatCompletionChunk>;
export type ImagesReply = Static<typeof ImagesReply>;
export type EmbeddingsReply = Static<typeof EmbeddingsReply>;
export type MessageReply = Static<typeof MessageReply>;
export type CountTokensReply = Static<typeof CountTokensReply>;
export type ResponsesReply = Static<typeof ResponsesReply>;
export type ModelsList = Static<typeof ModelsList>;
export type SubscriptionReply = Static<typeof SubscriptionReply>;
export type OpenAIErrorBody = Static<typeof OpenAIErrorBody>;
export type AnthropicErrorBody = Static<typeof AnthropicErrorBody>;
