// The native Anthropic adapter against the Anthropic double (and, for wire details the double
// cannot script, a few hand-written upstreams): translation for chat callers, pass-through for
// Messages callers, usage with prompt caching, and how every failure is classified.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAnthropicProvider, type AnthropicOptions } from '../src/upstream/anthropic/index.ts';
import { nativeRequestBody } from '../src/upstream/anthropic/native.ts';
import { thinkingFor, toolChoiceOf } from '../src/upstream/anthropic/translate.ts';
import { readSse } from '../src/upstream/sse.ts';
import {
  UpstreamError,
  type ChatCall,
  type ChatMessage,
  type ChatStreamPart,
  type NativeCall,
  type NativeStreamEvent,
  type ToolDefinition,
} from '../src/upstream/port.ts';
import {
  ANTHROPIC_DEFAULT_THINKING,
  anthropicCachePrefixes,
  anthropicPromptTokens,
  startAnthropicDouble,
  type AnthropicDouble,
} from './support/anthropic-double.ts';
import { wordPieces, rejection } from './support/double-http.ts';

type Json = Record<string, unknown>;

const KEY = 'sk-ant-api03-SECRET-0123456789abcdef';
const UPSTREAM_MODEL = 'claude-upstream-9';
const PUBLIC_MODEL = 'claude-public';
const PROMPT = 'Tell me a secret story about the purple elephant named Bartholomew';
const REPLY = 'Once upon a time there was a purple elephant who loved tea.';
const LONG_SYSTEM = 'You are a careful assistant who answers questions about elephants and their tea habits.';
const TOOL_INPUT = { city: 'Paris', days: 3 };
const words = (text: string) => wordPieces(text).length;

const weatherTool: ToolDefinition = {
  type: 'function',
  function: { name: 'weather', description: 'Forecast', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};
const timeTool: ToolDefinition = { type: 'function', function: { name: 'time' } };

let claude: AnthropicDouble;
let tooling: AnthropicDouble;
test.before(async () => {
  claude = await startAnthropicDouble({ apiKey: KEY, reply: REPLY });
  tooling = await startAnthropicDouble({ apiKey: KEY, toolUse: { input: TOOL_INPUT } });
});
test.after(async () => {
  await claude.close();
  await tooling.close();
});

const provider = (double: AnthropicDouble = claude, extra: Partial<AnthropicOptions> = {}) =>
  createAnthropicProvider({ baseURL: double.url, apiKey: KEY, timeoutMs: 5_000, ...extra });

function chatCall(extra: Partial<ChatCall> = {}): ChatCall {
  return {
    upstreamModel: UPSTREAM_MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    maxTokens: 256,
    params: {},
    signal: new AbortController().signal,
    ...extra,
  };
}

function nativeCall(body: Json, extra: Partial<NativeCall> = {}): NativeCall {
  return {
    dialect: 'messages',
    upstreamModel: UPSTREAM_MODEL,
    publicModel: PUBLIC_MODEL,
    body,
    maxTokens: 1024,
    signal: new AbortController().signal,
    ...extra,
  };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** The items received before the iteration failed, and the failure. */
async function collectUntilError<T>(items: AsyncIterable<T>): Promise<{ items: T[]; error: Error }> {
  const out: T[] = [];
  try {
    for await (const item of items) out.push(item);
  } catch (error) {
    return { items: out, error: error as Error };
  }
  throw new Error('expected the iteration to fail');
}

async function until(condition: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function assertUpstreamError(error: Error, kind: UpstreamError['kind'], status?: number): asserts error is UpstreamError {
  assert.instance(error, UpstreamError, `expected an UpstreamError, got ${error.name}: ${error.message}`);
  assert.is((error as UpstreamError).kind, kind, error.message);
  assert.is((error as UpstreamError).status, status, error.message);
  assert.not.match(error.message, KEY);
  assert.not.match(error.message, PROMPT);
}

const lastRequest = (double: AnthropicDouble) => double.requests.at(-1)!;
const textOf = (parts: ChatStreamPart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');

/** A hand-written upstream: `respond` answers every request. */
async function rawUpstream(respond: (res: ServerResponse, body: Json, req: IncomingMessage) => void) {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    respond(res, JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Json, req);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function sseAnswer(res: ServerResponse, events: [string, Json][]) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join(''));
}

// ---- chat (translation) -----------------------------------------------------------------------

test('chat: system and developer messages become `system`; params are mapped; the reply maps back', async () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'developer', content: [{ type: 'text', text: 'Answer in English.' }] },
    { role: 'user', content: PROMPT },
  ];
  const outcome = await provider().chat(
    chatCall({
      messages,
      params: { temperature: 0.2, top_p: 0.9, stop: ['###', '\n\n', ''], seed: 7, presence_penalty: 0.5, user: 'user-42', model: 'evil', max_tokens: 99_999 },
    }),
  );
  const request = lastRequest(claude);
  assert.is(request.path, '/v1/messages');
  assert.is(request.headers['x-api-key'], KEY);
  assert.is(request.headers['anthropic-version'], '2023-06-01');
  assert.is(request.headers['content-type'], 'application/json');
  assert.is(request.headers.authorization, undefined);
  assert.equal(request.body, {
    model: UPSTREAM_MODEL,
    max_tokens: 256,
    system: 'Be brief.\n\nAnswer in English.',
    messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }] }],
    temperature: 0.2,
    top_p: 0.9,
    stop_sequences: ['###'], // whitespace-only stop sequences are refused by Anthropic: dropped
    metadata: { user_id: 'user-42' },
  });
  assert.match(outcome.upstreamId ?? '', /^msg_01/);
  assert.equal(outcome, {
    content: REPLY,
    toolCalls: [],
    finishReason: 'stop',
    usage: { prompt_tokens: anthropicPromptTokens(request.body), completion_tokens: words(REPLY), cached_tokens: 0, cache_write_tokens: 0 },
    upstreamId: outcome.upstreamId,
  });
});

