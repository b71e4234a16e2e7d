// A canonical chat call as Gemini's generateContent request (contents, system instruction, tools,
// generation config), and a Gemini reply as the port's outcome. Pure: no client, no I/O.
import type { Content, FunctionCallingConfigMode, GenerateContentConfig, GenerateContentResponse, Part } from '@google/genai';
import { randomUUID } from 'node:crypto';
import { UpstreamError, type ChatCall, type ChatMessage, type FinishReason, type ToolCall } from '../port.ts';
import { responseFormatOf } from '../response-format.ts';
import { messageText, systemPrompt, toolArguments } from '../canonical-messages.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

export interface GenerateRequest {
  contents: Content[];
  config: GenerateContentConfig;
}

// Where a tool call id carries its thought signature (see toolCallOf).
const SIGNATURE_MARK = '__sig_';
// The models that refuse a tool call sent back without its thought signature.
const SIGNED_TOOL_CALLS = /^gemini-3/;
// Google's documented stand-in for a signature the gateway never saw (a conversation begun elsewhere).
const UNKNOWN_SIGNATURE = 'skip_thought_signature_validator';

// Thinking budgets for OpenAI's reasoning efforts (Gemini 2.5 takes a budget; Gemini 3 accepts it too).
const THINKING_BUDGETS: Record<string, number> = { none: 0, minimal: 0, low: 1024, medium: 8192, high: 24576, xhigh: 32768, max: 32768 };

/** data: URLs become inline bytes; Gemini's API fetches no arbitrary URL, so others are refused. */
function imagePart(url: string): Part {
  const match = /^data:([^;,]+)?((?:;[^;,]*)*),(.*)$/is.exec(url);
  if (match && /;base64/i.test(match[2] ?? '')) {
    const mimeType = (match[1] || 'application/octet-stream').toLowerCase().replace('image/jpg', 'image/jpeg');
    return { inlineData: { mimeType, data: match[3]!.replace(/\s+/g, '') } };
  }
  // The URL itself is never echoed: it may be a signed link.
  throw new UpstreamError('gemini upstreams take images as base64 data: URLs only', undefined, 'request');
}

function userParts(content: ChatMessage['content']): Part[] {
  if (typeof content === 'string') return [{ text: content }];
  return (content ?? []).map((part) => (part.type === 'text' ? { text: part.text } : imagePart(part.image_url.url)));
}

/** A tool's result as Gemini's functionResponse.response (an object): JSON objects as they are, the rest under `result`. */
function toolResult(text: string): Json {
  try {
    const value: unknown = JSON.parse(text);
    if (isObject(value)) return value;
  } catch {
    // plain text
  }
  return { result: text };
}

/**
 * The conversation as Gemini contents: assistant turns are the model's, tool results go back as
 * the user's functionResponse parts (named after the call they answer), and consecutive turns of
 * one role are merged, since Gemini wants the roles to alternate.
 */
function contentsOf(messages: ChatMessage[], signsToolCalls: boolean): Content[] {
  const names = new Map<string, string>();
  const contents: Content[] = [];
  const add = (role: 'user' | 'model', parts: Part[]) => {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    if (last?.role === role) last.parts!.push(...parts);
    else contents.push({ role, parts });
  };
  for (const message of messages) {
    if (message.role === 'system' || message.role === 'developer') continue;
    if (message.role === 'assistant') {
      const parts: Part[] = [];
      const text = messageText(message.content);
      if (text !== '') parts.push({ text });
      message.tool_calls?.forEach((call, i) => {
        const { id, signature } = fromToolCallId(call.id);
        names.set(call.id, call.function.name);
        const part: Part = { functionCall: { id, name: call.function.name, args: toolArguments(call.function.arguments) } };
        // Gemini 3 wants the first call of each step signed; an unknown signature gets Google's documented stand-in.
        const sign = signature ?? (i === 0 && signsToolCalls ? UNKNOWN_SIGNATURE : undefined);
        if (sign) part.thoughtSignature = sign;
        parts.push(part);
      });
      add('model', parts);
    } else if (message.role === 'tool') {
      const callId = message.tool_call_id ?? '';
      const name = names.get(callId) ?? message.name ?? 'tool';
      add('user', [{ functionResponse: { id: fromToolCallId(callId).id, name, response: toolResult(messageText(message.content)) } }]);
    } else {
      add('user', userParts(message.content));
    }
  }
  return contents;
}

/** OpenAI's tool_choice as Gemini's function calling mode. */
function toolConfigOf(choice: unknown): GenerateContentConfig['toolConfig'] {
  const mode = (m: string) => m as FunctionCallingConfigMode;
  if (choice === 'auto') return { functionCallingConfig: { mode: mode('AUTO') } };
  if (choice === 'none') return { functionCallingConfig: { mode: mode('NONE') } };
  if (choice === 'required') return { functionCallingConfig: { mode: mode('ANY') } };
  if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string')
    return { functionCallingConfig: { mode: mode('ANY'), allowedFunctionNames: [choice.function.name] } };
  return undefined;
}

