// A local upstream speaking Anthropic's Messages API as @anthropic-ai/sdk expects it:
// POST /v1/messages (plain and SSE) and POST /v1/messages/count_tokens, the key in x-api-key
// (or as `Authorization: Bearer`, which @anthropic-ai/sdk 1.x sends), errors as
// {type:"error", error:{type, message}}, thinking, tool_use, max_tokens and prompt caching
// with deterministic token counts. The SDK's baseURL is the origin (`double.url`): it appends
// /v1/messages itself.
//
// Token rules (see double-http.ts): the prompt is a list of segments in Anthropic's cache order
// (tools, then system blocks, then message blocks); each costs ceil(JSON length / 4) of the
// block without its cache_control (a string content counts as one text block, and every
// system/message block carries its role). Output: one token per word of thinking or text, one
// per 4 characters of tool input JSON.
//
// Caching: a block with cache_control {type:"ephemeral"} ends a cacheable prefix. The longest
// such prefix seen before (same model) is reported as cache_read_input_tokens; the tokens
// between it and the last breakpoint are written (cache_creation_input_tokens, split by ttl in
// usage.cache_creation); input_tokens is only what follows the last breakpoint. There is no
// minimum cacheable length. count_tokens reports input + creation + read and caches nothing.
//
// Structured output, as Anthropic does it: `output_config.format` {type:"json_schema", schema}
// (or the beta's top-level `output_format`, only with the anthropic-beta header
// structured-outputs-2025-11-13) on a model that has it answers with one text block of JSON
// valid against the schema; a model without it, a schema with an object that is not closed
// (additionalProperties: false) or a wrong format type is a 400. A tool_choice of {type:"tool"}
// (or "any") is answered with a tool_use whose input is valid against that tool's input_schema
// (the first tool's for "any"), unless `toolUse` scripts the input; forcing a tool while thinking is
// on, or naming a tool that is not in `tools`, is a 400.
import { createHash } from 'node:crypto';
import { jsonPieces, jsonTokens, idSuffix, schemaInstance, startDoubleServer, wordPieces, type DoubleHandle, type Exchange } from './double-http.ts';
import { cachePrefixTokens, promptCacheUsage, promptTokens, type PromptSegment } from './prompt-cache.ts';

export type { Fault } from './double-faults.ts';
export type { RecordedFile, RecordedRequest } from './double-http.ts';

export interface AnthropicDoubleOptions {
  /** The key, sent as x-api-key or `Authorization: Bearer` (default 'test-anthropic-key'). */
  apiKey?: string;
  /** The assistant text; a function sees the parsed request body. */
  reply?: string | ((body: Record<string, unknown>) => string);
  /** The thinking text when the request enables thinking. */
  thinking?: string;
  /** When set and the request has tools, answer with this tool_use (name: tool_choice's, else the first tool's). */
  toolUse?: { name?: string; input: Record<string, unknown> };
  /** Streams end with message_stop and no message_delta (no stop_reason, no final usage): the usage is message_start's. */
  omitMessageDelta?: boolean;
  /** Models that have structured outputs (a dated snapshot counts as its name); default ANTHROPIC_STRUCTURED_OUTPUT_MODELS. */
  structuredOutputModels?: string[];
}

/** The models Anthropic's structured-outputs page lists. */
export const ANTHROPIC_STRUCTURED_OUTPUT_MODELS = [
  'claude-opus-4-5',
  'claude-opus-4-6',
  'claude-opus-4-7',
  'claude-opus-4-8',
  'claude-sonnet-4-5',
  'claude-sonnet-4-6',
  'claude-haiku-4-5',
];
const STRUCTURED_OUTPUTS_BETA = 'structured-outputs-2025-11-13';

export interface AnthropicDouble extends DoubleHandle {
  /** Forget every cached prefix. */
  clearCache(): void;
}

export const ANTHROPIC_DEFAULT_REPLY = 'Hello from the Anthropic double, a small and predictable reply.';
export const ANTHROPIC_DEFAULT_THINKING = 'The user greets me, so a short friendly answer is right.';

type Body = Record<string, unknown>;
type Block = Record<string, unknown>;

/** All prompt tokens of a Messages request: what input + cache creation + cache read add up to. */
export const anthropicPromptTokens = (body: Body): number => promptTokens(promptSegments(body));

/** The tokens of the prefix ending at each cache breakpoint, in order. */
export const anthropicCachePrefixes = (body: Body): number[] => cachePrefixTokens(promptSegments(body));

