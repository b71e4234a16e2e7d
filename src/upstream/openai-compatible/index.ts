// Adapter for any upstream that speaks OpenAI chat completions and images, over plain fetch.
import {
  UpstreamError,
  type ChatCall,
  type ChatOutcome,
  type ChatStreamPart,
  type ImageCall,
  type ImageOutcome,
  type Provider,
  type ToolCall,
} from '../port.ts';
import { asUpstreamFailure, errorDetail, readJson, send, type UpstreamTarget } from '../upstream-http.ts';
import { chatOutcomeOf, chatRequestBody, finishReasonOf, requestTexts, usageOf, type MaxTokensField } from '../openai-chat-wire.ts';
import { readSse } from '../sse.ts';
import { assertSourceImage } from '../image-source.ts';
import { normaliseUpstreamImage } from '../image-output.ts';
import { jsonBytes } from '../json-slices.ts';
import { embedOverOpenAIWire } from '../openai-embeddings.ts';

export { InvalidImageError } from '../image-error.ts';

export interface OpenAICompatibleOptions {
  /** e.g. https://api.openai.com/v1 (the paths /chat/completions and /images/* are appended). */
  baseURL: string;
  apiKey: string;
  /** Longest silence accepted from the upstream: before the reply, or between stream chunks. */
  timeoutMs?: number;
  /** Longest wait for the connection, and for the reply's first byte (default: timeoutMs). */
  connectTimeoutMs?: number;
  firstByteTimeoutMs?: number;
  /** Which field carries the token cap; some newer models only accept max_completion_tokens. */
  maxTokensField?: MaxTokensField;
}

const DEFAULT_TIMEOUT_MS = 300_000;

export function createOpenAICompatibleProvider(options: OpenAICompatibleOptions): Provider {
  const target: UpstreamTarget = {
    baseURL: options.baseURL,
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    connectTimeoutMs: options.connectTimeoutMs,
    firstByteTimeoutMs: options.firstByteTimeoutMs,
  };
  const maxTokensField = options.maxTokensField ?? 'max_tokens';

  async function chat(call: ChatCall): Promise<ChatOutcome> {
    const { response, deadline } = await send(target, {
      op: 'chat',
      path: '/chat/completions',
      body: await jsonBytes(chatRequestBody(call, false, maxTokensField)),
      signal: call.signal,
      secrets: requestTexts(call),
    });
    return chatOutcomeOf(await readJson(response, 'chat', call.signal, deadline), call);
  }

  async function* chatStream(call: ChatCall): AsyncGenerator<ChatStreamPart> {
    const secrets = [target.apiKey, ...requestTexts(call)];
    const { response, deadline } = await send(target, {
      op: 'chat stream',
      path: '/chat/completions',
      body: await jsonBytes(chatRequestBody(call, true, maxTokensField)),
      accept: 'text/event-stream',
      signal: call.signal,
      secrets,
    });
    try {
      if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
        // Some upstreams ignore stream: true and answer in one JSON body.
        yield* partsOf(chatOutcomeOf(await readJson(response, 'chat stream', call.signal, deadline), call));
        return;
      }
      if (!response.body) throw new UpstreamError('upstream chat stream had no body');
      let text = '';
      const tools = new Map<number, ToolCall>();
      let rawFinish: unknown;
      let rawUsage: unknown;
      let sawDone = false;
      for await (const event of readSse(response.body, () => deadline.touch())) {
        if (event.data === '[DONE]') {
          sawDone = true;
          break;
        }
        const chunk = parseChunk(event.data);
        if (chunk.error) throw new UpstreamError(`upstream chat stream failed: ${errorDetail(chunk, secrets) || 'error event'}`);
        if (chunk.usage) rawUsage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const parts: ChatStreamPart[] = [];
        const content = choice.delta?.content;
        if (typeof content === 'string' && content !== '') {
          text += content;
          parts.push({ type: 'text', text: content });
        }
        for (const delta of choice.delta?.tool_calls ?? []) parts.push(toolDelta(delta, tools));
        if (choice.finish_reason != null) rawFinish = choice.finish_reason;
        // The silence timer must not run while a slow client is consuming what we yield.
        deadline.clear();
        for (const part of parts) yield part;
        deadline.touch();
      }
      if (!sawDone && rawFinish === undefined) throw new UpstreamError('upstream chat stream ended before it finished');
      const toolCalls = [...tools.values()];
      yield {
        type: 'finish',
        finishReason: finishReasonOf(rawFinish, toolCalls.length > 0),
        usage: usageOf(rawUsage, call, text, toolCalls),
      };
    } catch (error) {
      throw asUpstreamFailure(error, 'chat stream', call.signal, deadline);
    } finally {
      deadline.clear();
    }
  }

  async function image(call: ImageCall): Promise<ImageOutcome> {
    let path = '/images/generations';
    let body: string | FormData;
    if (call.source) {
      const format = await assertSourceImage(call.source.bytes);
      const form = new FormData();
      form.set('model', call.upstreamModel);
      form.set('prompt', call.prompt);
      form.set('size', call.size);
      form.set('n', '1');
      form.set('response_format', 'b64_json');
      form.set('image', new Blob([new Uint8Array(call.source.bytes)], { type: `image/${format}` }), `image.${format === 'jpeg' ? 'jpg' : format}`);
      path = '/images/edits';
      body = form;
    } else {
      body = JSON.stringify({ model: call.upstreamModel, prompt: call.prompt, size: call.size, n: 1, response_format: 'b64_json' });
    }
    const { response, deadline } = await send(target, { op: 'image', path, body, signal: call.signal, secrets: [call.prompt] });
    const json = (await readJson(response, 'image', call.signal, deadline)) as { data?: { b64_json?: unknown }[] } | null;
    const b64 = json?.data?.[0]?.b64_json;
    if (typeof b64 !== 'string' || b64 === '') throw new UpstreamError('upstream image returned no data[0].b64_json');
    return { jpeg: await normaliseUpstreamImage(Buffer.from(b64, 'base64'), call.size) };
  }

  return { name: 'openai-compatible', chat, chatStream, image, embed: (call) => embedOverOpenAIWire(target, call) };
}