test('chat: the version header is configurable, a trailing /v1 on the base URL is tolerated, temperature is clamped', async () => {
  await provider(claude, { baseURL: `${claude.url}/v1/`, version: '2099-01-01' }).chat(chatCall({ params: { temperature: 1.7 } }));
  const request = lastRequest(claude);
  assert.is(request.path, '/v1/messages');
  assert.is(request.headers['anthropic-version'], '2099-01-01');
  assert.is(request.body.temperature, 1);
});

test('chat: a max_tokens stop is finishReason length', async () => {
  const outcome = await provider().chat(chatCall({ maxTokens: 3 }));
  assert.is(outcome.content, wordPieces(REPLY).slice(0, 3).join(''));
  assert.is(outcome.finishReason, 'length');
  assert.is(outcome.usage.completion_tokens, 3);
});

test('chat: tool history becomes tool_use / tool_result turns (merged, alternating); tool_use replies become toolCalls', async () => {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'What is the weather in Paris?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'toolu_A', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
        { id: 'toolu_B', type: 'function', function: { name: 'time', arguments: '' } },
      ],
    },
    { role: 'tool', tool_call_id: 'toolu_A', content: 'Sunny, 21°C' },
    { role: 'tool', tool_call_id: 'toolu_B', content: [{ type: 'text', text: '14:05' }] },
    { role: 'user', content: 'And for the next 3 days?' },
  ];
  const outcome = await provider(tooling).chat(
    chatCall({
      messages,
      maxTokens: 8192,
      reasoningEffort: 'high',
      tools: [weatherTool, timeTool],
      toolChoice: { type: 'function', function: { name: 'weather' } },
      params: { parallel_tool_calls: false },
    }),
  );
  const body = lastRequest(tooling).body;
  assert.equal(body.messages, [
    { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris?' }] },
    {
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'toolu_A', name: 'weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'toolu_B', name: 'time', input: {} },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_A', content: [{ type: 'text', text: 'Sunny, 21°C' }] },
        { type: 'tool_result', tool_use_id: 'toolu_B', content: [{ type: 'text', text: '14:05' }] },
        { type: 'text', text: 'And for the next 3 days?' },
      ],
    },
  ]);
  assert.equal(body.tools, [
    { name: 'weather', description: 'Forecast', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    { name: 'time', input_schema: { type: 'object', properties: {} } },
  ]);
  assert.equal(body.tool_choice, { type: 'tool', name: 'weather', disable_parallel_tool_use: true });
  assert.is(body.thinking, undefined, 'a forced tool choice leaves thinking off');
  assert.is(outcome.content, '');
  assert.is(outcome.finishReason, 'tool_calls');
  assert.is(outcome.toolCalls.length, 1);
  assert.match(outcome.toolCalls[0]!.id, /^toolu_01/);
  assert.equal(outcome.toolCalls[0], { id: outcome.toolCalls[0]!.id, type: 'function', function: { name: 'weather', arguments: JSON.stringify(TOOL_INPUT) } });
  assert.is(outcome.usage.prompt_tokens, anthropicPromptTokens(body));
  assert.is(outcome.usage.completion_tokens, Math.ceil(JSON.stringify(TOOL_INPUT).length / 4));
});

test('chat: a tool result after a user message still comes first in the merged user turn', async () => {
  await provider(claude).chat(
    chatCall({
      messages: [
        { role: 'user', content: 'Call it' },
        { role: 'assistant', content: 'Calling.', tool_calls: [{ id: 'toolu_X', type: 'function', function: { name: 'time', arguments: '[1,2]' } }] },
        { role: 'user', content: 'Please hurry' },
        { role: 'tool', tool_call_id: 'toolu_X', content: '' },
      ],
      tools: [timeTool],
    }),
  );
  assert.equal(lastRequest(claude).body.messages, [
    { role: 'user', content: [{ type: 'text', text: 'Call it' }] },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Calling.' },
        { type: 'tool_use', id: 'toolu_X', name: 'time', input: { value: [1, 2] } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_X' },
        { type: 'text', text: 'Please hurry' },
      ],
    },
  ]);
  assert.is(lastRequest(claude).body.tool_choice, undefined);
});