function promptSegments(body: Body): PromptSegment[] {
  const segments: PromptSegment[] = [];
  const add = (block: Block, extra: Block = {}) => {
    const { cache_control: cache, ...rest } = block;
    const value = { ...extra, ...rest };
    const ttl = isObject(cache) && cache.type === 'ephemeral' ? (cache.ttl === '1h' ? '1h' : '5m') : undefined;
    segments.push({ value, tokens: jsonTokens(value), ...(ttl && { ttl }) });
  };
  for (const tool of asArray(body.tools)) if (isObject(tool)) add(tool);
  for (const block of contentBlocks(body.system)) add(block, { role: 'system' });
  for (const message of asArray(body.messages)) {
    if (!isObject(message)) continue;
    for (const block of contentBlocks(message.content)) add(block, { role: message.role });
  }
  return segments;
}

function contentBlocks(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return asArray(content).filter(isObject);
}

export async function startAnthropicDouble(options: AnthropicDoubleOptions = {}): Promise<AnthropicDouble> {
  const apiKey = options.apiKey ?? 'test-anthropic-key';
  const structuredModels = options.structuredOutputModels ?? ANTHROPIC_STRUCTURED_OUTPUT_MODELS;
  const cache = new Set<string>();
  let served = 0;
  let answered = 0;

  async function handle(ex: Exchange): Promise<void> {
    const { req, path, body } = ex;
    // Older SDKs and curl send x-api-key; @anthropic-ai/sdk 1.x sends the key as a Bearer token.
    if (req.headers['x-api-key'] !== apiKey && req.headers.authorization !== `Bearer ${apiKey}`) {
      return ex.json(401, errorBody('authentication_error', 'invalid x-api-key'));
    }
    if (!req.headers['anthropic-version']) {
      // Anthropic answers a missing version header with a 400, not a 401.
      return ex.json(400, errorBody('invalid_request_error', 'anthropic-version: header is required'));
    }
    const route = req.method === 'POST' && (path === '/v1/messages' || path === '/v1/messages/count_tokens') ? path : null;
    if (!route) return ex.json(404, errorBody('not_found_error', `Not found: ${req.method} ${path}`));
    const isCreate = route === '/v1/messages';
    const problem = ex.invalidJson
      ? 'There was an error parsing the body of your request as JSON'
      : (invalid(body, isCreate) ?? (isCreate ? invalidStructured(body, String(req.headers['anthropic-beta'] ?? ''), structuredModels) : null));
    if (problem) return ex.json(400, errorBody('invalid_request_error', problem));
    if (route === '/v1/messages/count_tokens') return ex.json(200, { input_tokens: anthropicPromptTokens(body) });

    const n = ++served;
    const usage = cacheUsage(body);
    const turn = compose(body, n);
    const message = {
      id: `msg_01${idSuffix(`msg ${n}`)}`,
      type: 'message',
      role: 'assistant',
      model: String(body.model),
      content: turn.blocks,
      stop_reason: turn.stopReason,
      stop_sequence: null,
      usage: { ...usage, output_tokens: turn.outputTokens, service_tier: 'standard' },
    };
    if (body.stream !== true) return ex.json(200, message);
    return stream(ex, message, turn);
  }

  /** Prompt-cache accounting for a Messages call; records the breakpoint prefixes as cached. */
  function cacheUsage(body: Body) {
    const { uncached, read, written } = promptCacheUsage(cache, String(body.model), promptSegments(body));
    return {
      input_tokens: uncached,
      cache_creation_input_tokens: written['5m'] + written['1h'],
      cache_read_input_tokens: read,
      cache_creation: { ephemeral_5m_input_tokens: written['5m'], ephemeral_1h_input_tokens: written['1h'] },
    };
  }

  /** The assistant turn: thinking, then text or a tool_use, within max_tokens. */
  function compose(body: Body, n: number): Turn {
    const cap = Number(body.max_tokens);
    const thinking = isObject(body.thinking) ? body.thinking : {};
    const budget = thinking.type === 'enabled' ? Math.min(Number(thinking.budget_tokens), cap) : thinking.type === 'adaptive' ? cap : 0;
    const blocks: Block[] = [];
    const pieces: string[][] = [];
    let used = 0;
    let cut = false;

    if (budget > 0) {
      const all = wordPieces(options.thinking ?? ANTHROPIC_DEFAULT_THINKING);
      const words = all.slice(0, budget);
      cut = words.length < all.length && budget === cap;
      const text = words.join('');
      blocks.push({ type: 'thinking', thinking: text, signature: signatureFor(text) });
      pieces.push(words);
      used += words.length;
    }
    const tool = toolFor(body);
    if (tool && !cut) {
      const id = `toolu_01${idSuffix(`tool ${n}`)}`;
      const json = JSON.stringify(tool.input);
      const needed = jsonPieces(json).length;
      // A tool call that does not fit is dropped: the tokens were spent, the block never arrives.
      if (used + needed <= cap) {
        blocks.push({ type: 'tool_use', id, name: tool.name, input: tool.input });
        pieces.push(jsonPieces(json));
        used += needed;
      } else {
        cut = true;
        used = cap;
      }
    } else if (!cut) {
      const format = outputFormatOf(body);
      const reply = typeof options.reply === 'function' ? options.reply(body) : (options.reply ?? ANTHROPIC_DEFAULT_REPLY);
      const all = format ? jsonPieces(schemaInstance(format.schema, body)) : wordPieces(reply);
      const words = all.slice(0, cap - used);
      cut = words.length < all.length;
      if (words.length > 0) {
        blocks.push({ type: 'text', text: words.join('') });
        pieces.push(words);
      }
      used += words.length;
    }
    const stopReason = cut ? 'max_tokens' : blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
    return { blocks, pieces, stopReason, outputTokens: used };
  }

  function toolFor(body: Body): { name: string; input: Record<string, unknown> } | null {
    const tools = asArray(body.tools).filter(isObject);
    const choice = isObject(body.tool_choice) ? body.tool_choice : {};
    const forced = choice.type === 'tool' || choice.type === 'any';
    if ((!options.toolUse && !forced) || tools.length === 0 || choice.type === 'none') return null;
    const name = options.toolUse?.name ?? (choice.type === 'tool' ? String(choice.name) : String(tools[0]!.name));
    if (options.toolUse) return { name, input: options.toolUse.input };
    const tool = tools.find((t) => t.name === name)!;
    return { name, input: JSON.parse(schemaInstance(tool.input_schema, body)) as Record<string, unknown> };
  }

  async function stream(ex: Exchange, message: MessageOut, turn: Turn): Promise<void> {
    const sse = ex.sse(() => wire('error', errorBody('overloaded_error', 'Overloaded')));
    const send = (type: string, data: Record<string, unknown>) => sse.event(wire(type, { type, ...data }));
    const { usage } = message;
    await send('message_start', {
      message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
    });
    for (const [index, block] of turn.blocks.entries()) {
      if (!sse.open) return;
      await send('content_block_start', { index, content_block: emptyBlock(block) });
      if (index === 0) await send('ping', {});
      for (const piece of turn.pieces[index]!) {
        if (!sse.open) return;
        await send('content_block_delta', { index, delta: delta(block.type, piece) });
      }
      if (block.type === 'thinking') await send('content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } });
      await send('content_block_stop', { index });
    }
    if (turn.blocks.length === 0) await send('ping', {});
    // Anthropic's usage here is cumulative: a reader keeps the latest value, never adds.
    const { service_tier: _tier, cache_creation: _split, ...totals } = usage;
    if (!options.omitMessageDelta) await send('message_delta', { delta: { stop_reason: turn.stopReason, stop_sequence: null }, usage: totals });
    await send('message_stop', {});
    await sse.end();
  }

  const handle$ = await startDoubleServer({
    errorBody: (status, message) => errorBody(errorTypeFor(status), message),
    headers: () => ({ 'request-id': `req_01${idSuffix(`request ${++answered}`)}` }),
    handle,
  });
  return Object.assign(handle$, { clearCache: () => cache.clear() });
}

interface Turn {
  blocks: Block[];
  /** The streamed deltas of each block: one per output token. */
  pieces: string[][];
  stopReason: 'end_turn' | 'max_tokens' | 'tool_use';
  outputTokens: number;
}
type MessageOut = { usage: Record<string, unknown> } & Record<string, unknown>;

function emptyBlock(block: Block): Block {
  if (block.type === 'thinking') return { type: 'thinking', thinking: '', signature: '' };
  if (block.type === 'tool_use') return { type: 'tool_use', id: block.id, name: block.name, input: {} };
  return { type: 'text', text: '' };
}

function delta(type: unknown, piece: string): Block {
  if (type === 'thinking') return { type: 'thinking_delta', thinking: piece };
  if (type === 'tool_use') return { type: 'input_json_delta', partial_json: piece };
  return { type: 'text_delta', text: piece };
}

function wire(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Looks like a real signature (opaque base64) and is stable for the same thinking text. */
function signatureFor(thinking: string): string {
  return createHash('sha512').update(`double:${thinking}`).digest('base64');
}

function errorBody(type: string, message: string) {
  return { type: 'error', error: { type, message } };
}

function errorTypeFor(status: number): string {
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    402: 'billing_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    500: 'api_error',
    504: 'timeout_error',
    529: 'overloaded_error',
  };
  return types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** The first problem Anthropic would reject the body for, or null. */
function invalid(body: Body, isCreate: boolean): string | null {
  if (typeof body.model !== 'string' || !body.model) return 'model: Field required';
  if (isCreate && !(Number.isInteger(body.max_tokens) && Number(body.max_tokens) >= 1)) return 'max_tokens: Field required (a positive integer)';
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: Field required (at least one message)';
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system))
    return 'system: Input should be a string or a list of text blocks';
  for (const [i, message] of body.messages.entries()) {
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant')) return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (typeof message.content !== 'string' && !Array.isArray(message.content)) return `messages.${i}.content: Field required`;
    for (const [j, block] of contentBlocks(message.content).entries()) {
      if (block.type !== 'image') continue;
      const source = isObject(block.source) ? block.source : {};
      const ok =
        source.type === 'url'
          ? typeof source.url === 'string'
          : source.type === 'base64' && IMAGE_TYPES.has(String(source.media_type)) && isBase64(source.data);
      if (!ok) return `messages.${i}.content.${j}.image.source: Could not process image`;
    }
  }
  const thinking = body.thinking;
  if (isCreate && isObject(thinking) && thinking.type === 'enabled') {
    const budget = Number(thinking.budget_tokens);
    if (!Number.isInteger(budget) || budget < 1024) return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
    if (budget >= Number(body.max_tokens)) return '`max_tokens` must be greater than `thinking.budget_tokens`';
  }
  return null;
}

