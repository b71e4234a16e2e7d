// The native OpenAI provider against the local OpenAI double: canonical chat and images,
// chat.completions and Responses pass-through, usage details, and every failure mapped to the
// right UpstreamError kind without leaking the key or the prompt.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { createOpenAIProvider, InvalidImageError } from '../src/upstream/openai/index.ts';
import { eventWithBilledTokens } from '../src/calls/billed-usage.ts';
import { errorKindOf } from '../src/upstream/openai/errors.ts';
import {
  UpstreamError,
  type ChatCall,
  type ChatMessage,
  type ChatStreamPart,
  type NativeCall,
  type NativeStreamEvent,
  type Provider,
  type ToolDefinition,
} from '../src/upstream/port.ts';
import { jsonPieces, wordPieces, type RecordedFile, rejection } from './support/double-http.ts';
import { OPENAI_REASONING_TOKENS, openaiPromptTokens, startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';

const KEY = 'sk-proj-SECRET-openai-key-0123456789abcdef';
const PROMPT = 'Tell me a secret story about the purple elephant named Bartholomew';
const REPLY = 'Once upon a time there was a purple elephant who loved tea.';
const TOOL_ARGS = '{"city":"Paris","unit":"celsius"}';
const UPSTREAM = 'gpt-upstream-9';
const PUBLIC = 'tollgate/gpt-public';

const messages: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: PROMPT },
];
const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
];

let double: OpenAIDouble;
let toolDouble: OpenAIDouble;
let provider: Provider;
let toolProvider: Provider;

test.before(async () => {
  double = await startOpenAIDouble({ apiKey: KEY, reply: REPLY });
  toolDouble = await startOpenAIDouble({ apiKey: KEY, toolCall: { arguments: TOOL_ARGS } });
  provider = createOpenAIProvider({ baseURL: `${double.url}/v1`, apiKey: KEY, organization: 'org-test', project: 'proj_test', timeoutMs: 5_000 });
  toolProvider = createOpenAIProvider({ baseURL: `${toolDouble.url}/v1`, apiKey: KEY, timeoutMs: 5_000 });
});
test.after(async () => {
  await double.close();
  await toolDouble.close();
});
test.before.each(() => {
  double.setDefault(null);
  double.clearCache();
  toolDouble.clearCache();
});

// ---- helpers ------------------------------------------------------------------------------

const words = (text: string) => wordPieces(text).length;
const lastRequest = (d: OpenAIDouble = double) => d.requests.at(-1)!;

function chatCall(extra: Partial<ChatCall> = {}): ChatCall {
  return { upstreamModel: UPSTREAM, messages, maxTokens: 256, params: {}, signal: new AbortController().signal, ...extra };
}