const numberParam = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

function stopSequencesOf(stop: unknown): string[] | undefined {
  if (typeof stop === 'string') return [stop];
  if (Array.isArray(stop) && stop.every((s) => typeof s === 'string') && stop.length > 0) return stop;
  return undefined;
}

export function generateRequest(call: ChatCall, signal: AbortSignal): GenerateRequest {
  const config: GenerateContentConfig = {
    maxOutputTokens: call.maxTokens,
    abortSignal: signal,
    // The gateway runs the tools and resumes nothing by itself: one request, one bill.
    automaticFunctionCalling: { disable: true },
    automaticContinuation: false,
  };
  const system = systemPrompt(call.messages);
  if (system !== '') config.systemInstruction = { parts: [{ text: system }] };
  const p = call.params;
  const numbers = { temperature: p.temperature, topP: p.top_p, presencePenalty: p.presence_penalty, frequencyPenalty: p.frequency_penalty, seed: p.seed };
  for (const [key, value] of Object.entries(numbers)) {
    const n = numberParam(value);
    if (n !== undefined) (config as Json)[key] = n;
  }
  const stop = stopSequencesOf(p.stop);
  if (stop) config.stopSequences = stop;
  const format = responseFormatOf(p);
  if (format) {
    config.responseMimeType = 'application/json';
    if (format.type === 'json_schema') config.responseJsonSchema = format.schema;
  }
  if (call.reasoningEffort !== undefined && call.reasoningEffort in THINKING_BUDGETS) {
    config.thinkingConfig = { thinkingBudget: Math.min(THINKING_BUDGETS[call.reasoningEffort]!, call.maxTokens) };
  }
  if (call.tools && call.tools.length > 0) {
    config.tools = [
      {
        functionDeclarations: call.tools.map((tool) => ({
          name: tool.function.name,
          ...(tool.function.description !== undefined && { description: tool.function.description }),
          ...(tool.function.parameters !== undefined && { parametersJsonSchema: tool.function.parameters }),
        })),
      },
    ];
    const toolConfig = toolConfigOf(call.toolChoice);
    if (toolConfig) config.toolConfig = toolConfig;
  }
  return { contents: contentsOf(call.messages, SIGNED_TOOL_CALLS.test(call.upstreamModel)), config };
}

/** The reply's visible parts: thought summaries are the model's thinking, never its answer. */
export function answerParts(response: GenerateContentResponse): Part[] {
  return (response.candidates?.[0]?.content?.parts ?? []).filter((part) => part.thought !== true);
}

/**
 * A Gemini function call as a tool call. Gemini's ids are optional, so one is made when absent (or
 * unfit for the callers' wires). The call's thought signature, which Gemini 3 wants back with the
 * call in the next request, rides in the id the caller will send back (base64url, so the id stays
 * in every dialect's alphabet); wires with short ids get a digest of it (see wireToolCallId).
 */
export function toolCallOf(part: Part): ToolCall | undefined {
  const fn = part.functionCall;
  if (!fn || typeof fn.name !== 'string') return undefined;
  const base = fn.id && /^[\w-]{1,64}$/.test(fn.id) && !fn.id.includes(SIGNATURE_MARK) ? fn.id : `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
  const id = part.thoughtSignature ? `${base}${SIGNATURE_MARK}${Buffer.from(part.thoughtSignature, 'base64').toString('base64url')}` : base;
  return { id, type: 'function', function: { name: fn.name, arguments: JSON.stringify(fn.args ?? {}) } };
}

/** A tool call id as toolCallOf made it: Gemini's own id, and the thought signature it carries (base64 again). */
export function fromToolCallId(callId: string): { id: string; signature?: string } {
  const at = callId.indexOf(SIGNATURE_MARK);
  if (at <= 0) return { id: callId };
  return { id: callId.slice(0, at), signature: Buffer.from(callId.slice(at + SIGNATURE_MARK.length), 'base64url').toString('base64') };
}

/** Gemini's finishReason: it has no reason of its own for tool calls, so a turn that called one says so. */
export function finishReasonOf(raw: unknown, sawToolCalls: boolean): FinishReason {
  if (raw === 'MAX_TOKENS') return 'length';
  return sawToolCalls ? 'tool_calls' : 'stop';
}

/**
 * A reply that answers nothing because Gemini blocked the prompt (promptFeedback.blockReason):
 * the caller's request, refused; never retried on another channel.
 */
export function blockedPrompt(response: GenerateContentResponse, op: string): UpstreamError | undefined {
  const reason = response.promptFeedback?.blockReason;
  if (!reason || (response.candidates?.length ?? 0) > 0) return undefined;
  const tag = /^[A-Z_]{1,40}$/.test(String(reason)) ? String(reason) : 'OTHER';
  return new UpstreamError(`upstream ${op} was refused: Gemini blocked the prompt (${tag}); rephrase it`, 400, 'request');
}
