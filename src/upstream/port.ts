// The provider port: what the gateway needs from any upstream that generates text or images.
// The canonical chat shape follows OpenAI chat completions, because every other dialect
// (Anthropic Messages, OpenAI Responses) translates into it.

export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface ChatMessage {
  role: Role;
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  /**
   * The caller asked for the prompt to be cached up to the end of this message (Anthropic's
   * cache_control): upstreams whose caching is explicit (Bedrock's cache points) mark it there.
   */
  cacheBreakpoint?: true;
}

/**
 * Usage as the gateway meters it. `prompt_tokens` is every prompt token, cached or not (OpenAI's
 * rule; an Anthropic adapter adds input, cache-write and cache-read tokens); `completion_tokens`
 * includes reasoning/thinking. The optional parts say how the upstream counted them.
 */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens read from the upstream's prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens). */
  cached_tokens?: number;
  /** Prompt tokens written to the cache (Anthropic cache_creation_input_tokens). */
  cache_write_tokens?: number;
  /** Of cache_write_tokens, those written for one hour (Anthropic cache_creation.ephemeral_1h_input_tokens); the rest live 5 minutes. */
  cache_write_1h_tokens?: number;
  /** Completion tokens spent reasoning or thinking. */
  reasoning_tokens?: number;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChatCall {
  /** The model name the upstream knows (from the models config), not the public id. */
  upstreamModel: string;
  messages: ChatMessage[];
  /** Hard cap on generated tokens: the gateway's quota hold covers exactly this many. */
  maxTokens: number;
  reasoningEffort?: string;
  tools?: ToolDefinition[];
  toolChoice?: unknown;
  /** Other common parameters (temperature, top_p, stop, seed, ...) passed through untouched. */
  params: Record<string, unknown>;
  signal: AbortSignal;
}

export interface ChatOutcome {
  content: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage: Usage;
  /** The upstream's id of this response (for reconciliation), when it gave one. */
  upstreamId?: string;
}

/** One piece of a streamed reply. Exactly one `finish` part ends a stream that was not aborted. */
export type ChatStreamPart =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments?: string }
  | { type: 'finish'; finishReason: FinishReason; usage: Usage; upstreamId?: string };

/** The image sizes every image model here makes (the images request's schema lists the same). */
export const IMAGE_SIZES = ['1024x1024', '1024x1536', '1536x1024'] as const;
export type ImageSize = (typeof IMAGE_SIZES)[number];

export interface ImageCall {
  upstreamModel: string;
  prompt: string;
  size: ImageSize;
  /** Present for edits: the decoded source image. */
  source?: { bytes: Buffer; mime: string };
  signal: AbortSignal;
}

export interface ImageOutcome {
  jpeg: Buffer;
}

/** The dialects callers speak; a provider whose own dialect matches gets the caller's body as is. */
export type Dialect = 'chat.completions' | 'messages' | 'responses';

/**
 * A call forwarded in the caller's own dialect (pass-through). The adapter maps the model name,
 * sets the output cap (max_tokens, max_completion_tokens or max_output_tokens) to `maxTokens`,
 * keeps every other field, and shows the caller `publicModel` wherever the upstream names its model.
 */
export interface NativeCall {
  dialect: Dialect;
  upstreamModel: string;
  publicModel: string;
  /** The caller's validated body; never mutated. */
  body: Record<string, unknown>;
  maxTokens: number;
  signal: AbortSignal;
  /** Headers of the caller's dialect that change what the upstream accepts (anthropic-beta), passed on as they came. */
  headers?: Record<string, string>;
}

export interface NativeReply {
  /** The upstream's JSON reply with the public model id. */
  body: Record<string, unknown>;
  usage: Usage;
  upstreamId?: string;
}