function nativeCall(dialect: NativeCall['dialect'], body: Record<string, unknown>, extra: Partial<NativeCall> = {}): NativeCall {
  return { dialect, upstreamModel: UPSTREAM, publicModel: PUBLIC, body, maxTokens: 300, signal: new AbortController().signal, ...extra };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Collects until the iterable throws; returns what arrived and the error. */
async function collectUntilError<T>(items: AsyncIterable<T>): Promise<{ items: T[]; error: Error }> {
  const out: T[] = [];
  try {
    for await (const item of items) out.push(item);
  } catch (error) {
    return { items: out, error: error as Error };
  }
  throw new Error(`expected the stream to fail; it yielded ${out.length} items`);
}

function assertUpstream(error: Error, kind: UpstreamError['kind'], status?: number): UpstreamError {
  assert.instance(error, UpstreamError, `expected an UpstreamError, got ${error.name}: ${error.message}`);
  const upstream = error as UpstreamError;
  assert.is(upstream.kind, kind, upstream.message);
  assert.is(upstream.status, status);
  assert.not.ok(upstream.message.includes(KEY), 'the key leaked');
  assert.not.ok(upstream.message.includes(PROMPT), 'the prompt leaked');
  return upstream;
}

const textOf = (parts: ChatStreamPart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
const generatedOf = (events: NativeStreamEvent[]) => events.map((e) => e.generated ?? '').join('');
const parsed = (event: NativeStreamEvent) => JSON.parse(event.data) as Record<string, any>;

// ---- canonical chat ------------------------------------------------------------------------

test('chat: sends max_completion_tokens and auth headers; reads cached and reasoning usage and the id', async () => {
  const call = chatCall({ reasoningEffort: 'high', params: { temperature: 0.3, seed: 7, max_tokens: 99_999, stream: true } });
  const first = await provider.chat(call);
  const request = lastRequest();
  assert.is(request.path, '/v1/chat/completions');
  assert.is(request.headers.authorization, `Bearer ${KEY}`);
  assert.is(request.headers['openai-organization'], 'org-test');
  assert.is(request.headers['openai-project'], 'proj_test');
  assert.equal(request.body, { temperature: 0.3, seed: 7, model: UPSTREAM, messages, max_completion_tokens: 256, reasoning_effort: 'high' });

  const prompt = openaiPromptTokens(request.body);
  const reasoning = OPENAI_REASONING_TOKENS.high!;
  assert.is(first.content, REPLY);
  assert.is(first.finishReason, 'stop');
  assert.equal(first.toolCalls, []);
  assert.equal(first.usage, { prompt_tokens: prompt, completion_tokens: reasoning + words(REPLY), cached_tokens: 0, reasoning_tokens: reasoning });
  assert.match(first.upstreamId ?? '', /^chatcmpl-\w{29}$/);

  // The same prompt again: OpenAI reports it cached, inside prompt_tokens.
  const second = await provider.chat(call);
  assert.equal(second.usage, { prompt_tokens: prompt, completion_tokens: reasoning + words(REPLY), cached_tokens: prompt, reasoning_tokens: reasoning });
  assert.is.not(second.upstreamId, first.upstreamId);
});

test('chatStream: asks for include_usage; text, then one finish with the upstream usage and id', async () => {
  await provider.chat(chatCall()); // warm the cache
  const parts = await collect(provider.chatStream(chatCall({ reasoningEffort: 'low' })));
  const request = lastRequest();
  assert.is(request.body.stream, true);
  assert.equal(request.body.stream_options, { include_usage: true });
  assert.is(request.body.max_completion_tokens, 256);
  assert.is(request.body.max_tokens, undefined);

  assert.is(textOf(parts), REPLY);
  const finishes = parts.filter((p) => p.type === 'finish');
  assert.is(finishes.length, 1);
  assert.is(parts.at(-1), finishes[0]);
  const finish = finishes[0] as Extract<ChatStreamPart, { type: 'finish' }>;
  const prompt = openaiPromptTokens(request.body);
  const reasoning = OPENAI_REASONING_TOKENS.low!;
  assert.is(finish.finishReason, 'stop');
  assert.equal(finish.usage, { prompt_tokens: prompt, completion_tokens: reasoning + words(REPLY), cached_tokens: prompt, reasoning_tokens: reasoning });
  assert.match(finish.upstreamId ?? '', /^chatcmpl-\w{29}$/);
});

test('chat and chatStream: tool calls come back with their arguments and finish tool_calls', async () => {
  const outcome = await toolProvider.chat(chatCall({ tools, toolChoice: 'auto' }));
  assert.is(outcome.finishReason, 'tool_calls');
  assert.is(outcome.toolCalls.length, 1);
  assert.is(outcome.toolCalls[0]!.function.name, 'get_weather');
  assert.is(outcome.toolCalls[0]!.function.arguments, TOOL_ARGS);
  assert.is(outcome.usage.completion_tokens, Math.ceil(TOOL_ARGS.length / 4));

  const parts = await collect(toolProvider.chatStream(chatCall({ tools })));
  const calls = parts.filter((p): p is Extract<ChatStreamPart, { type: 'tool_call' }> => p.type === 'tool_call');
  assert.is(calls[0]!.name, 'get_weather');
  assert.match(calls[0]!.id ?? '', /^call_/);
  assert.is(calls.map((c) => c.arguments ?? '').join(''), TOOL_ARGS);
  const finish = parts.at(-1) as Extract<ChatStreamPart, { type: 'finish' }>;
  assert.is(finish.finishReason, 'tool_calls');
  assert.is(finish.usage.completion_tokens, Math.ceil(TOOL_ARGS.length / 4));
});

// ---- native chat.completions ---------------------------------------------------------------

const richChatBody = () => ({
  model: PUBLIC,
  messages: [
    { role: 'developer', content: 'Answer in JSON.' },
    { role: 'user', content: PROMPT },
  ],
  max_tokens: 5_000,
  tools,
  tool_choice: 'none',
  parallel_tool_calls: false,
  response_format: { type: 'json_object' },
  reasoning_effort: 'minimal',
  temperature: 0.2,
  top_p: 0.9,
  seed: 42,
  logprobs: true,
  top_logprobs: 2,
  metadata: { ticket: 'T-1' },
  prediction: { type: 'content', content: 'Once upon' },
  user: 'caller-7',
  store: false,
});

test('native chat: the body is forwarded intact but for model and the cap; the reply shows the public model', async () => {
  const body = richChatBody();
  const before = structuredClone(body);
  const reply = await provider.native!.call(nativeCall('chat.completions', body));
  assert.equal(body, before, 'the caller body was mutated');

  const sent = lastRequest().body;
  assert.equal(sent, { ...before, model: UPSTREAM, max_tokens: 300 });
  assert.is('max_completion_tokens' in sent, false);

  const reasoning = OPENAI_REASONING_TOKENS.minimal!;
  const prompt = openaiPromptTokens(sent);
  assert.is(reply.body.model, PUBLIC);
  assert.is(reply.body.object, 'chat.completion');
  // The body asks for a JSON object: the double wraps its reply, one token per 4 characters.
  const json = JSON.stringify({ answer: REPLY });
  const output = jsonPieces(json).length;
  assert.is((reply.body.choices as any[])[0].message.content, json);
  assert.equal(reply.body.usage, {
    prompt_tokens: prompt,
    completion_tokens: reasoning + output,
    total_tokens: prompt + reasoning + output,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  });
  assert.equal(reply.usage, { prompt_tokens: prompt, completion_tokens: reasoning + output, cached_tokens: 0, reasoning_tokens: reasoning });
  assert.is(reply.upstreamId, reply.body.id);
  assert.match(reply.upstreamId ?? '', /^chatcmpl-/);
});

test('native chat: the cap goes in the field the caller used, never both', async () => {
  const msgs = [{ role: 'user', content: 'Hi there' }];
  const cases: [Record<string, unknown>, Record<string, unknown>][] = [
    [{ max_completion_tokens: 9_000 }, { max_completion_tokens: 300 }],
    [{ max_tokens: 9_000 }, { max_tokens: 300 }],
    [{ max_tokens: 9_000, max_completion_tokens: 8_000 }, { max_completion_tokens: 300 }],
    [{}, { max_completion_tokens: 300 }],
    [{ max_tokens: null }, { max_completion_tokens: 300 }],
    [{ stream: false, stream_options: { include_usage: true } }, { max_completion_tokens: 300 }],
  ];
  for (const [caps, expected] of cases) {
    await provider.native!.call(nativeCall('chat.completions', { model: PUBLIC, messages: msgs, ...caps }));
    assert.equal(lastRequest().body, { model: UPSTREAM, messages: msgs, ...expected }, JSON.stringify(caps));
  }
});

test('native chat stream: usage forced on, the usage chunk hidden when the caller did not ask, its charge on the final chunk; [DONE] last', async () => {
  const body = { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }], stream: true, max_completion_tokens: 50 };
  const before = structuredClone(body);
  const events = await collect(provider.native!.stream(nativeCall('chat.completions', body)));
  assert.equal(body, before);
  const sent = lastRequest().body;
  assert.equal(sent, { ...before, model: UPSTREAM, max_completion_tokens: 300, stream_options: { include_usage: true } });

  assert.equal(events.at(-1), { data: '[DONE]' });
  // The upstream's usage-only chunk: metered, not forwarded.
  const hidden = events.filter((e) => e.hidden);
  assert.is(hidden.length, 1);
  assert.is(events.indexOf(hidden[0]!), events.length - 2);
  assert.equal(parsed(hidden[0]!).choices, []);
  // Its usage is charged on the chunk with the finish_reason, held back until the usage came: the
  // caller's last chunk leaves once charged (and says what it cost, see billed-usage.ts).
  const usageEvents = events.filter((e) => e.usage);
  assert.is(usageEvents.length, 1);
  const usageEvent = usageEvents[0]!;
  assert.is(events.indexOf(usageEvent), events.length - 3);
  assert.not.ok(usageEvent.hidden);
  assert.is(parsed(usageEvent).choices[0].finish_reason, 'stop');
  const prompt = openaiPromptTokens(sent);
  assert.equal(usageEvent.usage, { prompt_tokens: prompt, completion_tokens: words(REPLY), cached_tokens: 0, reasoning_tokens: 0 });
  assert.match(usageEvent.upstreamId ?? '', /^chatcmpl-/);

  const visible = events.slice(0, -2);
  assert.ok(visible.length >= words(REPLY) + 2);
  for (const event of visible) {
    assert.is(event.event, undefined);
    assert.not.ok(event.hidden);
    const chunk = parsed(event);
    assert.is(chunk.model, PUBLIC);
    assert.is(chunk.object, 'chat.completion.chunk');
    assert.is(chunk.id, usageEvent.upstreamId);
    assert.is('usage' in chunk, false, 'a caller who did not ask for usage sees no usage field');
  }
  assert.is(generatedOf(events), REPLY);
  assert.is(visible.at(-1), usageEvent);
});

