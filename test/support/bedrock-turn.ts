// The Bedrock double's answers and counts (bedrock-double.ts serves them): the checks Bedrock makes
// of a Converse request, the prompt's tokens and its cache, and the assistant turn.
//
// Token rules (see double-http.ts): the prompt is a list of segments in the cache's order: each
// tool of toolConfig.tools, then each system block, then each content block of each message (with
// its role); a segment costs ceil(JSON length / 4) of the block as received (cachePoint blocks are
// markers and cost nothing). Output: one token per word of text or reasoning, one per 4 characters
// of tool input JSON or of structured output (JSON answering outputConfig's schema).
//
// Caching: a `cachePoint` block ends a cacheable prefix. The longest such prefix seen before (same
// model) is cacheReadInputTokens; the tokens between it and the last cache point are written
// (cacheWriteInputTokens, split by ttl in cacheDetails); inputTokens is only what follows the last
// cache point, so all input = inputTokens + cacheReadInputTokens + cacheWriteInputTokens, as AWS
// documents it. The cache fields are sent only when the request has a cache point. No minimum.
import { createHash } from 'node:crypto';
import { jsonPieces, jsonTokens, schemaInstance, wordPieces } from './double-http.ts';
import { cachePrefixTokens, promptCacheUsage, promptTokens, type PromptSegment } from './prompt-cache.ts';

type Json = Record<string, any>;

export const BEDROCK_DEFAULT_REPLY = 'Hello from the Bedrock double, a small and predictable reply with enough words to cut.';
export const BEDROCK_DEFAULT_REASONING = 'The user greets me, so a short and friendly answer is the right one.';
/** A prompt with this word is filtered: stopReason content_filtered (guardrail_intervened with a guardrailConfig). */
export const BEDROCK_FILTERED_WORD = 'BEDROCK-FILTER-ME';
export const BEDROCK_GUARDRAIL_MESSAGE = 'Sorry, the model cannot answer this question.';
/** The model ids the double serves unless given others (foundation models and a cross-region inference profile). */
export const BEDROCK_MODELS = [
  'anthropic.claude-sonnet-4-5-20250929-v1:0',
  'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
  'anthropic.claude-haiku-4-5-20251001-v1:0',
  'amazon.nova-pro-v1:0',
  'amazon.titan-embed-text-v2:0',
];

/** Output tokens of a text (reply or reasoning) as the double counts them. */
export const bedrockTextTokens = (text: string): number => wordPieces(text).length;
/** Output tokens of tool input or structured output JSON. */
export const bedrockJsonTokens = (json: string): number => jsonPieces(json).length;
/** Reasoning tokens of a call with thinking on and room for the whole reasoning. */
export const BEDROCK_REASONING_TOKENS = bedrockTextTokens(BEDROCK_DEFAULT_REASONING);

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const asArray = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

function segments(body: Json): PromptSegment[] {
  const out: PromptSegment[] = [];
  const add = (block: unknown, extra: Json = {}) => {
    if (!isObject(block)) return;
    if (isObject(block.cachePoint)) {
      const last = out[out.length - 1];
      if (last) last.ttl = block.cachePoint.ttl === '1h' ? '1h' : '5m';
      return;
    }
    const value = { ...extra, ...block };
    out.push({ value, tokens: jsonTokens(value) });
  };
  for (const tool of asArray(body.toolConfig?.tools)) add(tool);
  for (const block of asArray(body.system)) add(block, { role: 'system' });
  for (const message of asArray(body.messages)) {
    if (isObject(message)) for (const block of asArray(message.content)) add(block, { role: message.role });
  }
  return out;
}

/** All input tokens of a Converse body: inputTokens + cacheReadInputTokens + cacheWriteInputTokens. */
export const bedrockPromptTokens = (body: Json): number => promptTokens(segments(body));

/** The tokens of the prefix ending at each cache point, in order. */
export const bedrockCachePrefixes = (body: Json): number[] => cachePrefixTokens(segments(body));

/** The input side of the usage; records the request's cache prefixes in `cache`. */
export function inputUsage(cache: Set<string>, modelId: string, body: Json): Json {
  const list = segments(body);
  if (!list.some((s) => s.ttl)) return { inputTokens: promptTokens(list) };
  const { uncached, read, written } = promptCacheUsage(cache, modelId, list);
  const details = (['1h', '5m'] as const).filter((ttl) => written[ttl] > 0).map((ttl) => ({ ttl, inputTokens: written[ttl] }));
  return {
    inputTokens: uncached,
    cacheReadInputTokens: read,
    cacheWriteInputTokens: written['1h'] + written['5m'],
    ...(details.length > 0 && { cacheDetails: details }),
  };
}

// ---- Checks -------------------------------------------------------------------------------------

const IMAGE_FORMATS = new Set(['png', 'jpeg', 'gif', 'webp']);
const MODEL_ERRORS = 'The model returned the following errors: ';
const constraint = (value: unknown, at: string, rule: string) =>
  `1 validation error detected: Value '${String(value)}' at '${at}' failed to satisfy constraint: ${rule}`;