/** The structured output a body asks for: output_config.format, or the beta's output_format. */
function outputFormatOf(body: Body): Block | undefined {
  const config = isObject(body.output_config) ? body.output_config : {};
  const format = config.format ?? body.output_format;
  return isObject(format) ? format : undefined;
}

/** The first problem Anthropic would reject the body's structured output or forced tool for, or null. */
function invalidStructured(body: Body, betas: string, models: string[]): string | null {
  if (body.output_format !== undefined && !betas.split(',').some((b) => b.trim() === STRUCTURED_OUTPUTS_BETA))
    return 'output_format: Extra inputs are not permitted';
  const format = outputFormatOf(body);
  if (format) {
    if (format.type !== 'json_schema' || !isObject(format.schema)) return "output_config.format.type: Input should be 'json_schema' (with a schema)";
    const model = String(body.model);
    const supported = models.some((m) => model === m || new RegExp(`^${m.replace(/[.]/g, '\\.')}[-@]\\d{8}$`).test(model));
    if (!supported) return `'${model}' does not support output_config.format`;
    const open = openObject(format.schema, 'schema');
    if (open) return `output_config.format.${open}: For 'object' type, 'additionalProperties' must be explicitly set to false`;
  }
  const tools = asArray(body.tools).filter(isObject);
  for (const [i, tool] of tools.entries()) {
    if (tool.type === undefined && !(isObject(tool.input_schema) && tool.input_schema.type === 'object'))
      return `tools.${i}.custom.input_schema.type: Input should be 'object'`;
  }
  const choice = isObject(body.tool_choice) ? body.tool_choice : {};
  if (choice.type === 'tool' && !tools.some((t) => t.name === choice.name)) return `tool_choice: Tool '${String(choice.name)}' not found in 'tools'`;
  const thinking = isObject(body.thinking) ? body.thinking.type : undefined;
  if ((choice.type === 'tool' || choice.type === 'any') && (thinking === 'enabled' || thinking === 'adaptive'))
    return 'Thinking may not be enabled when tool_choice forces tool use.';
  return null;
}

/** The path of the first object schema that is not closed, or null. */
function openObject(schema: unknown, path: string): string | null {
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) {
      const found = openObject(item, `${path}.${i}`);
      if (found) return found;
    }
    return null;
  }
  if (!isObject(schema)) return null;
  if ((schema.type === 'object' || isObject(schema.properties)) && schema.additionalProperties !== false) return path;
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples') continue;
    const found = openObject(value, `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

function isBase64(data: unknown): boolean {
  return typeof data === 'string' && data.length > 0 && data.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(data);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