test('native chat stream: with include_usage the usage chunk is forwarded', async () => {
  const body = { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }], stream: true, stream_options: { include_usage: true }, max_tokens: 40 };
  const events = await collect(provider.native!.stream(nativeCall('chat.completions', body, { maxTokens: 5 })));
  const sent = lastRequest().body;
  assert.is(sent.max_tokens, 5);
  assert.is('max_completion_tokens' in sent, false);
  assert.equal(sent.stream_options, { include_usage: true });

  assert.equal(events.at(-1), { data: '[DONE]' });
  assert.is(
    events.some((e) => e.hidden),
    false,
  );
  const usageEvent = events.at(-2)!;
  assert.equal(usageEvent.usage, { prompt_tokens: openaiPromptTokens(sent), completion_tokens: 5, cached_tokens: 0, reasoning_tokens: 0 });
  const chunk = parsed(usageEvent);
  assert.is(chunk.model, PUBLIC);
  assert.is(chunk.usage.completion_tokens, 5);
  assert.is(parsed(events[0]!).usage, null);
  // Capped at 5 tokens: five words streamed, then finish_reason length.
  assert.is(generatedOf(events), wordPieces(REPLY).slice(0, 5).join(''));
  assert.is(parsed(events.at(-3)!).choices[0].finish_reason, 'length');
});

