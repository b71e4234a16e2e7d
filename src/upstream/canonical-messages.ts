// Reading a canonical call's messages, for the adapters that translate it into another wire
// (Anthropic Messages, Gemini contents, Bedrock Converse): a message's text, the system prompt, a
// tool call's arguments as an object, the messages without the caller's cache marks.
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
