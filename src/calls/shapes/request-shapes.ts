// The request bodies of the model calls, each declared once: schemas/requests/*.json is written
// from these (`npm run schemas`, see documents.ts) and src/http/validate.ts checks every body
// against those files; the Static types say what a body that passed holds. Lenient where clients
// send fields the gateway ignores: no body is closed (no `additionalProperties: false`).
import { Type, type Static } from '@sinclair/typebox';
import { REASONING_EFFORTS } from '../../catalogue/index.ts';
import { IMAGE_SIZES } from '../../upstream/port.ts';
import {
  AnyObject,
  EndUser,
  Exactly,
  ModelName,
  OneOf,
  OrNull,
  OUTPUT_FORMATS,
  Ref,
  SchemaName,
  SlicedString,
  TokenCap,
  Temperature,
  TopP,
  TypeIs,
} from './shape-parts.ts';

// ------------------------------------------------------------------ parts of several bodies

/** The fields of a `json_schema` output format (chat's `response_format.json_schema`, Responses' `text.format`). */
const JSON_SCHEMA_FORMAT = {
  name: SchemaName,
  description: Type.Optional(Type.String()),
  schema: Type.Optional(AnyObject),
  strict: Type.Optional(OrNull(Type.Boolean())),
};

// ------------------------------------------------------------------ POST /v1/chat/completions

export const ImageUrl = SlicedString('^(https?://\\S+|data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2})$', {
  description: 'An http(s) URL the upstream fetches, or a base64 data URI of a png, jpeg, gif or webp image.',
});

/** The two kinds of content part, as types: what a part that passed the if/then/else below is. */
export const ChatTextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() });
export const ChatImagePart = Type.Object({ type: Type.Literal('image_url'), image_url: Type.Object({ url: Type.String() }) });

/**
 * A part of a message's content: text, or an image (`then` and `else` require the field the type
 * names). Its type is what that condition means: one part or the other.
 */
export const ChatContentPart = Type.Unsafe<Static<typeof ChatTextPart> | Static<typeof ChatImagePart>>(
  Type.Object(
    {
      type: OneOf(['text', 'image_url']),
      text: Type.Optional(Type.String()),
      image_url: Type.Optional(Type.Object({ url: Ref('imageUrl', ImageUrl) })),
    },
    { if: TypeIs('text'), then: { required: ['text'] }, else: { required: ['image_url'] } },
  ),
);

export const ChatToolCall = Type.Object({
  id: Type.String(),
  type: Exactly('function'),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});

export const ChatRequestMessage = Type.Object({
  role: OneOf(['system', 'developer', 'user', 'assistant', 'tool']),
  content: Type.Optional(Type.Union([Type.String(), Type.Null(), Type.Array(ChatContentPart, { maxItems: 1000 })])),
  name: Type.Optional(Type.String({ maxLength: 200 })),
  tool_call_id: Type.Optional(Type.String({ maxLength: 200 })),
  tool_calls: Type.Optional(Type.Array(ChatToolCall)),
});

