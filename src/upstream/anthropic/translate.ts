// Canonical chat (the OpenAI chat shape of port.ts) ⇄ Anthropic Messages, for callers who speak
// another dialect than the upstream.
import { UpstreamError, type ChatCall, type ChatMessage, type ChatOutcome, type ContentPart, type FinishReason, type ToolCall } from '../port.ts';
import { isObject, type Json } from './json.ts';
import { usageOf } from './usage.ts';
import { answerText, structuredRequest, type AnswerTool } from './structured.ts';
import { messageText, systemPrompt, toolArguments } from '../canonical-messages.ts';

/** Anthropic's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1024;

/**
 * The thinking budget a reasoning effort asks for. Levels without an entry (none, minimal, or
 * anything unknown) leave thinking off.
 */
const EFFORT_BUDGETS: Record<string, number> = {
  low: 1024,
  medium: 4096,
  high: 16_384,
  xhigh: 32_768,
  max: 65_536,
};

/**
 * The `thinking` block for a reasoning effort, or undefined. Thinking may use at most half of
 * max_tokens so an answer still fits after it; a budget that would fall under Anthropic's
 * 1024-token minimum leaves thinking off instead.
 */
export function thinkingFor(effort: string | undefined, maxTokens: number): Json | undefined {
  const wanted = effort === undefined ? undefined : EFFORT_BUDGETS[effort];
  if (wanted === undefined) return undefined;
  const budget = Math.min(wanted, Math.floor(maxTokens / 2));
  return budget >= MIN_THINKING_BUDGET ? { type: 'enabled', budget_tokens: budget } : undefined;
}

/** A Messages request for a canonical chat call, and the tool that carries a structured answer (if one does). */
export interface MessagesRequest {
  body: Json;
  answerTool?: AnswerTool;
}

/**
 * The Messages request for a canonical chat call. `structuredOutputModels` are the upstream
 * models that take response_format as output_config.format; the others get a forced tool.
 */
export function messagesRequest(call: ChatCall, stream: boolean, structuredOutputModels: readonly string[]): MessagesRequest {
  const body: Json = { model: call.upstreamModel, max_tokens: call.maxTokens };
  const system = systemPrompt(call.messages);
  if (system) body.system = system;
  body.messages = turnsOf(call.messages);

  const tools = call.tools ?? [];
  let forcedTool = false;
  if (tools.length > 0) {
    body.tools = tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description !== undefined && { description: tool.function.description }),
      input_schema: tool.function.parameters ?? { type: 'object', properties: {} },
    }));
    const choice = toolChoiceOf(call.toolChoice, call.params.parallel_tool_calls === false);
    if (choice) {
      body.tool_choice = choice;
      forcedTool = choice.type === 'any' || choice.type === 'tool';
    }
  }
  const structured = structuredRequest(call, structuredOutputModels);
  if (structured?.outputConfig) body.output_config = structured.outputConfig;
  const answer = structured?.answerTool;
  if (answer) {
    body.tools = [...((body.tools as Json[] | undefined) ?? []), answer.definition];
    body.tool_choice = answerChoice(body.tool_choice as Json | undefined, tools.length > 0, answer.name);
    forcedTool = true;
  }

  // Anthropic refuses thinking together with a forced tool choice: the caller's explicit choice
  // wins and thinking stays off.
  const thinking = forcedTool ? undefined : thinkingFor(call.reasoningEffort, call.maxTokens);
  if (thinking) body.thinking = thinking;

  const { params } = call;
  // Thinking is incompatible with temperature, top_k and most top_p values: they are dropped
  // when it is on. Anthropic's temperature range is 0..1 (OpenAI's is 0..2): clamped.
  if (!thinking) {
    if (typeof params.temperature === 'number') body.temperature = Math.min(1, Math.max(0, params.temperature));
    if (typeof params.top_p === 'number') body.top_p = params.top_p;
    if (typeof params.top_k === 'number') body.top_k = params.top_k;
  }
  const stops = (typeof params.stop === 'string' ? [params.stop] : Array.isArray(params.stop) ? params.stop : [])
    // Anthropic refuses empty and whitespace-only stop sequences; they are dropped.
    .filter((s): s is string => typeof s === 'string' && s.trim() !== '');
  if (stops.length > 0) body.stop_sequences = stops;
  if (typeof params.user === 'string' && params.user !== '') body.metadata = { user_id: params.user };
  // Everything else (seed, penalties, logit_bias, n, ...) has no Anthropic counterpart and is dropped.
  if (stream) body.stream = true;
  return answer ? { body, answerTool: { name: answer.name, wrapped: answer.wrapped } } : { body };
}