interface StreamChunk {
  error?: unknown;
  usage?: unknown;
  choices?: { delta?: { content?: unknown; tool_calls?: ToolDeltaWire[] }; finish_reason?: unknown }[];
}

interface ToolDeltaWire {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

function parseChunk(data: string): StreamChunk {
  try {
    const chunk: unknown = JSON.parse(data);
    if (chunk && typeof chunk === 'object') return chunk as StreamChunk;
  } catch {
    // fall through
  }
  throw new UpstreamError('upstream chat stream sent a malformed chunk');
}

/** Passes a tool-call delta through and accumulates it (for the fallback token count). */
function toolDelta(delta: ToolDeltaWire, tools: Map<number, ToolCall>): ChatStreamPart {
  const index = typeof delta.index === 'number' ? delta.index : 0;
  const known = tools.get(index) ?? { id: '', type: 'function', function: { name: '', arguments: '' } };
  const part: ChatStreamPart = { type: 'tool_call', index };
  if (typeof delta.id === 'string') known.id = part.id = delta.id;
  if (typeof delta.function?.name === 'string') {
    part.name = delta.function.name;
    known.function.name += delta.function.name;
  }
  if (typeof delta.function?.arguments === 'string') {
    part.arguments = delta.function.arguments;
    known.function.arguments += delta.function.arguments;
  }
  tools.set(index, known);
  return part;
}

/** A whole reply as stream parts, for upstreams that did not stream. */
function* partsOf(outcome: ChatOutcome): Generator<ChatStreamPart> {
  if (outcome.content) yield { type: 'text', text: outcome.content };
  for (const [index, call] of outcome.toolCalls.entries()) {
    yield { type: 'tool_call', index, id: call.id, name: call.function.name, arguments: call.function.arguments };
  }
  yield { type: 'finish', finishReason: outcome.finishReason, usage: outcome.usage };
}
