// Pass-through of Anthropic Messages bodies for callers who speak Messages themselves: the body
// goes upstream as the caller wrote it, but for the model name and the output cap.
import { UpstreamError, type Dialect, type NativeCall, type NativeProvider, type NativeReply, type NativeStreamEvent, type Usage } from '../port.ts';
import { callerTexts, readJson } from '../upstream-http.ts';
import { sendMessages, type MessagesEndpoint } from './endpoint.ts';
import { isObject, tokenCount, type Json } from './json.ts';
import { anthropicEvents } from './stream.ts';
import { MIN_THINKING_BUDGET } from './translate.ts';
import { UsageTracker, usageOf } from './usage.ts';

/** The fields count_tokens accepts; the rest (max_tokens, stream, metadata, sampling) it rejects. */
const COUNT_TOKENS_FIELDS = ['messages', 'system', 'tools', 'tool_choice', 'thinking'] as const;

/**
 * The body sent upstream: a copy of the caller's (never mutated) with the upstream model and
 * max_tokens set to the hold's cap; every other field (cache_control blocks, thinking, metadata,
 * tools, tool_choice, system, stop_sequences, sampling, ...) goes along untouched.
 *
 * Thinking: Anthropic rejects `thinking.budget_tokens` >= max_tokens, and max_tokens may now be
 * lower than the caller wrote. The budget is then lowered to max_tokens - 1 if that still meets
 * Anthropic's 1024-token minimum; otherwise `thinking` is dropped, so the caller gets an answer
 * without thinking rather than a 400 for a cap the gateway chose.
 */
export function nativeRequestBody(call: NativeCall, stream: boolean): Json {
  const body: Json = { ...call.body, model: call.upstreamModel, max_tokens: call.maxTokens };
  if (stream) body.stream = true;
  else delete body.stream;
  const thinking = body.thinking;
  if (isObject(thinking) && typeof thinking.budget_tokens === 'number' && thinking.budget_tokens >= call.maxTokens) {
    if (call.maxTokens - 1 >= MIN_THINKING_BUDGET) body.thinking = { ...thinking, budget_tokens: call.maxTokens - 1 };
    else delete body.thinking;
  }
  return body;
}

/** The texts of a Messages body (prompt, system, tool definitions), never to appear in an error. */
function bodySecrets(body: Json): string[] {
  return callerTexts([body.system, body.messages, body.tools]);
}

/** The text, thinking or tool JSON an event streams to the caller. */
function generatedBy(type: string, json: Json): string | undefined {
  if (type === 'content_block_delta' && isObject(json.delta)) {
    const { delta } = json;
    const text =
      delta.type === 'text_delta'
        ? delta.text
        : delta.type === 'thinking_delta'
          ? delta.thinking
          : delta.type === 'input_json_delta'
            ? delta.partial_json
            : undefined;
    return typeof text === 'string' && text !== '' ? text : undefined;
  }
  if (type === 'content_block_start' && isObject(json.content_block) && json.content_block.type === 'text') {
    const { text } = json.content_block;
    return typeof text === 'string' && text !== '' ? text : undefined;
  }
  return undefined;
}

/**
 * The message_delta the gateway sends before message_stop when the upstream sent none with a
 * stop_reason: it carries the final usage (and so what the call cost, once charged) in Anthropic's
 * own wire format. Its delta repeats the last one seen, so a reader that applies it (the SDK's
 * MessageStream overwrites stop_reason, stop_sequence and output_tokens) ends with the same message;
 * its usage is the cumulative total, as Anthropic's message_delta reports it.
 */
export function closingDelta(delta: Json, usage: Usage): Json {
  const cached = usage.cached_tokens ?? 0;
  const written = usage.cache_write_tokens ?? 0;
  return {
    type: 'message_delta',
    delta,
    usage: {
      input_tokens: usage.prompt_tokens - cached - written,
      cache_creation_input_tokens: written,
      cache_read_input_tokens: cached,
      output_tokens: usage.completion_tokens,
    },
  };
}