export const ChatTool = Type.Object({
  type: Exactly('function'),
  function: Type.Object({
    name: Type.String({ minLength: 1, maxLength: 64 }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(AnyObject),
  }),
});

const NullablePenalty = OrNull(Type.Number({ minimum: -2, maximum: 2 }));

export const ChatCompletionsRequest = Type.Object({
  model: ModelName,
  messages: Type.Array(ChatRequestMessage, { minItems: 1, maxItems: 10000 }),
  reasoning_effort: Type.Optional(OneOf(REASONING_EFFORTS)),
  stream: Type.Optional(OrNull(Type.Boolean())),
  stream_options: Type.Optional(OrNull(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }))),
  max_tokens: Type.Optional(OrNull(TokenCap)),
  max_completion_tokens: Type.Optional(OrNull(TokenCap)),
  n: Type.Optional(OrNull(Type.Integer({ minimum: 1, maximum: 1 }))),
  temperature: Type.Optional(OrNull(Temperature)),
  top_p: Type.Optional(OrNull(TopP)),
  presence_penalty: Type.Optional(NullablePenalty),
  frequency_penalty: Type.Optional(NullablePenalty),
  seed: Type.Optional(OrNull(Type.Integer())),
  stop: Type.Optional(Type.Union([Type.String(), Type.Null(), Type.Array(Type.String(), { maxItems: 4 })])),
  user: Type.Optional(EndUser),
  tools: Type.Optional(Type.Array(ChatTool, { maxItems: 128 })),
  tool_choice: Type.Optional(Type.Union([OneOf(['none', 'auto', 'required']), AnyObject])),
  parallel_tool_calls: Type.Optional(Type.Boolean()),
  response_format: Type.Optional(
    Type.Object(
      { type: OneOf(OUTPUT_FORMATS) },
      { if: TypeIs('json_schema'), then: { required: ['json_schema'], properties: { json_schema: Type.Object(JSON_SCHEMA_FORMAT) } } },
    ),
  ),
  logit_bias: Type.Optional(OrNull(AnyObject)),
  metadata: Type.Optional(OrNull(AnyObject)),
  store: Type.Optional(OrNull(Type.Boolean())),
});

// ------------------------------------------------------------------ POST /v1/images/generations and /edits

export const ImagesRequest = Type.Object({
  model: ModelName,
  prompt: Type.String({ minLength: 1, maxLength: 8000 }),
  image: Type.Optional(Type.String({ minLength: 1 })),
  size: Type.Optional(OneOf(IMAGE_SIZES)),
  n: Type.Optional(Exactly(1)),
  response_format: Type.Optional(Exactly('b64_json')),
  quality: Type.Optional(Type.String()),
  user: Type.Optional(EndUser),
});

// ------------------------------------------------------------------ POST /v1/embeddings

/** OpenAI's limits: at most 2,048 inputs a call, none empty. */
const EMBEDDING_INPUTS = 2048;
const TokenId = Type.Integer({ minimum: 0 });

export const EmbeddingsRequest = Type.Object({
  model: ModelName,
  input: Type.Union([
    Type.String({ minLength: 1 }),
    Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: EMBEDDING_INPUTS }),
    Type.Array(TokenId, { minItems: 1 }),
    Type.Array(Type.Array(TokenId, { minItems: 1 }), { minItems: 1, maxItems: EMBEDDING_INPUTS }),
  ]),
  encoding_format: Type.Optional(OneOf(['float', 'base64'])),
  dimensions: Type.Optional(Type.Integer({ minimum: 1, maximum: 65536 })),
  user: Type.Optional(EndUser),
});

// ------------------------------------------------------------------ POST /v1/messages and /v1/messages/count_tokens

/** An image's source: base64 data of a known type, or a URL (other kinds, such as file ids, pass unchecked). */
export const AnthropicImageSource = Type.Object(
  { type: Type.String() },
  {
    allOf: [
      {
        if: TypeIs('base64', true),
        then: {
          required: ['media_type', 'data'],
          properties: {
            media_type: OneOf(['image/jpeg', 'image/png', 'image/gif', 'image/webp']),
            data: SlicedString('^[A-Za-z0-9+/]+={0,2}$'),
          },
        },
      },
      { if: TypeIs('url', true), then: { required: ['url'], properties: { url: SlicedString('^https?://\\S+$') } } },
    ],
  },
);

/** A content block: any type; an image block's source is checked. */
export const AnthropicBlock = Type.Object(
  { type: Type.String() },
  { if: TypeIs('image', true), then: { required: ['source'], properties: { source: Ref('imageSource', AnthropicImageSource) } } },
);

export const AnthropicMessages = Type.Array(
  Type.Object({
    role: OneOf(['user', 'assistant', 'system']),
    content: Type.Union([Type.String(), Type.Array(Ref('block', AnthropicBlock), { maxItems: 10000 })]),
  }),
  { minItems: 1, maxItems: 10000 },
);

export const AnthropicSystem = Type.Union([Type.String(), Type.Array(Ref('block', AnthropicBlock))]);