test('tool_choice mapping', () => {
  assert.equal(toolChoiceOf('auto', false), { type: 'auto' });
  assert.equal(toolChoiceOf('required', false), { type: 'any' });
  assert.equal(toolChoiceOf('none', false), { type: 'none' });
  assert.equal(toolChoiceOf({ type: 'function', function: { name: 'f' } }, false), { type: 'tool', name: 'f' });
  assert.equal(toolChoiceOf(undefined, true), { type: 'auto', disable_parallel_tool_use: true });
  assert.equal(toolChoiceOf('required', true), { type: 'any', disable_parallel_tool_use: true });
  assert.equal(toolChoiceOf('none', true), { type: 'none' });
  assert.is(toolChoiceOf(undefined, false), undefined);
  assert.is(toolChoiceOf('bogus', false), undefined);
});

test('chat: images become base64 or url sources', async () => {
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').toString('base64');
  await provider().chat(
    chatCall({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Describe these' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
            { type: 'image_url', image_url: { url: `data:image/jpg;base64,${png}` } },
            { type: 'image_url', image_url: { url: 'data:image/png,%89PNG' } },
          ],
        },
      ],
    }),
  );
  assert.equal(lastRequest(claude).body.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Describe these' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
        { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: png } },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64') } },
      ],
    },
  ]);
});

test('chat: an image URL Anthropic cannot take is a request error that does not echo the URL', async () => {
  const calls = claude.calls;
  const url = 'ftp://files.example.com/private-token-abcdef/cat.png';
  const error = await rejection(
    provider().chat(
      chatCall({
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
      }),
    ),
  );
  assertUpstreamError(error, 'request');
  assert.not.match(error.message, 'private-token');
  assert.is(claude.calls, calls, 'nothing was sent');
});

test('chat: reasoningEffort turns on a thinking budget only when it fits; thinking is not shown as text', async () => {
  const outcome = await provider().chat(chatCall({ maxTokens: 4096, reasoningEffort: 'low', params: { temperature: 0.5, top_p: 0.5 } }));
  const body = lastRequest(claude).body;
  assert.equal(body.thinking, { type: 'enabled', budget_tokens: 1024 });
  assert.is(body.temperature, undefined, 'thinking does not take a temperature');
  assert.is(body.top_p, undefined);
  assert.is(outcome.content, REPLY);
  assert.is(outcome.usage.completion_tokens, words(ANTHROPIC_DEFAULT_THINKING) + words(REPLY));
  assert.is(outcome.usage.reasoning_tokens, undefined);

  await provider().chat(chatCall({ maxTokens: 2000, reasoningEffort: 'high', params: { temperature: 0.5 } }));
  assert.is(lastRequest(claude).body.thinking, undefined, 'half of 2000 is under the 1024 minimum');
  assert.is(lastRequest(claude).body.temperature, 0.5);

  assert.equal(thinkingFor('high', 4096), { type: 'enabled', budget_tokens: 2048 });
  assert.equal(thinkingFor('high', 100_000), { type: 'enabled', budget_tokens: 16_384 });
  assert.equal(thinkingFor('max', 200_000), { type: 'enabled', budget_tokens: 65_536 });
  assert.is(thinkingFor('minimal', 100_000), undefined);
  assert.is(thinkingFor(undefined, 100_000), undefined);
});

// ---- chatStream ---------------------------------------------------------------------------------

test('chatStream: text parts, then one finish with the final usage and the message id', async () => {
  const parts = await collect(provider().chatStream(chatCall({ maxTokens: 4096, reasoningEffort: 'low' })));
  const body = lastRequest(claude).body;
  assert.is(body.stream, true);
  assert.equal(
    parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text),
    wordPieces(REPLY),
  );
  assert.is(textOf(parts), REPLY, 'thinking is not streamed as text');
  const finish = parts.at(-1)!;
  assert.is(parts.filter((p) => p.type === 'finish').length, 1);
  assert.ok(finish.type === 'finish');
  assert.match(finish.upstreamId ?? '', /^msg_01/);
  assert.equal(finish, {
    type: 'finish',
    finishReason: 'stop',
    usage: {
      prompt_tokens: anthropicPromptTokens(body),
      completion_tokens: words(ANTHROPIC_DEFAULT_THINKING) + words(REPLY),
      cached_tokens: 0,
      cache_write_tokens: 0,
    },
    upstreamId: finish.upstreamId,
  });
});

test('chatStream: a tool_use block streams as one tool call (id and name first, then its JSON)', async () => {
  const parts = await collect(provider(tooling).chatStream(chatCall({ tools: [weatherTool], toolChoice: 'required' })));
  assert.equal(lastRequest(tooling).body.tool_choice, { type: 'any' });
  const tools = parts.filter((p) => p.type === 'tool_call') as Extract<ChatStreamPart, { type: 'tool_call' }>[];
  assert.match(tools[0]!.id ?? '', /^toolu_01/);
  assert.equal(tools[0], { type: 'tool_call', index: 0, id: tools[0]!.id, name: 'weather' });
  assert.ok(tools.every((p) => p.index === 0));
  assert.ok(tools.slice(1).every((p) => p.id === undefined && p.name === undefined));
  assert.is(tools.map((p) => p.arguments ?? '').join(''), JSON.stringify(TOOL_INPUT));
  const finish = parts.at(-1)!;
  assert.ok(finish.type === 'finish');
  assert.is(finish.finishReason, 'tool_calls');
  assert.is(finish.usage.completion_tokens, Math.ceil(JSON.stringify(TOOL_INPUT).length / 4));
});