function thinkingOf(body: Json): Json | null {
  const fields = isObject(body.additionalModelRequestFields) ? body.additionalModelRequestFields : {};
  const thinking = fields.thinking ?? fields.reasoning_config;
  return isObject(thinking) ? thinking : null;
}

/** The ValidationException message Bedrock would answer the body with, or null. */
export function invalidConverse(body: Json): string | null {
  const messages = asArray(body.messages);
  const config = isObject(body.inferenceConfig) ? body.inferenceConfig : {};
  if (config.maxTokens !== undefined && !(Number.isInteger(config.maxTokens) && config.maxTokens >= 1))
    return constraint(config.maxTokens, 'inferenceConfig.maxTokens', 'Member must have value greater than or equal to 1');
  for (const field of ['temperature', 'topP'] as const) {
    const v = config[field];
    if (v !== undefined && !(typeof v === 'number' && v >= 0 && v <= 1))
      return constraint(v, `inferenceConfig.${field}`, 'Member must have value less than or equal to 1 and greater than or equal to 0');
  }
  const specs = asArray(body.toolConfig?.tools)
    .filter((t): t is Json => isObject(t) && isObject(t.toolSpec))
    .map((t) => t.toolSpec as Json);
  let toolBlocks = false;
  for (const [i, message] of messages.entries()) {
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant'))
      return constraint(isObject(message) ? message.role : message, `messages.${i}.member.role`, 'Member must satisfy enum value set: [user, assistant]');
    if (i === 0 && message.role !== 'user')
      return 'A conversation must start with a user message. Try again with a conversation that starts with a user message.';
    if (i > 0 && (messages[i - 1] as Json).role === message.role)
      return 'A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.';
    const content = asArray(message.content);
    if (content.length === 0)
      return `The content field in the Message object at messages.${i} is empty. Add a ContentBlock object to the content field and try again.`;
    const earlierUses = new Set(
      asArray((messages[i - 1] as Json | undefined)?.content)
        .filter((b): b is Json => isObject(b) && isObject(b.toolUse))
        .map((b) => String(b.toolUse.toolUseId)),
    );
    for (const [j, block] of content.entries()) {
      if (!isObject(block)) continue;
      if (isObject(block.image)) {
        const bytes = block.image.source?.bytes;
        if (!IMAGE_FORMATS.has(String(block.image.format)) || typeof bytes !== 'string' || !/^[A-Za-z0-9+/]+={0,2}$/.test(bytes))
          return `${MODEL_ERRORS}messages.${i}.content.${j}.image.source: Could not process image`;
      }
      if (isObject(block.toolUse) || isObject(block.toolResult)) toolBlocks = true;
      if (isObject(block.toolResult) && !earlierUses.has(String(block.toolResult.toolUseId)))
        return `${MODEL_ERRORS}messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(block.toolResult.toolUseId)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
    }
  }
  if (messages.length === 0) return 'A conversation must start with a user message. Try again with a conversation that starts with a user message.';
  if (toolBlocks && specs.length === 0) return 'The toolConfig field must be defined when using toolUse and toolResult content blocks.';
  for (const [i, spec] of specs.entries()) {
    if (!isObject(spec.inputSchema?.json) || spec.inputSchema.json.type !== 'object')
      return `${MODEL_ERRORS}tools.${i}.custom.input_schema.type: Input should be 'object'`;
  }
  const choice = isObject(body.toolConfig?.toolChoice) ? body.toolConfig.toolChoice : {};
  if (isObject(choice.tool) && !specs.some((s) => s.name === choice.tool.name))
    return `${MODEL_ERRORS}tool_choice: Tool '${String(choice.tool.name)}' not found in 'tools'`;
  const thinking = thinkingOf(body);
  if (thinking?.type === 'enabled') {
    const budget = Number(thinking.budget_tokens);
    if (!Number.isInteger(budget) || budget < 1024) return `${MODEL_ERRORS}thinking.enabled.budget_tokens: Input should be greater than or equal to 1024`;
    if (config.maxTokens !== undefined && budget >= config.maxTokens) return `${MODEL_ERRORS}\`max_tokens\` must be greater than \`thinking.budget_tokens\``;
  }
  if ((thinking?.type === 'enabled' || thinking?.type === 'adaptive') && (isObject(choice.any) || isObject(choice.tool)))
    return `${MODEL_ERRORS}Thinking may not be enabled when tool_choice forces tool use.`;
  const format = body.outputConfig?.textFormat;
  if (format !== undefined) {
    const schema = format?.structure?.jsonSchema?.schema;
    if (format?.type !== 'json_schema' || typeof schema !== 'string') return 'The structured output format must be json_schema with a jsonSchema structure.';
    if (!isObject(tryParse(schema))) return 'The provided JSON schema is invalid: outputConfig.textFormat.structure.jsonSchema.schema must be a JSON object.';
  }
  return null;
}

function tryParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// ---- The assistant turn -----------------------------------------------------------------------

export interface TurnOptions {
  reply?: string | ((body: Json, modelId: string) => string);
  reasoning?: string;
  toolUse?: { name?: string; input: Record<string, unknown> };
}

export interface Turn {
  /** The content blocks of the Converse reply. */
  blocks: Json[];
  /** The streamed deltas of each block: one per output token. */
  pieces: string[][];
  stopReason: 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'guardrail_intervened' | 'content_filtered';
  outputTokens: number;
}

/** Reasoning, then a tool call or the text (or structured output), within inferenceConfig.maxTokens. */
export function composeTurn(body: Json, modelId: string, n: number, options: TurnOptions): Turn {
  const config = isObject(body.inferenceConfig) ? body.inferenceConfig : {};
  const cap = Number(config.maxTokens ?? Infinity);
  const thinking = thinkingOf(body);
  const budget = thinking?.type === 'enabled' ? Math.min(Number(thinking.budget_tokens), cap) : thinking?.type === 'adaptive' ? cap : 0;
  const blocks: Json[] = [];
  const pieces: string[][] = [];
  let used = 0;
  let cut = false;
  let stopped = false;

  if (JSON.stringify(body.messages ?? []).includes(BEDROCK_FILTERED_WORD)) {
    if (!isObject(body.guardrailConfig)) return { blocks, pieces, stopReason: 'content_filtered', outputTokens: 0 };
    const words = wordPieces(BEDROCK_GUARDRAIL_MESSAGE);
    return { blocks: [{ text: words.join('') }], pieces: [words], stopReason: 'guardrail_intervened', outputTokens: words.length };
  }
  if (budget > 0) {
    const all = wordPieces(options.reasoning ?? BEDROCK_DEFAULT_REASONING);
    const words = all.slice(0, budget);
    cut = words.length < all.length && budget === cap;
    const text = words.join('');
    blocks.push({ reasoningContent: { reasoningText: { text, signature: createHash('sha512').update(`bedrock double:${text}`).digest('base64') } } });
    pieces.push(words);
    used += words.length;
  }
  const tool = toolFor(body, options);
  if (tool && !cut) {
    const json = JSON.stringify(tool.input);
    const needed = jsonPieces(json).length;
    // A tool call that does not fit is dropped: the tokens were spent, the block never arrives.
    if (used + needed <= cap) {
      blocks.push({ toolUse: { toolUseId: `tooluse_${toolUseIdFor(n)}`, name: tool.name, input: tool.input } });
      pieces.push(jsonPieces(json));
      used += needed;
    } else {
      cut = true;
      used = cap;
    }
  } else if (!cut) {
    const schema = body.outputConfig?.textFormat?.structure?.jsonSchema?.schema;
    let all: string[];
    if (typeof schema === 'string') all = jsonPieces(schemaInstance(JSON.parse(schema), body));
    else {
      let text = typeof options.reply === 'function' ? options.reply(body, modelId) : (options.reply ?? BEDROCK_DEFAULT_REPLY);
      const at = asArray(config.stopSequences)
        .map((s) => text.indexOf(String(s)))
        .filter((i) => i >= 0);
      if (at.length > 0) {
        text = text.slice(0, Math.min(...at));
        stopped = true;
      }
      all = wordPieces(text);
    }
    const words = all.slice(0, cap - used);
    cut = words.length < all.length;
    if (words.length > 0) {
      blocks.push({ text: words.join('') });
      pieces.push(words);
    }
    used += words.length;
  }
  const stopReason = cut ? 'max_tokens' : tool ? 'tool_use' : stopped ? 'stop_sequence' : 'end_turn';
  return { blocks, pieces, stopReason, outputTokens: used };
}

/** The tool to call: with tools declared, when the choice forces one, or (auto) unless the last turn answers a call. */
function toolFor(body: Json, options: TurnOptions): { name: string; input: Record<string, unknown> } | null {
  const specs = asArray(body.toolConfig?.tools)
    .filter((t): t is Json => isObject(t) && isObject(t.toolSpec))
    .map((t) => t.toolSpec as Json);
  if (specs.length === 0) return null;
  const choice = isObject(body.toolConfig?.toolChoice) ? body.toolConfig.toolChoice : { auto: {} };
  const forced = isObject(choice.any) || isObject(choice.tool);
  const last = asArray(body.messages).at(-1);
  const answers = isObject(last) && asArray(last.content).some((b) => isObject(b) && isObject(b.toolResult));
  if (!forced && answers) return null;
  const name = options.toolUse?.name ?? (isObject(choice.tool) ? String(choice.tool.name) : String(specs[0]!.name));
  if (options.toolUse) return { name, input: options.toolUse.input };
  const spec = specs.find((s) => s.name === name) ?? specs[0]!;
  return { name, input: JSON.parse(schemaInstance(spec.inputSchema?.json, body)) as Record<string, unknown> };
}

/** Bedrock's tool use ids: `tooluse_` and 22 characters of base64url. */
function toolUseIdFor(n: number): string {
  return createHash('sha256').update(`bedrock tool ${n}`).digest('base64url').slice(0, 22);
}
