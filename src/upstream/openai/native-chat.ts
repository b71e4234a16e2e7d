// Pass-through of chat completions bodies for callers who speak chat completions themselves:
// the body goes upstream as the caller wrote it, but for the model name and the output cap.
import { UpstreamError, type NativeCall, type NativeReply, type NativeStreamEvent, type Usage } from '../port.ts';
import { callerTexts, readJson, send, type UpstreamTarget } from '../upstream-http.ts';
import { CHAT_PATH } from './chat.ts';
import { upstreamErrorOf } from './errors.ts';
import { upstreamEvents } from './events.ts';
import { isObject, parseEventData, type Json } from './json.ts';
import { chatUsageOf } from './usage.ts';
import { jsonBytes } from '../json-slices.ts';

const present = (body: Json, field: string): boolean => body[field] !== undefined && body[field] !== null;

/**
 * The body sent upstream: a copy of the caller's (never mutated) with the upstream model and the
 * output cap set to the hold's, in the field the caller used (max_completion_tokens, else
 * max_tokens, else max_completion_tokens; never both). Every other field goes along untouched.
 * Streams always ask for include_usage, so the final usage is the upstream's own.
 */
export function nativeChatBody(call: NativeCall, stream: boolean): Json {
  const body: Json = { ...call.body, model: call.upstreamModel };
  const field = present(call.body, 'max_completion_tokens') || !present(call.body, 'max_tokens') ? 'max_completion_tokens' : 'max_tokens';
  delete body[field === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens'];
  body[field] = call.maxTokens;
  if (stream) {
    body.stream = true;
    body.stream_options = { ...(isObject(call.body.stream_options) ? call.body.stream_options : {}), include_usage: true };
  } else {
    // stream_options is refused without stream: true.
    delete body.stream;
    delete body.stream_options;
  }
  return body;
}

/** The caller's texts (the messages), never to appear in an error message. */
export const chatBodySecrets = (body: Json): string[] => callerTexts(body.messages);

/** The text, refusal or tool-call arguments a chunk streams to the caller (all choices). */
function generatedBy(chunk: Json): string | undefined {
  if (!Array.isArray(chunk.choices)) return undefined;
  let text = '';
  for (const choice of chunk.choices) {
    const delta = isObject(choice) && isObject(choice.delta) ? choice.delta : undefined;
    if (!delta) continue;
    if (typeof delta.content === 'string') text += delta.content;
    if (typeof delta.refusal === 'string') text += delta.refusal;
    if (Array.isArray(delta.tool_calls)) {
      for (const tool of delta.tool_calls) {
        const args = isObject(tool) && isObject(tool.function) ? tool.function.arguments : undefined;
        if (typeof args === 'string') text += args;
      }
    }
  }
  return text === '' ? undefined : text;
}

export async function nativeChatCall(target: UpstreamTarget, call: NativeCall): Promise<NativeReply> {
  const op = 'chat';
  const { response, deadline } = await send(target, {
    op,
    path: CHAT_PATH,
    body: await jsonBytes(nativeChatBody(call, false)),
    signal: call.signal,
    secrets: chatBodySecrets(call.body),
  });
  const json = await readJson(response, op, call.signal, deadline);
  if (!isObject(json)) throw new UpstreamError(`upstream ${op} returned no completion`);
  const reply: NativeReply = { body: { ...json, model: call.publicModel }, usage: chatUsageOf(json.usage, op) };
  if (typeof json.id === 'string') reply.upstreamId = json.id;
  return reply;
}

export async function* nativeChatStream(target: UpstreamTarget, call: NativeCall): AsyncGenerator<NativeStreamEvent> {
  const op = 'chat stream';
  const secrets = [target.apiKey, ...chatBodySecrets(call.body)];
  const { response, deadline } = await send(target, {
    op,
    path: CHAT_PATH,
    body: await jsonBytes(nativeChatBody(call, true)),
    accept: 'text/event-stream',
    signal: call.signal,
    secrets,
  });
  // The gateway always asks for usage; the caller sees it only if they asked too.
  const callerWantsUsage = isObject(call.body.stream_options) && call.body.stream_options.include_usage === true;
  let usage: Usage | undefined;
  // The first chunk names the response: a caller who leaves early still has it on the charge.
  let named = false;
  // A caller who did not ask for usage learns what the call cost from the final chunk (the last
  // with a finish_reason): it is held back until the usage chunk that follows it, then carries
  // the charge, and so leaves only once charged, with a top-level billed_tokens.
  let held: NativeStreamEvent | null = null;

  for await (const event of upstreamEvents(response, { op, signal: call.signal, deadline })) {
    if (event.data === '[DONE]') {
      if (!usage) throw new UpstreamError(`upstream ${op} ended without usage`);
      yield { data: '[DONE]' };
      return;
    }
    const chunk = parseEventData(event.data, op);
    if (chunk.error != null) throw upstreamErrorOf(op, chunk.error, secrets);
    const out: NativeStreamEvent = { data: '' };
    const generated = generatedBy(chunk);
    if (generated !== undefined) out.generated = generated;
    const forwarded: Json = { ...chunk, model: call.publicModel };
    if (!named && typeof chunk.id === 'string') {
      out.upstreamId = chunk.id;
      named = true;
    }
    const finishing = !callerWantsUsage && !usage && finishes(chunk);
    if (chunk.usage != null && !usage) {
      usage = chatUsageOf(chunk.usage, op);
      // The charge rides on the caller's final chunk when one is held, else on this one.
      const carrier = held ?? out;
      carrier.usage = usage;
      if (typeof chunk.id === 'string') carrier.upstreamId = chunk.id;
      // The usage-only chunk (choices: []) the caller did not ask for is metered, not forwarded.
      if (!callerWantsUsage && generated === undefined && !(Array.isArray(chunk.choices) && chunk.choices.length > 0)) out.hidden = true;
    }
    // Without include_usage a caller's chunks carry no usage field at all.
    if (!callerWantsUsage && !out.hidden) delete forwarded.usage;
    out.data = JSON.stringify(forwarded);
    if (held) {
      yield held;
      held = null;
    }
    if (finishing && !out.usage) held = out;
    else yield out;
  }
  // The usage chunk is the last before [DONE]: a stream cut just after it is complete.
  if (!usage) throw new UpstreamError(`upstream ${op} ended before it finished`);
  yield { data: '[DONE]' };
}

/** Whether a chunk ends a choice (carries a finish_reason). */
function finishes(chunk: Json): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.some((choice) => isObject(choice) && choice.finish_reason != null);
}