test('native chat stream: tool-call arguments count as generated', async () => {
  const body = { model: PUBLIC, messages: [{ role: 'user', content: 'Weather?' }], tools, stream: true };
  const events = await collect(toolProvider.native!.stream(nativeCall('chat.completions', body)));
  assert.is(generatedOf(events), TOOL_ARGS);
  const call = parsed(events[1]!).choices[0].delta.tool_calls[0];
  assert.is(call.function.name, 'get_weather');
  assert.equal(lastRequest(toolDouble).body.tools, tools);
  const charged = events.find((e) => e.usage)!;
  assert.is(parsed(charged).choices[0].finish_reason, 'tool_calls');
  assert.is(charged.usage!.completion_tokens, Math.ceil(TOOL_ARGS.length / 4));
});

// ---- native Responses ----------------------------------------------------------------------

const responsesBody = () => ({
  model: PUBLIC,
  instructions: 'You are a storyteller.',
  input: [
    { role: 'user', content: [{ type: 'input_text', text: PROMPT }] },
    { type: 'reasoning', id: 'rs_previous', summary: [], encrypted_content: 'ZW5jcnlwdGVkIHByZXZpb3Vz' },
  ],
  reasoning: { effort: 'low', summary: 'auto' },
  include: ['reasoning.encrypted_content'],
  store: false,
  text: { format: { type: 'text' }, verbosity: 'low' },
  prompt_cache_key: 'story-cache',
  parallel_tool_calls: false,
  metadata: { ticket: 'T-2' },
  max_output_tokens: 10_000,
  temperature: 0.7,
});

test('native responses: body kept but for model and max_output_tokens; usage, reasoning item and id', async () => {
  const body = responsesBody();
  const before = structuredClone(body);
  const reply = await provider.native!.call(nativeCall('responses', body));
  assert.equal(body, before);
  const request = lastRequest();
  assert.is(request.path, '/v1/responses');
  assert.equal(request.body, { ...before, model: UPSTREAM, max_output_tokens: 300 });

  const reasoning = OPENAI_REASONING_TOKENS.low!;
  const input = openaiPromptTokens(request.body);
  assert.is(reply.body.model, PUBLIC);
  assert.is(reply.body.status, 'completed');
  const output = reply.body.output as any[];
  assert.is(output[0].type, 'reasoning');
  assert.type(output[0].encrypted_content, 'string');
  assert.is(output[1].content[0].text, REPLY);
  assert.equal(reply.usage, { prompt_tokens: input, completion_tokens: reasoning + words(REPLY), cached_tokens: 0, reasoning_tokens: reasoning });
  assert.is(reply.upstreamId, reply.body.id);
  assert.match(reply.upstreamId ?? '', /^resp_/);

  const again = await provider.native!.call(nativeCall('responses', body));
  assert.is(again.usage.cached_tokens, input);
  assert.is(again.usage.prompt_tokens, input);
});