/**
 * The tool_choice when a tool carries the answer: that tool alone is forced, unless the caller's
 * own tools may be called (auto or required), when any tool must be (one of theirs, or the
 * answer); a caller's forced tool stays forced.
 */
function answerChoice(choice: Json | undefined, callerTools: boolean, name: string): Json {
  const parallel = choice?.disable_parallel_tool_use === true ? { disable_parallel_tool_use: true } : {};
  if (choice?.type === 'tool') return choice;
  if (callerTools && choice?.type !== 'none') return { type: 'any', ...parallel };
  return { type: 'tool', name, ...parallel };
}

interface Turn {
  role: 'user' | 'assistant';
  /** tool_result blocks: Anthropic wants them first in their user turn. */
  results: Json[];
  blocks: Json[];
}

/**
 * The conversation as alternating user/assistant turns: tool messages become tool_result blocks
 * in a user turn, and consecutive turns of the same role are merged.
 */
function turnsOf(messages: ChatMessage[]): Json[] {
  const turns: Turn[] = [];
  const add = (role: Turn['role'], blocks: Json[], results: Json[] = []) => {
    if (blocks.length === 0 && results.length === 0) return;
    const last = turns.at(-1);
    if (last?.role === role) {
      last.results.push(...results);
      last.blocks.push(...blocks);
    } else {
      turns.push({ role, results, blocks });
    }
  };
  for (const message of messages) {
    switch (message.role) {
      case 'user':
        add('user', contentBlocks(message.content));
        break;
      case 'assistant': {
        // Images have no place in an assistant turn; only its text and tool calls go along.
        const text = messageText(message.content);
        const blocks: Json[] = text !== '' ? [{ type: 'text', text }] : [];
        for (const toolCall of message.tool_calls ?? []) blocks.push(toolUseBlock(toolCall));
        add('assistant', blocks);
        break;
      }
      case 'tool': {
        const content = contentBlocks(message.content);
        const result: Json = { type: 'tool_result', tool_use_id: message.tool_call_id ?? '' };
        if (content.length > 0) result.content = content;
        add('user', [], [result]);
        break;
      }
      default:
        break; // system and developer: already in `system`
    }
  }
  return turns.map((turn) => ({ role: turn.role, content: [...turn.results, ...turn.blocks] }));
}

/** Text and image parts as Anthropic blocks; empty texts are left out (Anthropic rejects them). */
function contentBlocks(content: ChatMessage['content']): Json[] {
  const parts: ContentPart[] = typeof content === 'string' ? [{ type: 'text', text: content }] : (content ?? []);
  const blocks: Json[] = [];
  for (const part of parts) {
    if (part.type === 'text') {
      if (part.text !== '') blocks.push({ type: 'text', text: part.text });
    } else {
      blocks.push({ type: 'image', source: imageSource(part.image_url.url) });
    }
  }
  return blocks;
}

