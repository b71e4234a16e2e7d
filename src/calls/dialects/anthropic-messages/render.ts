// The Anthropic Messages dialect: translates a /v1/messages body into the canonical chat shape,
// and renders replies, streams and errors the way Anthropic's API does. Metering lives in
// chat-call.ts; nothing here touches the ledger.
import type { CanonicalRequest } from '../../chat-call.ts';
import type { StreamRenderer } from '../../chat-results.ts';
import { REASONING_EFFORTS } from '../../../catalogue/index.ts';
import { randomUUID } from 'node:crypto';
import type { ApiError } from '../../../http/errors.ts';
import { badRequest } from '../../../http/errors.ts';
import type { ChatMessage, ChatOutcome, ChatStreamPart, ContentPart, FinishReason, ToolCall, ToolDefinition, Usage } from '../../../upstream/port.ts';
import type { SseWriter } from '../../../http/sse.ts';

type Json = Record<string, unknown>;

export interface MessagesBody {
  model: string;
  messages: { role: string; content: unknown }[];
  max_tokens?: number;
  system?: unknown;
  tools?: Json[];
  tool_choice?: Json;
  stream?: boolean | null;
  temperature?: number | null;
  top_p?: number | null;
  stop_sequences?: string[];
  output_config?: { effort?: unknown; format?: unknown } | null;
  /** The structured-outputs beta's name for output_config.format. */
  output_format?: unknown;
  [field: string]: unknown;
}

export type { CanonicalRequest } from '../../chat-call.ts';

const EFFORTS: ReadonlySet<string> = new Set(REASONING_EFFORTS);
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The text of a `system` field: a string or a list of text blocks (cache_control etc. ignored). */
function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) return '';
  return system
    .filter((b) => isObject(b) && b.type === 'text' && typeof b.text === 'string')
    .map((b) => (b as { text: string }).text)
    .join('\n\n');
}

/** An image block's source as a URL the canonical shape carries (data URI for base64). */
function imageUrl(block: Json, where: string): string | null {
  const source = block.source;
  if (!isObject(source)) throw badRequest(`${where}.source: an image block needs a source.`, `${where}.source`);
  if (source.type === 'base64') {
    if (typeof source.data !== 'string' || typeof source.media_type !== 'string')
      throw badRequest(`${where}.source: base64 images need media_type and data.`, `${where}.source`);
    return `data:${source.media_type};base64,${source.data}`;
  }
  if (source.type === 'url') {
    if (typeof source.url !== 'string') throw badRequest(`${where}.source.url: must be a string.`, `${where}.source.url`);
    return source.url;
  }
  return null; // file ids and other sources cannot be forwarded; the block is skipped
}

/** Text and image parts of a user-side content list; unknown block types are skipped. */
function userParts(blocks: Json[], where: string): ContentPart[] {
  const parts: ContentPart[] = [];
  blocks.forEach((block, i) => {
    if (block.type === 'text' && typeof block.text === 'string') parts.push({ type: 'text', text: block.text });
    else if (block.type === 'image') {
      const url = imageUrl(block, `${where}[${i}]`);
      if (url) parts.push({ type: 'image_url', image_url: { url } });
    } else if (block.type === 'document' && isObject(block.source) && block.source.type === 'text' && typeof block.source.data === 'string') {
      parts.push({ type: 'text', text: block.source.data });
    }
  });
  return parts;
}

function simplify(parts: ContentPart[]): string | ContentPart[] {
  return parts.every((p) => p.type === 'text') ? parts.map((p) => (p as { text: string }).text).join('\n') : parts;
}

function toolResultContent(content: unknown, where: string): { text: string; images: ContentPart[] } {
  if (content === undefined || content === null) return { text: '', images: [] };
  if (typeof content === 'string') return { text: content, images: [] };
  if (!Array.isArray(content)) throw badRequest(`${where}.content: must be a string or a list of blocks.`, `${where}.content`);
  const parts = userParts(content.filter(isObject), `${where}.content`);
  return {
    text: parts
      .filter((p) => p.type === 'text')
      .map((p) => (p as { text: string }).text)
      .join('\n'),
    images: parts.filter((p) => p.type === 'image_url'),
  };
}

function blocksOf(content: unknown, where: string): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (Array.isArray(content)) return content.filter(isObject);
  throw badRequest(`${where}.content: must be a string or a list of content blocks.`, `${where}.content`);
}

const hasCacheControl = (blocks: unknown): boolean => Array.isArray(blocks) && blocks.some((b) => isObject(b) && isObject(b.cache_control));