test('native responses stream: every event in order, public model on response events, usage on completed', async () => {
  const body = { ...responsesBody(), stream: true };
  const events = await collect(provider.native!.stream(nativeCall('responses', body)));
  const sent = lastRequest().body;
  assert.is(sent.stream, true);
  assert.is(sent.max_output_tokens, 300);
  assert.equal(sent.include, ['reasoning.encrypted_content']);

  const n = words(REPLY);
  assert.equal(
    events.map((e) => e.event),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      ...Array<string>(n).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ],
  );
  events.forEach((event, i) => {
    const data = parsed(event);
    assert.is(data.type, event.event);
    assert.is(data.sequence_number, i);
    if (data.response) assert.is(data.response.model, PUBLIC);
  });
  assert.is(generatedOf(events), REPLY);
  assert.is(events.filter((e) => e.usage).length, 1);
  const completed = events.at(-1)!;
  const reasoning = OPENAI_REASONING_TOKENS.low!;
  assert.equal(completed.usage, { prompt_tokens: openaiPromptTokens(sent), completion_tokens: reasoning + n, cached_tokens: 0, reasoning_tokens: reasoning });
  const final = parsed(completed).response;
  assert.is(completed.upstreamId, final.id);
  assert.is(parsed(events[0]!).response.id, final.id);
  assert.is(final.output[0].type, 'reasoning');
  assert.type(final.output[0].encrypted_content, 'string');
  // The output item events are forwarded unchanged.
  assert.is(parsed(events[2]!).item.type, 'reasoning');
});

test('native responses stream: response.incomplete carries the usage when the cap cuts the reply', async () => {
  const body = { model: PUBLIC, input: PROMPT, reasoning: { effort: 'low' }, stream: true };
  const events = await collect(provider.native!.stream(nativeCall('responses', body, { maxTokens: 16 })));
  const last = events.at(-1)!;
  assert.is(last.event, 'response.incomplete');
  assert.is(parsed(last).response.incomplete_details.reason, 'max_output_tokens');
  assert.is(parsed(last).response.model, PUBLIC);
  assert.equal(last.usage, { prompt_tokens: openaiPromptTokens(lastRequest().body), completion_tokens: 16, cached_tokens: 0, reasoning_tokens: 8 });
  assert.is(generatedOf(events), wordPieces(REPLY).slice(0, 8).join(''));
});

test('native responses stream: function-call arguments count as generated', async () => {
  const body = { model: PUBLIC, input: 'Weather?', tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }], stream: true };
  const events = await collect(toolProvider.native!.stream(nativeCall('responses', body)));
  assert.ok(events.some((e) => e.event === 'response.function_call_arguments.delta'));
  assert.is(generatedOf(events), TOOL_ARGS);
  assert.is(events.at(-1)!.event, 'response.completed');
});

test('native: a dialect OpenAI does not speak is a config error', async () => {
  assert.equal([...provider.native!.dialects].sort(), ['chat.completions', 'responses']);
  const error = await rejection(provider.native!.call(nativeCall('messages', { model: PUBLIC, messages: [] })));
  assertUpstream(error, 'config');
});

// ---- images -------------------------------------------------------------------------------

test('image: generations for gpt-image models without response_format; a JPEG of the size', async () => {
  assert.is(provider.images, true);
  const outcome = await provider.image({ upstreamModel: 'gpt-image-1', prompt: 'a blue square', size: '1024x1536', signal: new AbortController().signal });
  const request = lastRequest();
  assert.is(request.path, '/v1/images/generations');
  assert.equal(request.body, { model: 'gpt-image-1', prompt: 'a blue square', size: '1024x1536', n: 1 });
  const meta = await sharp(outcome.jpeg).metadata();
  assert.equal([meta.format, meta.width, meta.height], ['jpeg', 1024, 1536]);

  await provider.image({ upstreamModel: 'dall-e-3', prompt: 'a blue square', size: '1024x1024', signal: new AbortController().signal });
  assert.is(lastRequest().body.response_format, 'b64_json');
});