/** data: URLs become base64 sources, http(s) URLs url sources. */
export function imageSource(url: string): Json {
  if (/^https?:\/\//i.test(url)) return { type: 'url', url };
  if (/^data:/i.test(url)) {
    const comma = url.indexOf(',');
    if (comma !== -1) {
      const meta = url
        .slice(5, comma)
        .split(';')
        .map((s) => s.trim());
      const payload = url.slice(comma + 1);
      let mediaType = (meta[0] || 'application/octet-stream').toLowerCase();
      if (mediaType === 'image/jpg') mediaType = 'image/jpeg';
      const base64 = meta.slice(1).some((p) => p.toLowerCase() === 'base64');
      const data = base64 ? payload.replace(/\s+/g, '') : percentDecode(payload).toString('base64');
      return { type: 'base64', media_type: mediaType, data };
    }
  }
  // The URL itself is never echoed: it may be a signed link or inline data.
  throw new UpstreamError('anthropic upstreams take images as data: or http(s) URLs only', undefined, 'request');
}

/** The bytes of a percent-encoded data: URL payload. */
function percentDecode(text: string): Buffer {
  const raw = Buffer.from(text, 'utf8');
  const out = Buffer.alloc(raw.length);
  let length = 0;
  const hex = (byte: number | undefined) => (byte === undefined ? NaN : parseInt(String.fromCharCode(byte), 16));
  for (let i = 0; i < raw.length; i++) {
    const high = hex(raw[i + 1]);
    const low = hex(raw[i + 2]);
    if (raw[i] === 0x25 && !Number.isNaN(high) && !Number.isNaN(low)) {
      out[length++] = high * 16 + low;
      i += 2;
    } else {
      out[length++] = raw[i]!;
    }
  }
  return out.subarray(0, length);
}

function toolUseBlock(toolCall: ToolCall): Json {
  return { type: 'tool_use', id: toolCall.id, name: toolCall.function.name, input: toolArguments(toolCall.function.arguments) };
}

/** OpenAI's tool_choice in Anthropic's shape; parallel_tool_calls: false disables parallel use. */
export function toolChoiceOf(choice: unknown, noParallel: boolean): Json | undefined {
  let mapped: Json | undefined;
  if (choice === 'auto') mapped = { type: 'auto' };
  else if (choice === 'required') mapped = { type: 'any' };
  else if (choice === 'none') mapped = { type: 'none' };
  else if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string') {
    mapped = { type: 'tool', name: choice.function.name };
  }
  if (noParallel && mapped?.type !== 'none') mapped = { ...(mapped ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return mapped;
}

/** Anthropic's stop_reason as the port's finish reason; a turn that only called the answer tool stopped. */
export function finishReasonOf(stopReason: unknown, sawToolCalls: boolean, answered = false): FinishReason {
  if (answered && !sawToolCalls && stopReason === 'tool_use') return 'stop';
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'end_turn':
    case 'stop_sequence':
    case 'pause_turn':
    case 'refusal':
      return 'stop';
    default:
      return sawToolCalls ? 'tool_calls' : 'stop';
  }
}

/**
 * A Messages reply as a chat outcome: text blocks joined (thinking left out), tool_use blocks as
 * tool calls, but for the answer tool's, whose input is the text.
 */
export function chatOutcomeOf(body: unknown, answerTool?: AnswerTool): ChatOutcome {
  if (!isObject(body) || !Array.isArray(body.content)) throw new UpstreamError('upstream chat returned no message content');
  let content = '';
  let answered = false;
  const toolCalls: ToolCall[] = [];
  for (const block of body.content) {
    if (!isObject(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') content += block.text;
    else if (block.type === 'tool_use' && answerTool && block.name === answerTool.name) {
      content += answerText(block.input, answerTool);
      answered = true;
    } else if (block.type === 'tool_use' && typeof block.name === 'string') {
      toolCalls.push({
        id: typeof block.id === 'string' ? block.id : `toolu_${toolCalls.length}`,
        type: 'function',
        function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
      });
    }
  }
  const outcome: ChatOutcome = {
    content,
    toolCalls,
    finishReason: finishReasonOf(body.stop_reason, toolCalls.length > 0, answered),
    usage: usageOf(body.usage, 'chat'),
  };
  if (typeof body.id === 'string') outcome.upstreamId = body.id;
  return outcome;
}
