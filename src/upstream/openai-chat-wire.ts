// Chat completions wire format: the request body we send and how replies map onto the port.
import { UpstreamError, type ChatCall, type ChatOutcome, type FinishReason, type ToolCall, type Usage } from './port.ts';
import { countMessageTokens, countTextTokens } from './tokenizer.ts';
import { withoutCacheMarks, withWireToolCallIds } from './canonical-messages.ts';

/** OpenAI refuses longer tool call ids ("Expected a string with maximum length 40"). */
const OPENAI_TOOL_CALL_ID_LENGTH = 40;

export type MaxTokensField = 'max_tokens' | 'max_completion_tokens';

// Fields the gateway controls; a caller's params must not override them (max_tokens is what
// the quota hold covers, n > 1 would multiply the output).
const CONTROLLED = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'stream',
  'stream_options',
  'n',
  'tools',
  'tool_choice',
  'reasoning_effort',
]);

export function chatRequestBody(call: ChatCall, stream: boolean, maxTokensField: MaxTokensField): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(call.params)) {
    if (!CONTROLLED.has(key) && value !== undefined) body[key] = value;
  }
  body.model = call.upstreamModel;
  // OpenAI caches by itself: the caller's cache marks are not part of its wire; its tool call ids are 40 characters at most.
  body.messages = withWireToolCallIds(withoutCacheMarks(call.messages), OPENAI_TOOL_CALL_ID_LENGTH);
  body[maxTokensField] = call.maxTokens;
  if (call.reasoningEffort) body.reasoning_effort = call.reasoningEffort;
  if (call.tools && call.tools.length > 0) {
    body.tools = call.tools;
    if (call.toolChoice !== undefined) body.tool_choice = call.toolChoice;
  }
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

/** Every text in the request, so error messages can be scrubbed of it. */
export function requestTexts(call: ChatCall): string[] {
  const texts: string[] = [];
  for (const message of call.messages) {
    if (typeof message.content === 'string') texts.push(message.content);
    else for (const part of message.content ?? []) texts.push(part.type === 'text' ? part.text : part.image_url.url);
  }
  return texts;
}

/** The request's texts (prompt, image URLs, tool arguments), for scrubbing error messages. */
export function chatSecrets(call: ChatCall): string[] {
  const texts = requestTexts(call);
  for (const message of call.messages) {
    for (const toolCall of message.tool_calls ?? []) texts.push(toolCall.function.arguments);
  }
  return texts;
}

export function finishReasonOf(raw: unknown, sawToolCalls: boolean): FinishReason {
  if (raw === 'length') return 'length';
  if (raw === 'tool_calls' || raw === 'function_call') return 'tool_calls';
  return sawToolCalls && (raw == null || raw === 'stop') ? 'tool_calls' : 'stop';
}

const count = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined);

/** The upstream's usage, or a tokenizer count when it sent none. */
export function usageOf(raw: unknown, call: ChatCall, content: string, toolCalls: ToolCall[]): Usage {
  const usage = (raw ?? {}) as Record<string, unknown>;
  const prompt = count(usage.prompt_tokens);
  const completion = count(usage.completion_tokens);
  if (prompt !== undefined && completion !== undefined) return { prompt_tokens: prompt, completion_tokens: completion };
  let generated = countTextTokens(content);
  for (const toolCall of toolCalls) generated += countTextTokens(toolCall.function.name) + countTextTokens(toolCall.function.arguments);
  return {
    prompt_tokens: prompt ?? countMessageTokens(call.messages, call.tools),
    completion_tokens: completion ?? generated,
  };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
  }
  return '';
}

function toolCallsOf(raw: unknown): ToolCall[] {
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((item, index): ToolCall[] => {
    const fn = item?.function;
    if (!fn || typeof fn.name !== 'string') return [];
    return [
      {
        id: typeof item.id === 'string' ? item.id : `call_${index}`,
        type: 'function',
        function: { name: fn.name, arguments: typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}) },
      },
    ];
  });
}

export function chatOutcomeOf(body: unknown, call: ChatCall): ChatOutcome {
  const choice = (body as { choices?: unknown[] } | null)?.choices?.[0] as
    { message?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown } | undefined;
  if (!choice?.message || typeof choice.message !== 'object') {
    throw new UpstreamError('upstream chat returned no choices[0].message');
  }
  const content = textOf(choice.message.content);
  const toolCalls = toolCallsOf(choice.message.tool_calls);
  return {
    content,
    toolCalls,
    finishReason: finishReasonOf(choice.finish_reason, toolCalls.length > 0),
    usage: usageOf((body as { usage?: unknown }).usage, call, content, toolCalls),
  };
}