// ---- native pass-through -----------------------------------------------------------------------

function cachedBody(): Json {
  return {
    model: PUBLIC_MODEL,
    max_tokens: 8000,
    system: [{ type: 'text', text: LONG_SYSTEM, cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT, cache_control: { type: 'ephemeral', ttl: '1h' } }] }],
    thinking: { type: 'enabled', budget_tokens: 2000 },
    metadata: { user_id: 'caller-7' },
    tools: [{ name: 'weather', description: 'Forecast', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }],
    tool_choice: { type: 'auto' },
    stop_sequences: ['THE END'],
    stream: true,
  };
}

test('native: the dialect is messages; images are off', async () => {
  const p = provider();
  assert.equal([...p.native!.dialects], ['messages']);
  assert.is(p.images, false);
  assert.is(p.name, 'anthropic');
  const error = await rejection(p.image({ upstreamModel: 'x', prompt: 'a cat', size: '1024x1024', signal: new AbortController().signal }));
  assertUpstreamError(error, 'config');
  assert.is(error.message, 'anthropic upstreams do not generate images');
});

test('native call: the body goes upstream intact but for model and max_tokens; cache writes then reads are reported', async () => {
  claude.clearCache();
  const body = cachedBody();
  const snapshot = structuredClone(body);
  const native = provider().native!;
  const first = await native.call(nativeCall(body, { maxTokens: 1500 }));
  assert.equal(body, snapshot, 'the caller body is not mutated');
  const sent = lastRequest(claude).body;
  const { stream: _stream, ...rest } = snapshot;
  assert.equal(sent, { ...rest, model: UPSTREAM_MODEL, max_tokens: 1500, thinking: { type: 'enabled', budget_tokens: 1499 } });

  const prompt = anthropicPromptTokens(sent);
  const prefixes = anthropicCachePrefixes(sent);
  const prefix = prefixes.at(-1)!;
  assert.ok(prefix > 0 && prefix <= prompt);
  const completion = words(ANTHROPIC_DEFAULT_THINKING) + words(REPLY);
  // The last breakpoint (the user turn) lives an hour: the tokens after the one before it are 1-hour writes.
  const hour = prefix - prefixes.at(-2)!;
  assert.ok(hour > 0);
  assert.equal(first.usage, {
    prompt_tokens: prompt,
    completion_tokens: completion,
    cached_tokens: 0,
    cache_write_tokens: prefix,
    cache_write_1h_tokens: hour,
  });
  assert.is(first.body.model, PUBLIC_MODEL);
  assert.is(first.body.id, first.upstreamId);
  assert.match(first.upstreamId ?? '', /^msg_01/);
  assert.is(first.body.stop_reason, 'end_turn');
  const content = first.body.content as Json[];
  assert.equal(
    content.map((b) => b.type),
    ['thinking', 'text'],
  );
  assert.is(content[1]!.text, REPLY);
  assert.is((first.body.usage as Json).cache_creation_input_tokens, prefix, 'the upstream usage is shown as is');

  const second = await native.call(nativeCall(body, { maxTokens: 1500 }));
  assert.equal(second.usage, { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: prefix, cache_write_tokens: 0 });
  assert.is((second.body.usage as Json).input_tokens, prompt - prefix);
});

test('native: a thinking budget that no longer fits under the cap is lowered, or dropped below 1024', () => {
  const body = cachedBody();
  assert.equal(nativeRequestBody(nativeCall(body, { maxTokens: 5000 }), false).thinking, { type: 'enabled', budget_tokens: 2000 });
  assert.equal(nativeRequestBody(nativeCall(body, { maxTokens: 2000 }), false).thinking, { type: 'enabled', budget_tokens: 1999 });
  assert.equal(nativeRequestBody(nativeCall(body, { maxTokens: 1025 }), true).thinking, { type: 'enabled', budget_tokens: 1024 });
  const dropped = nativeRequestBody(nativeCall(body, { maxTokens: 1024 }), true);
  assert.not.ok('thinking' in dropped);
  assert.is(dropped.stream, true);
  assert.is(dropped.max_tokens, 1024);
  assert.not.ok('stream' in nativeRequestBody(nativeCall(body), false));
  assert.equal(body, cachedBody(), 'never mutated');
  const adaptive = nativeRequestBody(nativeCall({ ...body, thinking: { type: 'adaptive' } }, { maxTokens: 10 }), false);
  assert.equal(adaptive.thinking, { type: 'adaptive' });
});