/** Anthropic messages (with system, tool_use and tool_result blocks) as canonical chat messages. */
export function toCanonicalMessages(body: Pick<MessagesBody, 'system' | 'messages'>): ChatMessage[] {
  const out: ChatMessage[] = [];
  const system = systemText(body.system);
  if (system) out.push({ role: 'system', content: system, ...(hasCacheControl(body.system) && { cacheBreakpoint: true as const }) });
  const addTurn = (message: MessagesBody['messages'][number], m: number, blocks: Json[]): void => {
    const where = `messages[${m}]`;
    if (message.role === 'assistant') {
      const text = blocks
        .filter((b) => b.type === 'text' && typeof b.text === 'string')
        .map((b) => b.text as string)
        .join('');
      const toolCalls: ToolCall[] = [];
      blocks.forEach((b, i) => {
        if (b.type !== 'tool_use') return;
        if (typeof b.id !== 'string' || typeof b.name !== 'string')
          throw badRequest(`${where}.content[${i}]: tool_use blocks need an id and a name.`, `${where}.content[${i}]`);
        toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
      });
      // thinking, redacted_thinking, server tool blocks and the like carry nothing we forward.
      if (text || toolCalls.length) out.push({ role: 'assistant', content: text || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) });
      return;
    }
    if (message.role === 'system') {
      const text = systemText(blocks);
      if (text) out.push({ role: 'system', content: text });
      return;
    }
    // User turn: tool results become tool messages, which must directly follow the assistant's
    // tool calls; the remaining text and images follow as one user message.
    const rest: ContentPart[] = [];
    const resultImages: ContentPart[] = [];
    blocks.forEach((b, i) => {
      if (b.type === 'tool_result') {
        if (typeof b.tool_use_id !== 'string') throw badRequest(`${where}.content[${i}].tool_use_id: required.`, `${where}.content[${i}].tool_use_id`);
        const { text, images } = toolResultContent(b.content, `${where}.content[${i}]`);
        out.push({ role: 'tool', tool_call_id: b.tool_use_id, content: b.is_error && text ? `Error: ${text}` : text || (images.length ? '(image)' : '') });
        resultImages.push(...images);
      } else {
        rest.push(...userParts([b], `${where}.content`));
      }
    });
    const parts = [...resultImages, ...rest];
    if (parts.length) out.push({ role: 'user', content: simplify(parts) });
  };
  body.messages.forEach((message, m) => {
    const blocks = blocksOf(message.content, `messages[${m}]`);
    const before = out.length;
    addTurn(message, m, blocks);
    // A cache_control anywhere in the turn marks the end of what the turn became.
    if (hasCacheControl(blocks) && out.length > before) out[out.length - 1]!.cacheBreakpoint = true;
  });
  return out;
}

/** Client tools (those with an input_schema); server tools such as web_search are left out. */
export function toCanonicalTools(tools: unknown): ToolDefinition[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const out: ToolDefinition[] = [];
  tools.forEach((t, i) => {
    if (!isObject(t) || !isObject(t.input_schema)) return;
    if (typeof t.name !== 'string' || !t.name) throw badRequest(`tools[${i}].name: required.`, `tools[${i}].name`);
    out.push({
      type: 'function',
      function: { name: t.name, ...(typeof t.description === 'string' ? { description: t.description } : {}), parameters: t.input_schema },
    });
  });
  return out.length ? out : undefined;
}

export function toCanonicalToolChoice(choice: unknown, params: Record<string, unknown>): unknown {
  if (!isObject(choice)) return undefined;
  if (choice.disable_parallel_tool_use === true) params.parallel_tool_calls = false;
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      if (typeof choice.name !== 'string') throw badRequest('tool_choice.name: required when tool_choice.type is "tool".', 'tool_choice.name');
      return { type: 'function', function: { name: choice.name } };
    default:
      return undefined;
  }
}

export function toCanonical(body: MessagesBody): CanonicalRequest {
  const params: Record<string, unknown> = {};
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length) params.stop = body.stop_sequences.slice(0, 4);
  const tools = toCanonicalTools(body.tools);
  const toolChoice = tools ? toCanonicalToolChoice(body.tool_choice, params) : undefined;
  // `output_config.effort` names the same levels as reasoning_effort; a `thinking` token budget
  // has no faithful mapping and is ignored.
  const effort = body.output_config?.effort;
  const format = body.output_config?.format ?? body.output_format;
  // Anthropic's structured output is constrained decoding: a strict json_schema in chat's terms.
  if (isObject(format) && format.type === 'json_schema' && isObject(format.schema)) {
    params.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: format.schema, strict: true } };
  }
  return {
    messages: toCanonicalMessages(body),
    tools,
    toolChoice,
    params,
    reasoningEffort: typeof effort === 'string' && EFFORTS.has(effort) ? effort : undefined,
  };
}