test('image: edits go as multipart with the source file', async () => {
  const source = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 200, g: 10, b: 10 } } })
    .png()
    .toBuffer();
  const outcome = await provider.image({
    upstreamModel: 'gpt-image-1',
    prompt: 'make it blue',
    size: '1024x1024',
    source: { bytes: source, mime: 'image/png' },
    signal: new AbortController().signal,
  });
  const request = lastRequest();
  assert.is(request.path, '/v1/images/edits');
  assert.match(String(request.headers['content-type']), /^multipart\/form-data; boundary=/);
  assert.is(request.body.model, 'gpt-image-1');
  assert.is(request.body.prompt, 'make it blue');
  assert.is(request.body.size, '1024x1024');
  assert.is(request.body.response_format, undefined);
  const file = request.body.image as RecordedFile;
  assert.is(file.type, 'image/png');
  assert.is(file.filename, 'image.png');
  assert.ok(file.bytes.equals(source));
  const meta = await sharp(outcome.jpeg).metadata();
  assert.equal([meta.format, meta.width, meta.height], ['jpeg', 1024, 1024]);
});

test('image: a source that is no image is the caller’s error, before any upstream call', async () => {
  const calls = double.calls;
  const error = await rejection(
    provider.image({
      upstreamModel: 'gpt-image-1',
      prompt: 'x',
      size: '1024x1024',
      source: { bytes: Buffer.from('not an image'), mime: 'image/png' },
      signal: new AbortController().signal,
    }),
  );
  assert.instance(error, InvalidImageError);
  assert.is(double.calls, calls);
});

// ---- errors -------------------------------------------------------------------------------

test('errors: 400 is a request error with the upstream detail, the prompt withheld', async () => {
  const real = await rejection(provider.native!.call(nativeCall('responses', { model: PUBLIC, input: PROMPT }, { maxTokens: 8 })));
  const upstream = assertUpstream(real, 'request', 400);
  assert.match(upstream.message, /max_output_tokens/);

  double.script({ status: 400, body: { error: { message: `Your prompt "${PROMPT}" was flagged`, type: 'invalid_request_error', code: 'invalid_prompt' } } });
  const echoed = await rejection(provider.chat(chatCall()));
  assertUpstream(echoed, 'request', 400);
  assert.match(echoed.message, /HTTP 400/);
});

test('errors: 401 is a config error that names no key', async () => {
  const wrongKey = 'sk-proj-WRONG-key-which-must-not-leak-42';
  const wrong = createOpenAIProvider({ baseURL: `${double.url}/v1`, apiKey: wrongKey, timeoutMs: 5_000 });
  const error = await rejection(wrong.chat(chatCall()));
  assert.instance(error, UpstreamError);
  assert.is((error as UpstreamError).kind, 'config');
  assert.is((error as UpstreamError).status, 401);
  assert.match(error.message, /invalid_api_key/);
  assert.not.ok(error.message.includes(wrongKey));
  assert.not.ok(error.message.includes(KEY));

  const native = await rejection(wrong.native!.call(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }] })));
  assert.is((native as UpstreamError).kind, 'config');
  assert.not.ok(native.message.includes(wrongKey));
});

test('errors: 429 and 5xx are retriable, for every call shape', async () => {
  double.script({ status: 429 }, { status: 500 }, { status: 503 }, { status: 502 }, { status: 500 });
  assertUpstream(await rejection(provider.chat(chatCall())), 'retriable', 429);
  assertUpstream((await collectUntilError(provider.chatStream(chatCall()))).error, 'retriable', 500);
  assertUpstream((await collectUntilError(provider.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT })))).error, 'retriable', 503);
  assertUpstream(
    await rejection(provider.native!.call(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }] }))),
    'retriable',
    502,
  );
  assertUpstream(
    await rejection(provider.image({ upstreamModel: 'gpt-image-1', prompt: PROMPT, size: '1024x1024', signal: new AbortController().signal })),
    'retriable',
    500,
  );
});

test('errors: an error chunk or response.failed mid-stream is a retriable UpstreamError', async () => {
  double.script({ errorEventAfter: 3 }, { errorEventAfter: 3 }, { errorEventAfter: 4 });
  const canonical = await collectUntilError(provider.chatStream(chatCall()));
  assertUpstream(canonical.error, 'retriable');
  assert.match(canonical.error.message, /server_error/);
  assert.is(textOf(canonical.items), wordPieces(REPLY).slice(0, 2).join(''));

  const chat = await collectUntilError(
    provider.native!.stream(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }], stream: true })),
  );
  assertUpstream(chat.error, 'retriable');
  assert.is(chat.items.length, 3);
  assert.not.ok(chat.items.some((e) => e.usage));

  const responses = await collectUntilError(provider.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT, stream: true })));
  assertUpstream(responses.error, 'retriable');
  assert.match(responses.error.message, /server_error/);
  assert.equal(
    responses.items.map((e) => e.event),
    ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'],
  );
});