test('native call: a thinking budget too large for a small cap is dropped and the call succeeds', async () => {
  const reply = await provider().native!.call(nativeCall(cachedBody(), { maxTokens: 1000 }));
  assert.not.ok('thinking' in lastRequest(claude).body);
  assert.equal(
    (reply.body.content as Json[]).map((b) => b.type),
    ['text'],
  );
  assert.is(reply.usage.completion_tokens, words(REPLY));
});

async function rawStream(body: Json, double: AnthropicDouble = claude): Promise<{ name: string; data: string }[]> {
  const response = await fetch(`${double.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const out: { name: string; data: string }[] = [];
  for await (const event of readSse(response.body as unknown as AsyncIterable<Uint8Array>)) out.push({ name: event.event, data: event.data });
  return out;
}

test('native stream: every event forwarded in order and unchanged but for the model; usage on the stop message_delta', async () => {
  const body = { model: PUBLIC_MODEL, max_tokens: 9000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: PROMPT }] };
  const events = await collect(provider().native!.stream(nativeCall(body, { maxTokens: 2048 })));
  const sent = lastRequest(claude).body;
  assert.equal(sent, { ...body, model: UPSTREAM_MODEL, max_tokens: 2048, stream: true });

  const raw = await rawStream(sent);
  assert.equal(
    events.map((e) => e.event),
    raw.map((e) => e.name),
  );
  assert.equal(events.map((e) => e.event).slice(0, 3), ['message_start', 'content_block_start', 'ping']);
  assert.equal(events.map((e) => e.event).slice(-2), ['message_delta', 'message_stop']);
  assert.equal(
    events.slice(1).map((e) => e.data),
    raw.slice(1).map((e) => e.data),
    'all but message_start are byte-identical',
  );
  const start = JSON.parse(events[0]!.data) as { message: Json };
  const rawStart = JSON.parse(raw[0]!.data) as { message: Json };
  assert.is(rawStart.message.model, UPSTREAM_MODEL);
  assert.equal(start, { ...rawStart, message: { ...rawStart.message, id: start.message.id, model: PUBLIC_MODEL } });
  assert.not.ok(events.some((e) => e.data.includes(UPSTREAM_MODEL)));

  const charged = events.filter((e) => e.usage);
  assert.is(charged.length, 1);
  assert.is(charged[0], events.at(-2), 'the usage rides on the message_delta');
  assert.is(JSON.parse(charged[0]!.data).delta.stop_reason, 'end_turn');
  assert.equal(charged[0]!.usage, {
    prompt_tokens: anthropicPromptTokens(sent),
    // message_start said output_tokens 1; the delta's cumulative count replaces it.
    completion_tokens: words(ANTHROPIC_DEFAULT_THINKING) + words(REPLY),
    cached_tokens: 0,
    cache_write_tokens: 0,
  });
  assert.is(charged[0]!.upstreamId, start.message.id);
  assert.is(events.map((e) => e.generated ?? '').join(''), ANTHROPIC_DEFAULT_THINKING + REPLY);
  assert.ok(events.every((e) => !e.hidden));
});

test('native stream: cached prompts are reported from message_start', async () => {
  claude.clearCache();
  const native = provider().native!;
  await collect(native.stream(nativeCall(cachedBody(), { maxTokens: 4000 })));
  const sent = lastRequest(claude).body;
  const prefix = anthropicCachePrefixes(sent).at(-1)!;
  const events = await collect(native.stream(nativeCall(cachedBody(), { maxTokens: 4000 })));
  const usage = events.find((e) => e.usage)!.usage!;
  assert.equal(usage, {
    prompt_tokens: anthropicPromptTokens(sent),
    completion_tokens: words(ANTHROPIC_DEFAULT_THINKING) + words(REPLY),
    cached_tokens: prefix,
    cache_write_tokens: 0,
  });
});

const CUMULATIVE_EVENTS: [string, Json][] = [
  [
    'message_start',
    {
      type: 'message_start',
      message: {
        id: 'msg_raw_1',
        type: 'message',
        role: 'assistant',
        model: UPSTREAM_MODEL,
        content: [],
        usage: { input_tokens: 10, cache_creation_input_tokens: 20, cache_read_input_tokens: 100, output_tokens: 1 },
      },
    },
  ],
  ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
  ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }],
  ['future_event', { type: 'future_event', detail: { x: 1 } }],
  ['ping', { type: 'ping' }],
  ['content_block_stop', { type: 'content_block_stop', index: 0 }],
  ['content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_raw', name: 'time', input: {} } }],
  ['content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } }],
  ['content_block_stop', { type: 'content_block_stop', index: 1 }],
  ['message_delta', { type: 'message_delta', delta: { stop_reason: null }, usage: { output_tokens: 5 } }],
  [
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { output_tokens: 9, input_tokens: 10, cache_read_input_tokens: 100 },
    },
  ],
  ['message_stop', { type: 'message_stop' }],
];

test('streams: usage counts are cumulative (latest value wins, never summed); unknown events pass through', async () => {
  const upstream = await rawUpstream((res) => sseAnswer(res, CUMULATIVE_EVENTS));
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const expected = { prompt_tokens: 130, completion_tokens: 9, cached_tokens: 100, cache_write_tokens: 20 };

    const events = await collect(p.native!.stream(nativeCall({ model: PUBLIC_MODEL, max_tokens: 10, messages: [] })));
    assert.equal(
      events.map((e) => e.event),
      CUMULATIVE_EVENTS.map(([name]) => name),
    );
    assert.is(events[3]!.data, JSON.stringify(CUMULATIVE_EVENTS[3]![1]), 'the unknown event is forwarded as it came');
    assert.equal(
      events.filter((e) => e.usage).map((e) => e.usage),
      [expected],
    );
    assert.equal(events[10]!.usage, expected);
    assert.is(events[10]!.upstreamId, 'msg_raw_1');
    assert.is(events[9]!.usage, undefined, 'a message_delta without stop_reason carries no charge');

    const parts = await collect(p.chatStream(chatCall()));
    assert.equal(parts, [
      { type: 'text', text: 'Hi' },
      { type: 'tool_call', index: 0, id: 'toolu_raw', name: 'time' },
      { type: 'tool_call', index: 0, arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls', usage: expected, upstreamId: 'msg_raw_1' },
    ]);
  } finally {
    await upstream.close();
  }
});

test("native stream: without a stop_reason delta, the usage rides on a message_delta of the gateway's, just before message_stop", async () => {
  const events = CUMULATIVE_EVENTS.filter(([name, data]) => name !== 'message_delta' || (data.delta as Json).stop_reason === null);
  const upstream = await rawUpstream((res) => sseAnswer(res, events));
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const out = await collect(p.native!.stream(nativeCall({ model: PUBLIC_MODEL, max_tokens: 10, messages: [] })));
    assert.equal(
      out.map((e) => e.event),
      [...events.slice(0, -1).map(([name]) => name), 'message_delta', 'message_stop'],
    );
    assert.equal(
      out.slice(1, -2).map((e) => e.data),
      events.slice(1, -1).map(([, data]) => JSON.stringify(data)),
      "the upstream's events are forwarded as they came",
    );
    assert.is(out.at(-1)!.data, JSON.stringify({ type: 'message_stop' }));
    assert.is(out.at(-1)!.usage, undefined);
    const closing = out.at(-2)!;
    assert.equal(closing.usage, { prompt_tokens: 130, completion_tokens: 5, cached_tokens: 100, cache_write_tokens: 20 });
    assert.is(closing.upstreamId, 'msg_raw_1');
    // Anthropic's wire format: the last delta repeated, the cumulative usage in Anthropic's fields.
    assert.equal(JSON.parse(closing.data), {
      type: 'message_delta',
      delta: { stop_reason: null, stop_sequence: null },
      usage: { input_tokens: 10, cache_creation_input_tokens: 20, cache_read_input_tokens: 100, output_tokens: 5 },
    });
    assert.equal(out.filter((e) => e.usage).length, 1);
  } finally {
    await upstream.close();
  }
});

test('native stream from the double without any message_delta: the closing delta repeats the stop reason message_start gave (none) and its usage', async () => {
  const bare = await startAnthropicDouble({ apiKey: KEY, reply: REPLY, omitMessageDelta: true });
  try {
    const body = { model: PUBLIC_MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] };
    const out = await collect(provider(bare).native!.stream(nativeCall(body)));
    const raw = await rawStream(lastRequest(bare).body, bare);
    assert.not.ok(
      raw.some((e) => e.name === 'message_delta'),
      'the double sent no message_delta',
    );
    assert.equal(
      out.map((e) => e.event),
      [...raw.slice(0, -1).map((e) => e.name), 'message_delta', 'message_stop'],
    );
    const closing = out.at(-2)!;
    const sent = lastRequest(bare).body;
    // message_start said output_tokens 1 and nothing updated it.
    assert.equal(closing.usage, { prompt_tokens: anthropicPromptTokens(sent), completion_tokens: 1, cached_tokens: 0, cache_write_tokens: 0 });
    assert.equal(JSON.parse(closing.data), {
      type: 'message_delta',
      delta: { stop_reason: null, stop_sequence: null },
      usage: { input_tokens: anthropicPromptTokens(sent), cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
    });
  } finally {
    await bare.close();
  }
});

test('countTokens: only the fields count_tokens takes, with the model mapped', async () => {
  const body: Json = {
    ...cachedBody(),
    temperature: 0.3,
    messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }] }],
  };
  const tokens = await provider().native!.countTokens!({
    dialect: 'messages',
    upstreamModel: UPSTREAM_MODEL,
    publicModel: PUBLIC_MODEL,
    body,
    signal: new AbortController().signal,
  });
  const request = lastRequest(claude);
  assert.is(request.path, '/v1/messages/count_tokens');
  assert.equal(request.body, {
    model: UPSTREAM_MODEL,
    messages: body.messages,
    system: body.system,
    tools: body.tools,
    tool_choice: body.tool_choice,
    thinking: body.thinking,
  });
  assert.is(tokens, anthropicPromptTokens(request.body));
  assert.ok(tokens > 0);
});

// ---- failures -----------------------------------------------------------------------------------

test('errors: 400 is a request error with a redacted detail', async () => {
  claude.script({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: `messages.0: cannot use "${PROMPT}"` } } });
  const error = await rejection(provider().chat(chatCall()));
  assertUpstreamError(error, 'request', 400);
  assert.match(error.message, '(invalid_request_error)');
  assert.match(error.message, '[redacted]');

  claude.script({ status: 400 });
  const native = await rejection(provider().native!.call(nativeCall(cachedBody())));
  assertUpstreamError(native, 'request', 400);
  assert.match(native.message, 'HTTP 400: (invalid_request_error) injected 400');
});

test('errors: a refused key is a config error that never names the key', async () => {
  const wrong = 'sk-ant-api03-WRONG-key-9876543210';
  const error = await rejection(createAnthropicProvider({ baseURL: claude.url, apiKey: wrong, timeoutMs: 5_000 }).chat(chatCall()));
  assertUpstreamError(error, 'config', 401);
  assert.match(error.message, '(authentication_error)');
  assert.not.match(error.message, wrong);

  claude.script({ status: 401, body: { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key ${KEY}` } } });
  const quoted = await rejection(provider().native!.call(nativeCall(cachedBody())));
  assertUpstreamError(quoted, 'config', 401);
  assert.match(quoted.message, 'invalid x-api-key [redacted]');

  claude.script({ status: 404 });
  assertUpstreamError(await rejection(provider().chat(chatCall())), 'config', 404);
});