export function createNativeMessages(endpoint: MessagesEndpoint): NativeProvider {
  async function call(native: NativeCall): Promise<NativeReply> {
    const op = 'messages';
    const { response, deadline } = await sendMessages(endpoint, 'messages', nativeRequestBody(native, false), {
      op,
      signal: native.signal,
      secrets: bodySecrets(native.body),
      headers: native.headers,
    });
    const json = await readJson(response, op, native.signal, deadline);
    if (!isObject(json)) throw new UpstreamError(`upstream ${op} returned no message`);
    const reply: NativeReply = { body: { ...json, model: native.publicModel }, usage: usageOf(json.usage, op) };
    if (typeof json.id === 'string') reply.upstreamId = json.id;
    return reply;
  }

  async function* stream(native: NativeCall): AsyncGenerator<NativeStreamEvent> {
    const op = 'messages stream';
    const secrets = [endpoint.target.apiKey, ...bodySecrets(native.body)];
    const { response, deadline } = await sendMessages(endpoint, 'messages', nativeRequestBody(native, true), {
      op,
      accept: 'text/event-stream',
      signal: native.signal,
      secrets,
      headers: native.headers,
    });
    const usage = new UsageTracker();
    let upstreamId: string | undefined;
    let charged = false;
    // The message's delta so far (stop_reason, stop_sequence, ...), as a message_delta would repeat it.
    let lastDelta: Json = { stop_reason: null, stop_sequence: null };
    // The final usage rides on the event the gateway must not forward before the charge is
    // committed: the message_delta carrying stop_reason. If none did, a message_delta of the
    // gateway's own is sent just before message_stop to carry it (see closingDelta).
    const charge = (out: NativeStreamEvent) => {
      charged = true;
      out.usage = usage.usage(op);
      if (upstreamId !== undefined) out.upstreamId = upstreamId;
    };

    for await (const event of anthropicEvents(response, { op, signal: native.signal, deadline, secrets })) {
      const { json } = event;
      const out: NativeStreamEvent = { event: event.name, data: event.data };
      switch (event.type) {
        case 'message_start':
          if (isObject(json.message)) {
            if (typeof json.message.id === 'string') out.upstreamId = upstreamId = json.message.id;
            usage.merge(json.message.usage);
            if (usage.seen) out.promptUsage = { ...usage.usage(op), completion_tokens: 0 };
            lastDelta = { stop_reason: json.message.stop_reason ?? null, stop_sequence: json.message.stop_sequence ?? null };
            out.data = JSON.stringify({ ...json, message: { ...json.message, model: native.publicModel } });
          }
          break;
        case 'message_delta':
          usage.merge(json.usage);
          if (isObject(json.delta)) lastDelta = { ...lastDelta, ...json.delta };
          if (!charged && isObject(json.delta) && json.delta.stop_reason != null) charge(out);
          break;
        case 'message_stop':
          if (!charged) {
            const closing: NativeStreamEvent = { event: 'message_delta', data: '' };
            charge(closing);
            closing.data = JSON.stringify(closingDelta(lastDelta, closing.usage!));
            yield closing;
          }
          break;
        default: {
          const generated = generatedBy(event.type, json);
          if (generated !== undefined) out.generated = generated;
          // ping and unknown event types are forwarded as they are.
        }
      }
      yield out;
    }
  }

  async function countTokens(native: Omit<NativeCall, 'maxTokens'>): Promise<number> {
    const op = 'count tokens';
    const body: Json = { model: native.upstreamModel };
    for (const field of COUNT_TOKENS_FIELDS) {
      if (native.body[field] !== undefined) body[field] = native.body[field];
    }
    const { response, deadline } = await sendMessages(endpoint, 'count_tokens', body, {
      op,
      signal: native.signal,
      secrets: bodySecrets(native.body),
      headers: native.headers,
    });
    const json = await readJson(response, op, native.signal, deadline);
    const tokens = isObject(json) ? tokenCount(json.input_tokens) : undefined;
    if (tokens === undefined) throw new UpstreamError(`upstream ${op} returned no input_tokens`);
    return tokens;
  }

  return { dialects: new Set<Dialect>(['messages']), call, stream, countTokens };
}