// ------------------------------------------------------------------ replies

export const stopReason = (r: FinishReason) => (r === 'length' ? 'max_tokens' : r === 'tool_calls' ? 'tool_use' : 'end_turn');
export const messageId = () => `msg_${randomUUID().replace(/-/g, '')}`;

/** Anthropic's usage: input_tokens leaves out the tokens read from or written to the cache. */
export function usageBody(u: Usage) {
  const read = u.cached_tokens ?? 0;
  const write = u.cache_write_tokens ?? 0;
  return {
    input_tokens: u.prompt_tokens - read - write,
    output_tokens: u.completion_tokens,
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    service_tier: 'standard',
  };
}

function parseInput(args: string): unknown {
  try {
    const v = JSON.parse(args || '{}');
    return isObject(v) ? v : { value: v };
  } catch {
    return {};
  }
}

export function messageBody(id: string, model: string, outcome: ChatOutcome) {
  const content: Json[] = [];
  if (outcome.content || outcome.toolCalls.length === 0) content.push({ type: 'text', text: outcome.content });
  for (const call of outcome.toolCalls) content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: parseInput(call.function.arguments) });
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stopReason(outcome.finishReason),
    stop_sequence: null,
    usage: usageBody(outcome.usage),
  };
}

/** Anthropic's stream: message_start, then content blocks (text or tool_use), message_delta, message_stop. */
export function messagesStreamRenderer(sse: SseWriter, id: string, model: string, promptTokens: number): StreamRenderer {
  let nextIndex = 0;
  let open: { index: number; kind: 'text' | 'tool' } | null = null;
  let pinged = false;
  const toolBlocks = new Map<number, number>(); // canonical tool-call index -> block index
  const ping = () => {
    if (!pinged) {
      pinged = true;
      sse.event('ping', { type: 'ping' });
    }
  };
  const close = () => {
    if (open) sse.event('content_block_stop', { type: 'content_block_stop', index: open.index });
    open = null;
  };
  const start = (kind: 'text' | 'tool', block: Json) => {
    close();
    open = { index: nextIndex++, kind };
    sse.event('content_block_start', { type: 'content_block_start', index: open.index, content_block: block });
    ping();
    return open.index;
  };

  sse.event('message_start', {
    type: 'message_start',
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usageBody({ prompt_tokens: promptTokens, completion_tokens: 0 }) },
    },
  });

  return {
    text(text) {
      if (open?.kind !== 'text') start('text', { type: 'text', text: '' });
      sse.event('content_block_delta', { type: 'content_block_delta', index: open!.index, delta: { type: 'text_delta', text } });
    },
    toolCall(part: Extract<ChatStreamPart, { type: 'tool_call' }>) {
      let index = toolBlocks.get(part.index);
      if (index === undefined || part.id) {
        index = start('tool', { type: 'tool_use', id: part.id ?? `toolu_${randomUUID().replace(/-/g, '')}`, name: part.name ?? '', input: {} });
        toolBlocks.set(part.index, index);
      }
      if (part.arguments)
        sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part.arguments } });
    },
    finish(reason, usage, billing) {
      close();
      ping();
      sse.event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: stopReason(reason), stop_sequence: null },
        usage: { ...(({ service_tier: _tier, ...counts }) => counts)(usageBody(usage)), billed_tokens: billing.billed },
      });
      sse.event('message_stop', { type: 'message_stop' });
    },
    error(message) {
      sse.event('error', { type: 'error', error: { type: 'api_error', message } });
    },
  };
}

// ------------------------------------------------------------------ errors

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorType(status: number): string {
  return ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

/**
 * Anthropic's error body: {"type":"error","error":{"type","message","details":{"error_code"}},"request_id"}.
 * The type is Anthropic's broad category for the status; the gateway's own code (the OpenAI
 * shape's `code`: key_limit_exceeded, insufficient_quota, key_expired, invalid_api_key, ...) goes
 * in `error.details.error_code`, where Anthropic puts its stable codes and @anthropic-ai/sdk reads
 * them (`APIError.errorCode`). Without a code there is no `details`, as in Anthropic's own errors.
 */
export function anthropicErrorBody(e: ApiError, requestId?: string) {
  return {
    type: 'error',
    error: { type: anthropicErrorType(e.status), message: e.message, ...(e.code ? { details: { error_code: e.code } } : {}) },
    ...(requestId ? { request_id: requestId } : {}),
  };
}