export const AnthropicTools = Type.Array(AnyObject, { maxItems: 1000 });

/** What the two Messages bodies share, under `definitions`. */
export const ANTHROPIC_DEFINITIONS = {
  block: AnthropicBlock,
  imageSource: AnthropicImageSource,
  messages: AnthropicMessages,
  system: AnthropicSystem,
  tools: AnthropicTools,
};

export const MessagesRequest = Type.Object({
  model: ModelName,
  messages: Ref('messages', AnthropicMessages),
  max_tokens: TokenCap,
  system: Type.Optional(Ref('system', AnthropicSystem)),
  tools: Type.Optional(Ref('tools', AnthropicTools)),
  tool_choice: Type.Optional(
    Type.Object({ type: Type.String(), name: Type.Optional(Type.String()), disable_parallel_tool_use: Type.Optional(Type.Boolean()) }),
  ),
  stream: Type.Optional(OrNull(Type.Boolean())),
  temperature: Type.Optional(OrNull(Temperature)),
  top_p: Type.Optional(OrNull(TopP)),
  top_k: Type.Optional(OrNull(Type.Integer({ minimum: 0 }))),
  stop_sequences: Type.Optional(Type.Array(Type.String())),
  metadata: Type.Optional(OrNull(AnyObject)),
  thinking: Type.Optional(OrNull(AnyObject)),
  output_config: Type.Optional(OrNull(AnyObject)),
});

export const MessagesCountTokensRequest = Type.Object({
  model: ModelName,
  messages: Ref('messages', AnthropicMessages),
  system: Type.Optional(Ref('system', AnthropicSystem)),
  tools: Type.Optional(Ref('tools', AnthropicTools)),
});

// ------------------------------------------------------------------ POST /v1/responses

const ResponsesTextFormat = Type.Object(
  { type: OneOf(OUTPUT_FORMATS) },
  { if: TypeIs('json_schema'), then: { required: ['name', 'schema'], properties: JSON_SCHEMA_FORMAT } },
);

const StringMap = Type.Unsafe<Record<string, string>>({ type: 'object', additionalProperties: Type.String() });

export const ResponsesRequest = Type.Object({
  model: ModelName,
  input: Type.Union([Type.String(), Type.Array(AnyObject, { maxItems: 100000 })]),
  instructions: Type.Optional(OrNull(Type.String())),
  tools: Type.Optional(Type.Array(Type.Object({ type: Type.String() }), { maxItems: 1000 })),
  tool_choice: Type.Optional(Type.Union([Type.String(), AnyObject])),
  max_output_tokens: Type.Optional(OrNull(TokenCap)),
  reasoning: Type.Optional(OrNull(AnyObject)),
  stream: Type.Optional(OrNull(Type.Boolean())),
  temperature: Type.Optional(OrNull(Temperature)),
  top_p: Type.Optional(OrNull(TopP)),
  parallel_tool_calls: Type.Optional(OrNull(Type.Boolean())),
  previous_response_id: Type.Optional(OrNull(Type.String())),
  background: Type.Optional(OrNull(Type.Boolean())),
  text: Type.Optional(OrNull(Type.Object({ format: Type.Optional(ResponsesTextFormat) }))),
  metadata: Type.Optional(OrNull(StringMap)),
  store: Type.Optional(OrNull(Type.Boolean())),
});

export type ChatCompletionsRequest = Static<typeof ChatCompletionsRequest>;
export type ChatRequestMessage = Static<typeof ChatRequestMessage>;
export type ChatContentPart = Static<typeof ChatContentPart>;
export type ChatToolCall = Static<typeof ChatToolCall>;
export type ChatTool = Static<typeof ChatTool>;
export type ImagesRequest = Static<typeof ImagesRequest>;
export type EmbeddingsRequest = Static<typeof EmbeddingsRequest>;
export type MessagesRequest = Static<typeof MessagesRequest>;
export type MessagesCountTokensRequest = Static<typeof MessagesCountTokensRequest>;
export type ResponsesRequest = Static<typeof ResponsesRequest>;
