// Reading a canonical call's messages, for the adapters that translate it into another wire
// (Anthropic Messages, Gemini contents, Bedrock Converse): a message's text, the system prompt, a
// tool call's arguments as an object, the messages without the caller's cache marks, tool call
// ids as wires with short limits take them.
import { createHash } from 'node:crypto';
import type { ChatMessage } from './port.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A message's text: its string, or its text parts joined (images left out). */
export function messageText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/** System and developer messages, wherever they are, as one system prompt. */
export function systemPrompt(messages: ChatMessage[]): string {
  return messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => messageText(m.content))
    .filter((text) => text !== '')
    .join('\n\n');
}

/** Tool arguments as the object both wires require: unparsable → {}, a non-object → { value }. */
export function toolArguments(args: string): Json {
  let value: unknown;
  try {
    value = JSON.parse(args === '' ? '{}' : args);
  } catch {
    return {};
  }
  return isObject(value) ? value : { value };
}

/** The messages without the caller's cache marks, for wires that have none (and for seeds that must not change with them). */
export function withoutCacheMarks(messages: ChatMessage[]): ChatMessage[] {
  if (!messages.some((m) => m.cacheBreakpoint)) return messages;
  return messages.map(({ cacheBreakpoint: _mark, ...message }) => message);
}

/**
 * A tool call id as a wire with a shorter limit takes it (OpenAI's 40 characters, Bedrock's 64,
 * letters, digits, _ and -): as it is when it fits, else a digest of it, the same for the call and
 * for the result that names it. Ids that carry a Gemini thought signature are long.
 */
export function wireToolCallId(id: string, maxLength: number): string {
  if (id.length <= maxLength && /^[\w-]+$/.test(id)) return id;
  return `call_${createHash('sha256')
    .update(id)
    .digest('base64url')
    .slice(0, maxLength - 5)}`;
}

/** The messages with every tool call id as `wireToolCallId` makes it (the same array when all fit). */
export function withWireToolCallIds(messages: ChatMessage[], maxLength: number): ChatMessage[] {
  const fits = (id: string | undefined) => id === undefined || wireToolCallId(id, maxLength) === id;
  if (messages.every((m) => fits(m.tool_call_id) && (m.tool_calls ?? []).every((c) => fits(c.id)))) return messages;
  return messages.map((m) => ({
    ...m,
    ...(m.tool_call_id !== undefined && { tool_call_id: wireToolCallId(m.tool_call_id, maxLength) }),
    ...(m.tool_calls && { tool_calls: m.tool_calls.map((c) => ({ ...c, id: wireToolCallId(c.id, maxLength) })) }),
  }));
}