/** One server-sent event of a pass-through stream, forwarded unchanged (but for the model id). */
export interface NativeStreamEvent {
  /** The SSE event name (Anthropic, Responses); absent for chat completions chunks. */
  event?: string;
  /** The data line as it goes to the caller. */
  data: string;
  /** Text, thinking or tool arguments this event streams: what a caller who leaves has received. */
  generated?: string;
  /** The upstream's final usage: the charge is committed before this event is forwarded. */
  usage?: Usage;
  /** The upstream's id of the response, on the first event that names it (and on the final one). */
  upstreamId?: string;
  /** The prompt as the upstream counted it so far (Anthropic's message_start): a caller who leaves pays this prompt, not the gateway's estimate. */
  promptUsage?: Usage;
  /** Metered but not forwarded (the usage chunk the gateway asked for and the caller did not). */
  hidden?: boolean;
}

export interface NativeProvider {
  /** The dialects this upstream speaks natively. */
  readonly dialects: ReadonlySet<Dialect>;
  call(call: NativeCall): Promise<NativeReply>;
  /** Ends after the final event; throws UpstreamError on an error event or a cut stream. */
  stream(call: NativeCall): AsyncIterable<NativeStreamEvent>;
  /** Anthropic's count_tokens, answered by the upstream itself. */
  countTokens?(call: Omit<NativeCall, 'maxTokens'>): Promise<number>;
}

/** What the caller asked to embed: text (one or many), or token ids (one list or many). */
export type EmbeddingInput = string | string[] | number[] | number[][];

export interface EmbedCall {
  upstreamModel: string;
  input: EmbeddingInput;
  /** base64: each vector as its float32 values' little-endian bytes, base64-encoded (OpenAI's format). */
  encodingFormat: 'float' | 'base64';
  dimensions?: number;
  user?: string;
  signal: AbortSignal;
}

export interface EmbedOutcome {
  /** One vector per input, in input order. */
  vectors: Array<number[] | string>;
  /** The input tokens the upstream counted (what the call is charged). */
  promptTokens: number;
}

export interface Provider {
  readonly name: string;
  chat(call: ChatCall): Promise<ChatOutcome>;
  chatStream(call: ChatCall): AsyncIterable<ChatStreamPart>;
  image(call: ImageCall): Promise<ImageOutcome>;
  /** Present when the upstream speaks one of the callers' dialects (pass-through). */
  native?: NativeProvider;
  /** false for upstreams that cannot make images (they are skipped for image calls). */
  readonly images?: boolean;
  /** Present when the upstream makes embeddings (channels without it are skipped for those calls). */
  embed?(call: EmbedCall): Promise<EmbedOutcome>;
}

/**
 * How an upstream failure is handled:
 * - `retriable`: the upstream (not the request) failed: 429, 529, 5xx, timeouts, connection
 *   errors, garbage. Another channel may be tried if nothing reached the caller yet.
 * - `request`: the upstream refused the request itself (400, 413, 422): the caller's 400.
 * - `config`: the gateway's own credentials or settings were refused (401, 403, 404): a 502 that
 *   names no secret; another channel may still be tried.
 */
export type UpstreamFailureKind = 'retriable' | 'request' | 'config';

/** Raised by adapters when the upstream fails; the gateway answers 502 (or 400) and releases the hold. */
export class UpstreamError extends Error {
  readonly kind: UpstreamFailureKind;
  constructor(
    message: string,
    readonly status?: number,
    kind?: UpstreamFailureKind,
  ) {
    super(message);
    this.name = 'UpstreamError';
    this.kind = kind ?? failureKindOf(status);
  }
}

/** The kind of failure an upstream HTTP status means (no status: a network failure or a timeout). */
export function failureKindOf(status: number | undefined): UpstreamFailureKind {
  if (status === undefined) return 'retriable';
  if (status === 401 || status === 403) return 'config';
  if (status === 404) return 'config'; // the upstream model name or path is wrong: the operator's to fix
  if (status === 400 || status === 413 || status === 422) return 'request';
  return 'retriable';
}