test('errors: 529, 500 and 429 are retriable, streamed or not', async () => {
  claude.script({ status: 529 }, { status: 500 }, { status: 429 }, { status: 529 });
  const overloaded = await rejection(provider().chat(chatCall()));
  assertUpstreamError(overloaded, 'retriable', 529);
  assert.match(overloaded.message, '(overloaded_error)');
  assertUpstreamError(await rejection(provider().native!.call(nativeCall(cachedBody()))), 'retriable', 500);
  assertUpstreamError((await collectUntilError(provider().chatStream(chatCall()))).error, 'retriable', 429);
  const streamed = await collectUntilError(provider().native!.stream(nativeCall(cachedBody())));
  assert.is(streamed.items.length, 0);
  assertUpstreamError(streamed.error, 'retriable', 529);
});

test('errors: an error event mid-stream is a retriable UpstreamError after the events before it', async () => {
  claude.script({ errorEventAfter: 4 }, { errorEventAfter: 4 });
  const native = await collectUntilError(
    provider().native!.stream(nativeCall({ model: PUBLIC_MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] })),
  );
  assert.equal(
    native.items.map((e) => e.event),
    ['message_start', 'content_block_start', 'ping', 'content_block_delta'],
  );
  assertUpstreamError(native.error, 'retriable');
  assert.match(native.error.message, '(overloaded_error) Overloaded');

  const chat = await collectUntilError(provider().chatStream(chatCall()));
  assert.equal(chat.items, [{ type: 'text', text: wordPieces(REPLY)[0]! }]);
  assertUpstreamError(chat.error, 'retriable');
});

