// The provider port: what the gateway needs from any upstream that generates text or images.
// The canonical chat shape follows OpenAI chat completions, because every other dialect
// (Anthropic Messages, OpenAI Responses) translates into it.

export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string } };

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
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
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
}

/** One piece of a streamed reply. Exactly one `finish` part ends a stream that was not aborted. */
export type ChatStreamPart =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments?: string }
  | { type: 'finish'; finishReason: FinishReason; usage: Usage };

export type ImageSize = '1024x1024' | '1024x1536' | '1536x1024';

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

export interface Provider {
  readonly name: string;
  chat(call: ChatCall): Promise<ChatOutcome>;
  chatStream(call: ChatCall): AsyncIterable<ChatStreamPart>;
  image(call: ImageCall): Promise<ImageOutcome>;
}

/** Raised by adapters when the upstream fails; the gateway answers 502 and releases the hold. */
export class UpstreamError extends Error {
  constructor(message: string, readonly status?: number) {
    super(message);
    this.name = 'UpstreamError';
  }
}
