// chat / chatStream: the canonical chat call sent as an OpenAI chat completion, with the
// upstream's own usage read in full (cached and reasoning tokens) and its response id kept.
import { UpstreamError, type ChatCall, type ChatOutcome, type ChatStreamPart, type Usage } from '../port.ts';
import { readJson, send, type UpstreamTarget } from '../upstream-http.ts';
import { chatOutcomeOf, chatRequestBody, finishReasonOf, requestTexts } from '../openai-chat-wire.ts';
import { upstreamErrorOf } from './errors.ts';
import { upstreamEvents } from './events.ts';
import { isObject, parseEventData } from './json.ts';
import { chatUsageOf } from './usage.ts';
import { jsonBytes } from '../json-slices.ts';

export const CHAT_PATH = '/chat/completions';

// OpenAI deprecated max_tokens for chat; reasoning models accept only max_completion_tokens.
const MAX_TOKENS_FIELD = 'max_completion_tokens';

export async function chat(target: UpstreamTarget, call: ChatCall): Promise<ChatOutcome> {
  const op = 'chat';
  const { response, deadline } = await send(target, {
    op,
    path: CHAT_PATH,
    body: await jsonBytes(chatRequestBody(call, false, MAX_TOKENS_FIELD)),
    signal: call.signal,
    secrets: requestTexts(call),
  });
  const json = await readJson(response, op, call.signal, deadline);
  // Usage first: a reply without it is refused before anything is made of it.
  const usage = chatUsageOf(isObject(json) ? json.usage : undefined, op);
  const outcome = { ...chatOutcomeOf(json, call), usage };
  const id = (json as { id?: unknown }).id;
  if (typeof id === 'string') outcome.upstreamId = id;
  return outcome;
}

interface ToolDeltaWire {
  index?: unknown;
  id?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}

export async function* chatStream(target: UpstreamTarget, call: ChatCall): AsyncGenerator<ChatStreamPart> {
  const op = 'chat stream';
  const secrets = [target.apiKey, ...requestTexts(call)];
  const { response, deadline } = await send(target, {
    op,
    path: CHAT_PATH,
    // chatRequestBody always asks for stream_options.include_usage when streaming.
    body: await jsonBytes(chatRequestBody(call, true, MAX_TOKENS_FIELD)),
    accept: 'text/event-stream',
    signal: call.signal,
    secrets,
  });
  const toolIndexes = new Set<number>();
  let rawFinish: unknown;
  let usage: Usage | undefined;
  let upstreamId: string | undefined;
  let done = false;

  for await (const event of upstreamEvents(response, { op, signal: call.signal, deadline })) {
    if (event.data === '[DONE]') {
      done = true;
      break;
    }
    const chunk = parseEventData(event.data, op);
    if (chunk.error != null) throw upstreamErrorOf(op, chunk.error, secrets);
    if (upstreamId === undefined && typeof chunk.id === 'string') upstreamId = chunk.id;
    if (chunk.usage != null) usage = chatUsageOf(chunk.usage, op);
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    if (!isObject(choice)) continue;
    const delta = isObject(choice.delta) ? choice.delta : {};
    if (typeof delta.content === 'string' && delta.content !== '') yield { type: 'text', text: delta.content };
    if (Array.isArray(delta.tool_calls)) {
      for (const raw of delta.tool_calls as ToolDeltaWire[]) {
        const part = toolPart(raw);
        toolIndexes.add(part.index);
        yield part;
      }
    }
    if (choice.finish_reason != null) rawFinish = choice.finish_reason;
  }
  // The usage chunk is the last one before [DONE]: a stream cut after it is complete.
  if (!usage) throw new UpstreamError(`upstream ${op} ${done ? 'ended without usage' : 'ended before it finished'}`);
  const finish: ChatStreamPart = { type: 'finish', finishReason: finishReasonOf(rawFinish, toolIndexes.size > 0), usage };
  if (upstreamId !== undefined) finish.upstreamId = upstreamId;
  yield finish;
}

function toolPart(raw: ToolDeltaWire): Extract<ChatStreamPart, { type: 'tool_call' }> {
  const part: Extract<ChatStreamPart, { type: 'tool_call' }> = { type: 'tool_call', index: typeof raw.index === 'number' ? raw.index : 0 };
  if (typeof raw.id === 'string') part.id = raw.id;
  if (typeof raw.function?.name === 'string') part.name = raw.function.name;
  if (typeof raw.function?.arguments === 'string') part.arguments = raw.function.arguments;
  return part;
}