test('errors: a cut stream is retriable and never yields usage', async () => {
  double.script({ cutAfterEvents: 4 }, { cutAfterEvents: 4 }, { cutAfterEvents: 5 }, { cutAfterEvents: 1 });
  const canonical = await collectUntilError(provider.chatStream(chatCall()));
  assertUpstream(canonical.error, 'retriable');
  assert.not.ok(canonical.items.some((p) => p.type === 'finish'));

  const chat = await collectUntilError(
    provider.native!.stream(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }] })),
  );
  assertUpstream(chat.error, 'retriable');
  assert.is(chat.items.length, 4);

  const responses = await collectUntilError(provider.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT })));
  assertUpstream(responses.error, 'retriable');
  assert.is(responses.items.length, 5);
  assert.not.ok(responses.items.some((e) => e.usage));

  // A plain reply cut half-way.
  assertUpstream(await rejection(provider.native!.call(nativeCall('responses', { model: PUBLIC, input: PROMPT }))), 'retriable');
});

test('errors: garbage bodies are retriable', async () => {
  double.script({ garbage: true }, { garbage: true }, { garbage: true }, { garbage: true });
  assertUpstream(await rejection(provider.chat(chatCall())), 'retriable');
  assertUpstream((await collectUntilError(provider.chatStream(chatCall()))).error, 'retriable');
  assertUpstream(await rejection(provider.native!.call(nativeCall('responses', { model: PUBLIC, input: PROMPT }))), 'retriable');
  const stream = await collectUntilError(
    provider.native!.stream(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: PROMPT }] })),
  );
  assertUpstream(stream.error, 'retriable');
  assert.match(stream.error.message, /malformed/);
});

test('errors: a 2xx reply without usage is refused (no billing on a guess)', async () => {
  const noUsage = {
    id: 'chatcmpl-x',
    object: 'chat.completion',
    model: UPSTREAM,
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
  };
  double.script(
    { status: 200, body: noUsage },
    { status: 200, body: noUsage },
    { status: 200, body: { id: 'resp_x', object: 'response', status: 'completed', output: [] } },
  );
  assert.match(assertUpstream(await rejection(provider.chat(chatCall())), 'retriable').message, /no usage/);
  assertUpstream(
    await rejection(provider.native!.call(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: 'x' }] }))),
    'retriable',
  );
  assertUpstream(await rejection(provider.native!.call(nativeCall('responses', { model: PUBLIC, input: 'x' }))), 'retriable');
});

test('errors: a slow first byte times out fast and is retriable', async () => {
  // The upstream never answers: only the first-byte timeout ends the call, far below the 60 s timeout.
  const impatient = createOpenAIProvider({ baseURL: `${double.url}/v1`, apiKey: KEY, timeoutMs: 60_000, firstByteTimeoutMs: 200 });
  double.script({ hang: true }, { hang: true });
  let started = Date.now();
  const error = await rejection(impatient.chat(chatCall()));
  assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  assert.match(assertUpstream(error, 'retriable').message, /timed out/);

  started = Date.now();
  const stream = await collectUntilError(impatient.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT })));
  assert.ok(Date.now() - started < 10_000);
  assertUpstream(stream.error, 'retriable');
});

test('errors: a caller abort stays an AbortError, before the reply and mid-stream', async () => {
  double.script({ hang: true });
  const before = new AbortController();
  setTimeout(() => before.abort(), 100);
  const error = await rejection(
    provider.native!.call(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: 'x' }] }, { signal: before.signal })),
  );
  assert.is(error.name, 'AbortError');
  assert.not.instance(error, UpstreamError);

  double.script({ chunkDelayMs: 50 });
  const abandoned = double.abandoned;
  const mid = new AbortController();
  const seen: NativeStreamEvent[] = [];
  let midError: Error | undefined;
  try {
    for await (const event of provider.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT }, { signal: mid.signal }))) {
      seen.push(event);
      if (seen.length === 3) mid.abort();
    }
  } catch (e) {
    midError = e as Error;
  }
  assert.is(midError?.name, 'AbortError');
  assert.ok(seen.length >= 3 && seen.length < 6, `saw ${seen.length} events`);
  const deadline = Date.now() + 2_000;
  while (double.abandoned === abandoned && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.is(double.abandoned, abandoned + 1, 'the upstream request was not cancelled');
});

// ---- Responses error events (a scripted SSE server: the double sends only response.failed) ---

