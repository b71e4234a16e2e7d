// Pass-through of OpenAI Responses bodies for callers who speak Responses themselves: the body
// goes upstream as the caller wrote it (reasoning, include, store, instructions, tools, text,
// prompt_cache_key, ...), but for the model name and max_output_tokens.
import { UpstreamError, type NativeCall, type NativeReply, type NativeStreamEvent } from '../port.ts';
import { callerTexts, readJson, send, type UpstreamTarget } from '../upstream-http.ts';
import { upstreamErrorOf } from './errors.ts';
import { upstreamEvents } from './events.ts';
import { isObject, parseEventData, type Json } from './json.ts';
import { responsesUsageOf } from './usage.ts';
import { jsonBytes } from '../json-slices.ts';

export const RESPONSES_PATH = '/responses';

/** Events whose `delta` is text, reasoning or tool input the caller receives. */
const GENERATING_EVENTS = new Set([
  'response.output_text.delta',
  'response.refusal.delta',
  'response.function_call_arguments.delta',
  'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta',
  'response.custom_tool_call_input.delta',
]);

/** Events that end a response with its final usage. */
const TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete']);

/** A copy of the caller's body (never mutated) with the upstream model and the hold's output cap. */
export function responsesBody(call: NativeCall, stream: boolean): Json {
  const body: Json = { ...call.body, model: call.upstreamModel, max_output_tokens: call.maxTokens };
  if (stream) body.stream = true;
  else {
    // stream_options is only allowed with stream: true.
    delete body.stream;
    delete body.stream_options;
  }
  return body;
}

/** The caller's texts (input items and instructions), never to appear in an error message. */
export const responsesBodySecrets = (body: Json): string[] => callerTexts([body.input, body.instructions]);

export async function responsesCall(target: UpstreamTarget, call: NativeCall): Promise<NativeReply> {
  const op = 'responses';
  const secrets = responsesBodySecrets(call.body);
  const { response, deadline } = await send(target, {
    op,
    path: RESPONSES_PATH,
    body: await jsonBytes(responsesBody(call, false)),
    signal: call.signal,
    secrets,
  });
  const json = await readJson(response, op, call.signal, deadline);
  if (!isObject(json)) throw new UpstreamError(`upstream ${op} returned no response`);
  if (json.status === 'failed') throw upstreamErrorOf(op, json.error, [target.apiKey, ...secrets]);
  const reply: NativeReply = { body: { ...json, model: call.publicModel }, usage: responsesUsageOf(json.usage, op) };
  if (typeof json.id === 'string') reply.upstreamId = json.id;
  return reply;
}

export async function* responsesStream(target: UpstreamTarget, call: NativeCall): AsyncGenerator<NativeStreamEvent> {
  const op = 'responses stream';
  const secrets = [target.apiKey, ...responsesBodySecrets(call.body)];
  const { response, deadline } = await send(target, {
    op,
    path: RESPONSES_PATH,
    body: await jsonBytes(responsesBody(call, true)),
    accept: 'text/event-stream',
    signal: call.signal,
    secrets,
  });

  for await (const sse of upstreamEvents(response, { op, signal: call.signal, deadline })) {
    const json = parseEventData(sse.data, op);
    const type = typeof json.type === 'string' ? json.type : sse.event;
    if (type === 'error' || sse.event === 'error') {
      // The error event carries code/message/param at its top level (some proxies nest an `error`).
      throw upstreamErrorOf(op, isObject(json.error) ? json.error : { code: json.code, message: json.message, param: json.param }, secrets);
    }
    if (type === 'response.failed') throw upstreamErrorOf(op, isObject(json.response) ? json.response.error : undefined, secrets);

    const out: NativeStreamEvent = { event: sse.event === 'message' ? type : sse.event, data: sse.data };
    if (isObject(json.response)) {
      out.data = JSON.stringify({ ...json, response: { ...json.response, model: call.publicModel } });
      if (type === 'response.created' && typeof json.response.id === 'string') out.upstreamId = json.response.id;
    }
    if (GENERATING_EVENTS.has(type) && typeof json.delta === 'string' && json.delta !== '') out.generated = json.delta;
    if (TERMINAL_EVENTS.has(type)) {
      const final = isObject(json.response) ? json.response : {};
      out.usage = responsesUsageOf(final.usage, op);
      if (typeof final.id === 'string') out.upstreamId = final.id;
      yield out;
      return;
    }
    yield out;
  }
  throw new UpstreamError(`upstream ${op} ended before it finished`);
}