test('errors: an invalid_request_error event is a request error; its message is redacted', async () => {
  const upstream = await rawUpstream((res) =>
    sseAnswer(res, [CUMULATIVE_EVENTS[0]!, ['error', { type: 'error', error: { type: 'invalid_request_error', message: `prompt "${PROMPT}" too long` } }]]),
  );
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const body = { model: PUBLIC_MODEL, max_tokens: 10, messages: [{ role: 'user', content: PROMPT }] };
    const native = await collectUntilError(p.native!.stream(nativeCall(body)));
    assert.is(native.items.length, 1);
    assertUpstreamError(native.error, 'request');
    assert.match(native.error.message, '(invalid_request_error) prompt "[redacted]" too long');
    const chat = await collectUntilError(p.chatStream(chatCall()));
    assertUpstreamError(chat.error, 'request');
  } finally {
    await upstream.close();
  }
});

test('errors: a stream cut before message_stop is a retriable UpstreamError', async () => {
  const before = claude.abandoned;
  claude.script({ cutAfterEvents: 5 }, { cutAfterEvents: 5 });
  const native = await collectUntilError(
    provider().native!.stream(nativeCall({ model: PUBLIC_MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] })),
  );
  assert.is(native.items.length, 5);
  assertUpstreamError(native.error, 'retriable');
  const chat = await collectUntilError(provider().chatStream(chatCall()));
  assertUpstreamError(chat.error, 'retriable');
  assert.ok(
    chat.items.every((p) => p.type !== 'finish'),
    'no finish part for a cut stream',
  );
  assert.is(claude.abandoned, before);

  // A stream that closes cleanly but early (no message_stop) is named as such.
  const upstream = await rawUpstream((res) => sseAnswer(res, CUMULATIVE_EVENTS.slice(0, -1)));
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const early = await collectUntilError(p.native!.stream(nativeCall({ model: PUBLIC_MODEL, max_tokens: 10, messages: [] })));
    assert.is(early.items.length, CUMULATIVE_EVENTS.length - 1);
    assertUpstreamError(early.error, 'retriable');
    assert.is(early.error.message, 'upstream messages stream ended before it finished');
    const earlyChat = await collectUntilError(p.chatStream(chatCall()));
    assert.is(earlyChat.error.message, 'upstream chat stream ended before it finished');
  } finally {
    await upstream.close();
  }
});

