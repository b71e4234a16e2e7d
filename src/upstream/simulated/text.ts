// The simulated upstream's replies: deterministic text (or a tool call, or the JSON a
// response_format asks for) derived from the conversation, cut to the token cap exactly like a
// real model would stop at max_tokens.
import type { ChatCall, ChatMessage, FinishReason, ToolCall, ToolDefinition } from '../port.ts';
import { countTextTokens, tokenPieces } from '../tokenizer.ts';
import { createRng, digestHex, seedFrom, seedJson } from '../seed.ts';
import { responseFormatOf } from '../response-format.ts';
import { withoutCacheMarks } from '../canonical-messages.ts';
import { structuredText } from './structured.ts';

export interface ReplyPlan {
  /** The reply split into stream parts (about one token each); joined they are `content`. */
  pieces: string[];
  content: string;
  toolCall?: ToolCall;
  finishReason: FinishReason;
  completionTokens: number;
}

const MIN_TOKENS = 20;
const MAX_TOKENS = 80;
const STOPWORDS = new Set(
  (
    'the and for are but not you your with this that from have has was were what when where which who why how ' +
    'can could would should will about into there their then than them they please just also some any all its ' +
    "it's use like explain tell give make want need know does did here hello thanks thank"
  ).split(' '),
);
const SENTENCES: ((a: string, b: string) => string)[] = [
  (a) => `You asked about ${a}, so here is a short answer.`,
  (a, b) => `The simulated upstream sees ${a} and ${b} as closely related.`,
  (a) => `In short, ${a} depends on the context you give it.`,
  (a, b) => `A careful look at ${a} suggests starting small and checking ${b} next.`,
  (a) => `This reply was generated offline, so treat it as a stand-in for a real answer on ${a}.`,
  (a, b) => `Consider how ${a} fits with ${b} before going further.`,
  (a, b) => `Most questions about ${a} come down to ${b} in the end.`,
  (a) => `If ${a} matters here, write down what you expect before you test it.`,
];

function textOf(message: ChatMessage | undefined): string {
  if (!message || message.content == null) return '';
  if (typeof message.content === 'string') return message.content;
  return message.content.map((part) => (part.type === 'text' ? part.text : '')).join(' ');
}

const KEYWORD_SOURCE_CHARS = 65_536;

function keywords(text: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  // Words are capped in length so a pasted blob cannot blow up the reply size, and taken from the
  // text's start only, so a 10 MB prompt does not hold the event loop while they are found.
  for (const word of text.slice(0, KEYWORD_SOURCE_CHARS).match(/[\p{L}\p{N}][\p{L}\p{N}_-]{2,23}/gu) ?? []) {
    const key = word.toLowerCase();
    if (STOPWORDS.has(key) || seen.has(key)) continue;
    seen.add(key);
    out.push(word);
  }
  return out;
}

function shuffled<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function writeText(opening: string, topicText: string, random: () => number): string {
  const words = shuffled(keywords(topicText), random);
  let nextWord = 0;
  const pick = () => (words.length > 0 ? words[nextWord++ % words.length]! : 'your question');
  const target = MIN_TOKENS + Math.floor(random() * (MAX_TOKENS - MIN_TOKENS + 1));
  let content = opening;
  for (const sentence of shuffled(SENTENCES, random)) {
    const next = [content, sentence(pick(), pick())].filter(Boolean).join(' ');
    if (content && countTextTokens(next) > MAX_TOKENS) break;
    content = next;
    if (countTextTokens(content) >= target) break;
  }
  return content;
}

/** Keeps whole stream pieces while they fit in `maxTokens`; the cut text is re-counted. */
function capText(content: string, maxTokens: number): ReplyPlan {
  const all = tokenPieces(content);
  const total = all.reduce((sum, piece) => sum + piece.tokens, 0);
  if (total <= maxTokens) {
    return { pieces: all.map((p) => p.text), content, finishReason: 'stop', completionTokens: countTextTokens(content) };
  }
  const pieces: string[] = [];
  let used = 0;
  for (const piece of all) {
    if (used + piece.tokens > maxTokens) break;
    pieces.push(piece.text);
    used += piece.tokens;
  }
  // Re-encoding a prefix can in rare cases merge differently; never report more than the cap.
  while (pieces.length > 0 && countTextTokens(pieces.join('')) > maxTokens) pieces.pop();
  const cut = pieces.join('');
  return { pieces, content: cut, finishReason: 'length', completionTokens: countTextTokens(cut) };
}

function chosenTool(call: ChatCall, lastText: string): ToolDefinition | undefined {
  const tools = call.tools ?? [];
  const choice = call.toolChoice;
  if (tools.length === 0 || choice === 'none') return undefined;
  if (typeof choice === 'object' && choice !== null) {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    return tools.find((tool) => tool.function.name === name);
  }
  const lower = lastText.toLowerCase();
  const named = tools.find((tool) => lower.includes(tool.function.name.toLowerCase()));
  if (choice === 'required') return named ?? tools[0];
  // "auto": only when the user plainly asks for a tool by name.
  return named && /\b(use|call|run|invoke|execute)\b/.test(lower) ? named : undefined;
}

function sampleValue(schema: Record<string, unknown> | undefined, text: string): unknown {
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  switch (schema?.type) {
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return {};
    default:
      return text.slice(0, 60);
  }
}

function toolArguments(tool: ToolDefinition, text: string): string {
  const parameters = tool.function.parameters ?? {};
  const properties = (parameters.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = Array.isArray(parameters.required) ? (parameters.required as string[]) : [];
  const args: Record<string, unknown> = {};
  for (const name of required) args[name] = sampleValue(properties[name], text);
  return JSON.stringify(args);
}

export function planReply(call: ChatCall): ReplyPlan {
  const seed = seedFrom('chat', call.upstreamModel, seedJson(withoutCacheMarks(call.messages)));
  const last = call.messages.at(-1);
  const lastUser = [...call.messages].reverse().find((message) => message.role === 'user');
  if (last?.role === 'user') {
    const tool = chosenTool(call, textOf(last));
    if (tool) {
      const args = toolArguments(tool, textOf(last));
      const completionTokens = countTextTokens(tool.function.name) + countTextTokens(args);
      if (completionTokens <= call.maxTokens) {
        const toolCall: ToolCall = {
          id: `call_${digestHex('tool', String(seed)).slice(0, 24)}`,
          type: 'function',
          function: { name: tool.function.name, arguments: args },
        };
        return { pieces: tokenPieces(args).map((p) => p.text), content: '', toolCall, finishReason: 'tool_calls', completionTokens };
      }
    }
  }
  const opening = last?.role === 'tool' ? 'The tool finished and its result is in.' : '';
  const prose = () => writeText(opening, textOf(lastUser), createRng(seed));
  const format = responseFormatOf(call.params);
  const content = format ? structuredText(format, seedFrom('structured', String(seed), seedJson(format)), prose) : prose();
  return capText(content, Math.max(0, call.maxTokens));
}