function sseServer(events: string[]): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(events.join(''));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const named = (type: string, payload: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;

test('native chat stream without include_usage: the charge rides on the last chunk with a finish_reason (two choices; usage on the finish chunk itself)', async () => {
  const frame = (chunk: Record<string, unknown>) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-raw', object: 'chat.completion.chunk', created: 1, model: UPSTREAM, ...chunk })}\n\n`;
  const choice = (index: number, delta: Record<string, unknown>, finish: string | null = null) => ({ index, delta, logprobs: null, finish_reason: finish });
  const usage = { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 };
  const scenarios: [string, string[], { charged: number; hidden: number[] }][] = [
    [
      'two choices, then a usage-only chunk',
      [
        frame({ choices: [choice(0, { role: 'assistant', content: 'A' })], usage: null }),
        frame({ choices: [choice(1, { role: 'assistant', content: 'B' })], usage: null }),
        frame({ choices: [choice(0, {}, 'stop')], usage: null }),
        frame({ choices: [choice(1, {}, 'length')], usage: null }),
        frame({ choices: [], usage }),
        'data: [DONE]\n\n',
      ],
      { charged: 3, hidden: [4] },
    ],
    [
      'the usage on the finish chunk itself',
      [frame({ choices: [choice(0, { role: 'assistant', content: 'A B' })] }), frame({ choices: [choice(0, {}, 'stop')], usage }), 'data: [DONE]\n\n'],
      { charged: 1, hidden: [] },
    ],
  ];
  for (const [name, chunks, expected] of scenarios) {
    const server = await sseServer(chunks);
    try {
      const local = createOpenAIProvider({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: KEY, timeoutMs: 5_000 });
      const events = await collect(
        local.native!.stream(nativeCall('chat.completions', { model: PUBLIC, messages: [{ role: 'user', content: 'hi' }], stream: true })),
      );
      assert.is(events.length, chunks.length, name);
      assert.equal(events.at(-1), { data: '[DONE]' }, name);
      assert.equal(
        events.flatMap((e, i) => (e.usage ? [i] : [])),
        [expected.charged],
        name,
      );
      assert.equal(
        events.flatMap((e, i) => (e.hidden ? [i] : [])),
        expected.hidden,
        name,
      );
      const carrier = events[expected.charged]!;
      assert.equal(carrier.usage, { prompt_tokens: 7, completion_tokens: 2 }, name);
      assert.is(carrier.upstreamId, 'chatcmpl-raw', name);
      assert.is('usage' in parsed(carrier), false, name);
      // Every event is forwarded in the upstream's order; the gateway then adds the cost to the carrier.
      const billed = JSON.parse(eventWithBilledTokens(carrier.data, 42)) as Record<string, any>;
      assert.equal(billed, { ...parsed(carrier), billed_tokens: 42 }, name);
      assert.is(billed.choices.at(-1).finish_reason === null, false, name);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
});

test('responses error events: invalid requests are request errors, the rest retriable; no terminal event is an error', async () => {
  const created = named('response.created', { sequence_number: 0, response: { id: 'resp_1', model: UPSTREAM, status: 'in_progress' } });
  const scenarios: [string[], UpstreamError['kind'], RegExp][] = [
    [[created, named('error', { sequence_number: 1, code: 'invalid_prompt', message: `Rejected: ${PROMPT}`, param: null })], 'request', /invalid_prompt/],
    [
      [created, named('error', { sequence_number: 1, code: 'server_error', message: 'Something went wrong', param: null })],
      'retriable',
      /Something went wrong/,
    ],
    [
      [
        created,
        named('response.failed', {
          sequence_number: 1,
          response: { id: 'resp_1', status: 'failed', error: { code: 'image_parse_error', message: 'bad image' } },
        }),
      ],
      'request',
      /image_parse_error/,
    ],
    [[created], 'retriable', /ended before it finished/],
  ];
  for (const [events, kind, message] of scenarios) {
    const server = await sseServer(events);
    try {
      const local = createOpenAIProvider({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: KEY, timeoutMs: 5_000 });
      const result = await collectUntilError(local.native!.stream(nativeCall('responses', { model: PUBLIC, input: PROMPT })));
      assert.match(assertUpstream(result.error, kind).message, message);
      assert.is(result.items.length, 1);
      assert.is(parsed(result.items[0]!).response.model, PUBLIC);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
  assert.is(errorKindOf({ type: 'invalid_request_error', code: 'context_length_exceeded' }), 'request');
  assert.is(errorKindOf({ code: 'rate_limit_exceeded' }), 'retriable');
  assert.is(errorKindOf({ code: 'vector_store_timeout' }), 'retriable');
  assert.is(errorKindOf(null), 'retriable');
});

test.run();