test('errors: garbage bodies and streams are retriable UpstreamErrors', async () => {
  claude.script({ garbage: true }, { garbage: true }, { garbage: true }, { garbage: true }, { cutAfterEvents: 1 });
  const chat = await rejection(provider().chat(chatCall()));
  assertUpstreamError(chat, 'retriable');
  assert.match(chat.message, 'malformed');
  assertUpstreamError(await rejection(provider().native!.call(nativeCall(cachedBody()))), 'retriable');
  const streamed = await collectUntilError(provider().native!.stream(nativeCall(cachedBody())));
  assertUpstreamError(streamed.error, 'retriable');
  assert.match(streamed.error.message, 'malformed event');
  assertUpstreamError((await collectUntilError(provider().chatStream(chatCall()))).error, 'retriable');
  // A plain body cut half-way.
  assertUpstreamError(await rejection(provider().chat(chatCall())), 'retriable');
});

test('errors: a reply without usage is not billed on a guess; count_tokens without input_tokens fails', async () => {
  const upstream = await rawUpstream((res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'msg_x', type: 'message', content: [{ type: 'text', text: 'Hi' }], stop_reason: 'end_turn' }));
  });
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const chat = await rejection(p.chat(chatCall()));
    assertUpstreamError(chat, 'retriable');
    assert.match(chat.message, 'no usage');
    assertUpstreamError(await rejection(p.native!.call(nativeCall(cachedBody()))), 'retriable');
    assertUpstreamError(await rejection(p.native!.countTokens!(nativeCall(cachedBody()))), 'retriable');
  } finally {
    await upstream.close();
  }
});

test('errors: missing or odd usage fields count 0', async () => {
  const upstream = await rawUpstream((res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'msg_y',
        content: [{ type: 'text', text: 'Hi' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 7, output_tokens: 2.5, cache_read_input_tokens: null },
      }),
    );
  });
  try {
    const p = createAnthropicProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 5_000 });
    const outcome = await p.chat(chatCall());
    assert.equal(outcome.usage, { prompt_tokens: 7, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 });
  } finally {
    await upstream.close();
  }
});

test('errors: a first-byte timeout is retriable and does not wait for the whole timeout', async () => {
  // The upstream never answers: only the 200 ms first-byte timeout ends the call, far below the
  // 60 s timeout (the 10 s bound sits far from both; it does not measure the machine).
  claude.script({ hang: true }, { hang: true });
  const p = provider(claude, { timeoutMs: 60_000, firstByteTimeoutMs: 200 });
  let started = Date.now();
  const error = await rejection(p.chat(chatCall()));
  assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started}ms`);
  assertUpstreamError(error, 'retriable');
  assert.is(error.message, 'upstream chat timed out');
  started = Date.now();
  const streamed = await collectUntilError(p.native!.stream(nativeCall(cachedBody())));
  assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started}ms`);
  assertUpstreamError(streamed.error, 'retriable');
  assert.is(streamed.error.message, 'upstream messages stream timed out');
});

test('aborts: a caller abort mid-stream stays an AbortError and the upstream connection is dropped', async () => {
  for (const run of ['native', 'chat'] as const) {
    claude.script({ chunkDelayMs: 40 });
    const before = claude.abandoned;
    const controller = new AbortController();
    const stream: AsyncIterable<NativeStreamEvent | ChatStreamPart> =
      run === 'native'
        ? provider().native!.stream(
            nativeCall({ model: PUBLIC_MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] }, { signal: controller.signal }),
          )
        : provider().chatStream(chatCall({ signal: controller.signal }));
    let received = 0;
    const error = await rejection(
      (async () => {
        for await (const _ of stream) {
          if (++received === 3) setTimeout(() => controller.abort(), 10);
        }
      })(),
    );
    assert.is(error.name, 'AbortError', `${run}: ${error.message}`);
    assert.not.instance(error, UpstreamError);
    assert.ok(received >= 3 && received < 10, `${run}: received ${received}`);
    await until(() => claude.abandoned === before + 1);
  }
});

test('aborts: an abort while waiting for the reply stays an AbortError', async () => {
  claude.script({ hang: true });
  const before = claude.abandoned;
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  const error = await rejection(provider().chat(chatCall({ signal: controller.signal })));
  assert.is(error.name, 'AbortError');
  assert.not.instance(error, UpstreamError);
  await until(() => claude.abandoned === before + 1);

  const aborted = new AbortController();
  aborted.abort();
  const early = await rejection(provider().native!.call(nativeCall(cachedBody(), { signal: aborted.signal })));
  assert.is(early.name, 'AbortError');
});

test.run();
