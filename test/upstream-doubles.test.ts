// The Anthropic and OpenAI doubles, checked with the official SDKs pointed straight at them:
// if the SDKs parse what the doubles send, gateway tests built on the doubles test the real
// wire formats.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Anthropic, { type APIError as AnthropicAPIError } from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import {
  ANTHROPIC_DEFAULT_REPLY,
  ANTHROPIC_DEFAULT_THINKING,
  anthropicCachePrefixes,
  anthropicPromptTokens,
  startAnthropicDouble,
  type AnthropicDouble,
} from './support/anthropic-double.ts';
import { wordPieces, rejection } from './support/double-http.ts';
import {
  OPENAI_DEFAULT_REPLY,
  OPENAI_REASONING_TOKENS,
  openaiPromptTokens,
  openaiSegmentTokens,
  startOpenAIDouble,
  type OpenAIDouble,
} from './support/openai-double.ts';
import type { RecordedFile } from './support/double-http.ts';

const words = (text: string) => wordPieces(text).length;

async function until(condition: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// ---- Anthropic ----------------------------------------------------------------------------

let claude: AnthropicDouble;
let claudeTools: AnthropicDouble;
let anthropic: Anthropic;
let anthropicTools: Anthropic;

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

test.before(async () => {
  claude = await startAnthropicDouble();
  claudeTools = await startAnthropicDouble({ toolUse: { input: { city: 'Paris', unit: 'celsius' } } });
  anthropic = new Anthropic({ apiKey: 'test-anthropic-key', baseURL: claude.url, maxRetries: 0 });
  anthropicTools = new Anthropic({ apiKey: 'test-anthropic-key', baseURL: claudeTools.url, maxRetries: 0 });
});

test.after(async () => {
  await claude.close();
  await claudeTools.close();
});

test('anthropic: messages.create answers text with usage the SDK reads', async () => {
  const body = { model: 'claude-test', max_tokens: 200, messages: [{ role: 'user' as const, content: 'Hello there' }] };
  const message = await anthropic.messages.create(body);
  assert.ok(message.id.startsWith('msg_'));
  assert.is(message.type, 'message');
  assert.is(message.role, 'assistant');
  assert.is(message.model, 'claude-test');
  assert.is(message.stop_reason, 'end_turn');
  assert.is(message.stop_sequence, null);
  assert.equal(message.content, [{ type: 'text', text: ANTHROPIC_DEFAULT_REPLY }]);
  assert.is(message.usage.input_tokens, anthropicPromptTokens(body));
  assert.ok(message.usage.input_tokens > 0);
  assert.is(message.usage.cache_creation_input_tokens, 0);
  assert.is(message.usage.cache_read_input_tokens, 0);
  assert.is(message.usage.output_tokens, words(ANTHROPIC_DEFAULT_REPLY));
  const recorded = claude.requests.at(-1)!;
  assert.is(recorded.path, '/v1/messages');
  // @anthropic-ai/sdk 1.x sends the key as a Bearer token, not in x-api-key.
  assert.is(recorded.headers.authorization, 'Bearer test-anthropic-key');
  assert.ok(recorded.headers['anthropic-version']);
  assert.equal(recorded.body.messages, body.messages);
});

test('anthropic: thinking comes first, with a signature, and counts as output', async () => {
  const message = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 2048,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: 'Think, then answer' }],
  });
  assert.is(message.content.length, 2);
  const [thinking, text] = message.content;
  assert.is(thinking!.type, 'thinking');
  if (thinking!.type !== 'thinking' || text!.type !== 'text') throw new Error('unexpected block types');
  assert.is(thinking.thinking, ANTHROPIC_DEFAULT_THINKING);
  assert.ok(thinking.signature.length > 20);
  assert.is(text.text, ANTHROPIC_DEFAULT_REPLY);
  assert.is(message.usage.output_tokens, words(ANTHROPIC_DEFAULT_THINKING) + words(ANTHROPIC_DEFAULT_REPLY));
});

test('anthropic: tools give a tool_use block and stop_reason tool_use', async () => {
  const message = await anthropicTools.messages.create({
    model: 'claude-test',
    max_tokens: 200,
    tools: [weatherTool],
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  assert.is(message.stop_reason, 'tool_use');
  const [block] = message.content;
  if (block?.type !== 'tool_use') throw new Error(`expected tool_use, got ${block?.type}`);
  assert.is(block.name, 'get_weather');
  assert.equal(block.input, { city: 'Paris', unit: 'celsius' });
  assert.ok(block.id.startsWith('toolu_'));
  assert.is(message.usage.output_tokens, Math.ceil(JSON.stringify(block.input).length / 4));
});

test('anthropic: max_tokens cuts the reply and says so', async () => {
  const message = await anthropic.messages.create({ model: 'claude-test', max_tokens: 3, messages: [{ role: 'user', content: 'Hi' }] });
  assert.is(message.stop_reason, 'max_tokens');
  assert.is(message.usage.output_tokens, 3);
  assert.equal(message.content, [{ type: 'text', text: wordPieces(ANTHROPIC_DEFAULT_REPLY).slice(0, 3).join('') }]);
});

test('anthropic: the raw stream has every event in order, with cumulative usage', async () => {
  const body = {
    model: 'claude-test',
    max_tokens: 2048,
    thinking: { type: 'enabled' as const, budget_tokens: 1024 },
    messages: [{ role: 'user' as const, content: 'Stream please' }],
  };
  const stream = await anthropic.messages.create({ ...body, stream: true });
  const types: string[] = [];
  const deltas = new Set<string>();
  let startUsage: Anthropic.Usage | undefined;
  let deltaUsage: Anthropic.MessageDeltaUsage | undefined;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'message_start') startUsage = event.message.usage;
    if (event.type === 'content_block_delta') deltas.add(event.delta.type);
    if (event.type === 'message_delta') deltaUsage = event.usage;
  }
  assert.is(types[0], 'message_start');
  assert.is(types[1], 'content_block_start');
  assert.is(types.at(-2), 'message_delta');
  assert.is(types.at(-1), 'message_stop');
  assert.equal([...deltas].sort(), ['signature_delta', 'text_delta', 'thinking_delta']);
  assert.is(types.filter((t) => t === 'content_block_start').length, 2);
  assert.is(types.filter((t) => t === 'content_block_stop').length, 2);
  const raw = claude.requests.at(-1)!;
  assert.is(raw.body.stream, true);
  assert.is(startUsage!.output_tokens, 1);
  assert.is(startUsage!.input_tokens, anthropicPromptTokens(body));
  const output = words(ANTHROPIC_DEFAULT_THINKING) + words(ANTHROPIC_DEFAULT_REPLY);
  assert.is(deltaUsage!.output_tokens, output);
  assert.is(deltaUsage!.input_tokens, anthropicPromptTokens(body));
});

test('anthropic: messages.stream().finalMessage() rebuilds the message and its usage', async () => {
  const body = {
    model: 'claude-test',
    max_tokens: 2048,
    thinking: { type: 'enabled' as const, budget_tokens: 1024 },
    messages: [{ role: 'user' as const, content: 'Stream and think' }],
  };
  const stream = anthropic.messages.stream(body);
  let streamedText = '';
  stream.on('text', (delta) => (streamedText += delta));
  const message = await stream.finalMessage();
  assert.is(streamedText, ANTHROPIC_DEFAULT_REPLY);
  assert.is(message.stop_reason, 'end_turn');
  const [thinking, text] = message.content;
  if (thinking?.type !== 'thinking' || text?.type !== 'text') throw new Error('unexpected block types');
  assert.is(thinking.thinking, ANTHROPIC_DEFAULT_THINKING);
  assert.ok(thinking.signature.length > 20);
  assert.is(text.text, ANTHROPIC_DEFAULT_REPLY);
  assert.is(message.usage.input_tokens, anthropicPromptTokens(body));
  assert.is(message.usage.cache_creation_input_tokens, 0);
  assert.is(message.usage.cache_read_input_tokens, 0);
  assert.is(message.usage.output_tokens, words(ANTHROPIC_DEFAULT_THINKING) + words(ANTHROPIC_DEFAULT_REPLY));
});

test('anthropic: a streamed tool_use arrives as parsed input', async () => {
  const message = await anthropicTools.messages
    .stream({ model: 'claude-test', max_tokens: 200, tools: [weatherTool], messages: [{ role: 'user', content: 'Weather?' }] })
    .finalMessage();
  assert.is(message.stop_reason, 'tool_use');
  const [block] = message.content;
  if (block?.type !== 'tool_use') throw new Error(`expected tool_use, got ${block?.type}`);
  assert.equal(block.input, { city: 'Paris', unit: 'celsius' });
});

test('anthropic: cache_control writes the prefix once, then reads it', async () => {
  claude.clearCache();
  const system = [{ type: 'text' as const, text: 'You are a careful assistant. '.repeat(40), cache_control: { type: 'ephemeral' as const } }];
  const body = { model: 'claude-test', max_tokens: 100, system, messages: [{ role: 'user' as const, content: 'First question' }] };
  const total = anthropicPromptTokens(body);
  const [prefix] = anthropicCachePrefixes(body);
  assert.ok(prefix! > 100 && prefix! < total);

  const first = await anthropic.messages.create(body);
  assert.is(first.usage.cache_creation_input_tokens, prefix);
  assert.is(first.usage.cache_read_input_tokens, 0);
  assert.is(first.usage.input_tokens, total - prefix!);
  assert.equal(first.usage.cache_creation, { ephemeral_5m_input_tokens: prefix!, ephemeral_1h_input_tokens: 0 });

  const second = await anthropic.messages.stream(body).finalMessage();
  assert.is(second.usage.cache_creation_input_tokens, 0);
  assert.is(second.usage.cache_read_input_tokens, prefix);
  assert.is(second.usage.input_tokens, total - prefix!);

  // A longer conversation with a second breakpoint reads the first prefix and writes the rest.
  const longer = {
    ...body,
    messages: [
      { role: 'user' as const, content: 'First question' },
      { role: 'assistant' as const, content: 'First answer' },
      {
        role: 'user' as const,
        content: [{ type: 'text' as const, text: 'Second question', cache_control: { type: 'ephemeral' as const, ttl: '1h' as const } }],
      },
    ],
  };
  const [, end] = anthropicCachePrefixes(longer);
  const third = await anthropic.messages.create(longer);
  assert.is(third.usage.cache_read_input_tokens, prefix);
  assert.is(third.usage.cache_creation_input_tokens, end! - prefix!);
  assert.equal(third.usage.cache_creation, { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: end! - prefix! });
  assert.is(third.usage.input_tokens, 0);
});

test('anthropic: countTokens reports all prompt tokens, cached or not', async () => {
  claude.clearCache();
  const body = {
    model: 'claude-test',
    system: [{ type: 'text' as const, text: 'Cached system prompt. '.repeat(20), cache_control: { type: 'ephemeral' as const } }],
    tools: [weatherTool],
    messages: [{ role: 'user' as const, content: 'Count me' }],
  };
  const counted = await anthropic.messages.countTokens(body);
  assert.is(counted.input_tokens, anthropicPromptTokens(body));
  const message = await anthropic.messages.create({ ...body, max_tokens: 50 });
  const { input_tokens, cache_creation_input_tokens, cache_read_input_tokens } = message.usage;
  assert.is(input_tokens + (cache_creation_input_tokens ?? 0) + (cache_read_input_tokens ?? 0), counted.input_tokens);
  assert.ok((cache_creation_input_tokens ?? 0) > 0);
});

test('anthropic: base64 image blocks are accepted, broken ones are a 400', async () => {
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: { r: 200, g: 10, b: 10 } } })
    .png()
    .toBuffer();
  const message = await anthropic.messages.create({
    model: 'claude-test',
    max_tokens: 50,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') } },
          { type: 'text', text: 'What is this?' },
        ],
      },
    ],
  });
  assert.is(message.stop_reason, 'end_turn');
  const error = await rejection(
    anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 50,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'not base64!' } }] }],
    }),
  );
  assert.instance(error, Anthropic.BadRequestError);
  assert.is((error as AnthropicAPIError).type, 'invalid_request_error');
});

test('anthropic: a malformed body is a 400 in Anthropic error shape', async () => {
  const missingMaxTokens = await rejection(
    anthropic.messages.create({ model: 'claude-test', messages: [{ role: 'user', content: 'Hi' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming),
  );
  assert.instance(missingMaxTokens, Anthropic.BadRequestError);
  const error = missingMaxTokens as AnthropicAPIError;
  assert.is(error.status, 400);
  assert.is(error.type, 'invalid_request_error');
  assert.match(String(error.apiMessage), 'max_tokens');
  const noMessages = await rejection(anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [] }));
  assert.instance(noMessages, Anthropic.BadRequestError);
  const badBudget = await rejection(
    anthropic.messages.create({
      model: 'claude-test',
      max_tokens: 1000,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'Hi' }],
    }),
  );
  assert.instance(badBudget, Anthropic.BadRequestError);
});

test('anthropic: auth wants the key (x-api-key or Bearer) and an anthropic-version header', async () => {
  const wrong = new Anthropic({ apiKey: 'wrong-key', baseURL: claude.url, maxRetries: 0 });
  const error = await rejection(wrong.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }));
  assert.instance(error, Anthropic.AuthenticationError);
  assert.is((error as AnthropicAPIError).status, 401);
  assert.is((error as AnthropicAPIError).type, 'authentication_error');

  const noVersion = await fetch(`${claude.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'test-anthropic-key' },
    body: JSON.stringify({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }),
  });
  assert.is(noVersion.status, 400);
  const viaHeader = await fetch(`${claude.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'test-anthropic-key', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }),
  });
  assert.is(viaHeader.status, 200, 'x-api-key works too');
  assert.ok(viaHeader.headers.get('request-id')?.startsWith('req_'));
  assert.equal(await noVersion.json(), { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' } });
});

test('anthropic: a scripted 529 is the SDK overloaded error; 429 carries retry-after', async () => {
  claude.script({ status: 529 }, { status: 429 });
  const overloaded = (await rejection(
    anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }),
  )) as AnthropicAPIError;
  assert.instance(overloaded, Anthropic.InternalServerError);
  assert.is(overloaded.status, 529);
  assert.is(overloaded.type, 'overloaded_error');
  assert.equal(overloaded.error, { type: 'error', error: { type: 'overloaded_error', message: 'injected 529' } });
  const limited = (await rejection(
    anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }),
  )) as AnthropicAPIError;
  assert.instance(limited, Anthropic.RateLimitError);
  assert.is(limited.type, 'rate_limit_error');
  assert.is(limited.headers?.get('retry-after'), '1');
});

test('anthropic: an error event mid-stream makes the SDK stream throw', async () => {
  claude.script({ errorEventAfter: 4 });
  const stream = anthropic.messages.stream({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] });
  const texts: string[] = [];
  stream.on('text', (delta) => texts.push(delta));
  const error = (await rejection(stream.finalMessage())) as AnthropicAPIError;
  assert.instance(error, Anthropic.APIError);
  assert.is(error.type, 'overloaded_error');
  // message_start, content_block_start, ping, then one text delta before the error.
  assert.equal(texts, wordPieces(ANTHROPIC_DEFAULT_REPLY).slice(0, 1));
});

test('anthropic: a stream cut mid-way makes the SDK stream throw', async () => {
  claude.script({ cutAfterEvents: 5 });
  const before = claude.abandoned;
  const error = await rejection(
    anthropic.messages.stream({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage(),
  );
  assert.instance(error, Anthropic.AnthropicError);
  assert.is(claude.abandoned, before, 'a cut made by the double is not an abandonment');
});

test('anthropic: hang, slow first byte and garbage', async () => {
  claude.script({ hang: true });
  const before = claude.abandoned;
  const timeout = await rejection(
    anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }, { timeout: 150 }),
  );
  assert.instance(timeout, Anthropic.APIConnectionTimeoutError);
  await until(() => claude.abandoned === before + 1);

  claude.script({ firstByteDelayMs: 150 });
  const started = Date.now();
  const slow = await anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] });
  assert.ok(Date.now() - started >= 140);
  assert.is(slow.stop_reason, 'end_turn');

  claude.script({ garbage: true }, { garbage: true });
  const garbled = await rejection(anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }));
  assert.instance(garbled, SyntaxError);
  const quiet = new Anthropic({ apiKey: 'test-anthropic-key', baseURL: claude.url, maxRetries: 0, logLevel: 'off' });
  const garbledStream = await rejection(
    quiet.messages.stream({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage(),
  );
  assert.instance(garbledStream, Anthropic.AnthropicError);
});

test('anthropic: setDefault applies to every request until cleared; calls counts them', async () => {
  const calls = claude.calls;
  claude.setDefault({ status: 500 });
  for (let i = 0; i < 2; i++) {
    const error = (await rejection(
      anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }),
    )) as AnthropicAPIError;
    assert.is(error.status, 500);
    assert.is(error.type, 'api_error');
  }
  claude.setDefault(null);
  const ok = await anthropic.messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] });
  assert.is(ok.type, 'message');
  assert.is(claude.calls, calls + 3);
});

// ---- OpenAI -------------------------------------------------------------------------------

let gpt: OpenAIDouble;
let gptTools: OpenAIDouble;
let openai: OpenAI;
let openaiTools: OpenAI;

const lookupTool = {
  type: 'function' as const,
  function: { name: 'lookup', description: 'Look a word up', parameters: { type: 'object', properties: { word: { type: 'string' } } } },
};
const lookupArguments = JSON.stringify({ word: 'tollgate', language: 'en' });

test.before(async () => {
  gpt = await startOpenAIDouble();
  gptTools = await startOpenAIDouble({ toolCall: { arguments: lookupArguments } });
  openai = new OpenAI({ apiKey: 'test-openai-key', baseURL: `${gpt.url}/v1`, maxRetries: 0 });
  openaiTools = new OpenAI({ apiKey: 'test-openai-key', baseURL: `${gptTools.url}/v1`, maxRetries: 0 });
});

test.after(async () => {
  await gpt.close();
  await gptTools.close();
});

test('openai: chat.completions.create answers with full usage details', async () => {
  gpt.clearCache();
  const body = { model: 'gpt-test', messages: [{ role: 'user' as const, content: 'Hello' }] };
  const completion = await openai.chat.completions.create(body);
  assert.ok(completion.id.startsWith('chatcmpl-'));
  assert.is(completion.object, 'chat.completion');
  assert.is(completion.model, 'gpt-test');
  assert.is(completion.choices[0]!.message.content, OPENAI_DEFAULT_REPLY);
  assert.is(completion.choices[0]!.finish_reason, 'stop');
  const usage = completion.usage!;
  assert.is(usage.prompt_tokens, openaiPromptTokens(body));
  assert.is(usage.completion_tokens, words(OPENAI_DEFAULT_REPLY));
  assert.is(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.is(usage.prompt_tokens_details?.cached_tokens, 0);
  assert.is(usage.completion_tokens_details?.reasoning_tokens, 0);
  const recorded = gpt.requests.at(-1)!;
  assert.is(recorded.path, '/v1/chat/completions');
  assert.is(recorded.headers.authorization, 'Bearer test-openai-key');
});

test('openai: reasoning_effort adds reasoning tokens inside completion_tokens', async () => {
  const completion = await openai.chat.completions.create({ model: 'gpt-test', reasoning_effort: 'high', messages: [{ role: 'user', content: 'Think' }] });
  const usage = completion.usage!;
  assert.is(usage.completion_tokens_details?.reasoning_tokens, OPENAI_REASONING_TOKENS.high);
  assert.is(usage.completion_tokens, OPENAI_REASONING_TOKENS.high! + words(OPENAI_DEFAULT_REPLY));
  const bad = await rejection(
    openai.chat.completions.create({ model: 'gpt-test', reasoning_effort: 'extreme' as 'high', messages: [{ role: 'user', content: 'x' }] }),
  );
  assert.instance(bad, OpenAI.BadRequestError);
  assert.is((bad as InstanceType<typeof OpenAI.APIError>).param, 'reasoning_effort');
});

test('openai: a repeated prefix of whole messages is reported as cached_tokens', async () => {
  gpt.clearCache();
  const system = { role: 'system' as const, content: 'You are terse. '.repeat(30) };
  const first = { model: 'gpt-test', messages: [system, { role: 'user' as const, content: 'One' }] };
  const a = await openai.chat.completions.create(first);
  assert.is(a.usage!.prompt_tokens_details?.cached_tokens, 0);
  const second = {
    model: 'gpt-test',
    messages: [...first.messages, { role: 'assistant' as const, content: 'Two' }, { role: 'user' as const, content: 'Three' }],
  };
  const b = await openai.chat.completions.create(second);
  const [sys, one] = openaiSegmentTokens(second);
  assert.is(b.usage!.prompt_tokens, openaiPromptTokens(second));
  assert.is(b.usage!.prompt_tokens_details?.cached_tokens, sys! + one!);
  const otherModel = await openai.chat.completions.create({ ...second, model: 'gpt-other' });
  assert.is(otherModel.usage!.prompt_tokens_details?.cached_tokens, 0, 'the cache is per model');
});

test('openai: a streamed chat with include_usage ends with a usage chunk without choices', async () => {
  gpt.clearCache();
  const body = { model: 'gpt-test', reasoning_effort: 'low' as const, messages: [{ role: 'user' as const, content: 'Stream' }] };
  await openai.chat.completions.create(body); // warm the cache
  const stream = await openai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '';
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    text += chunk.choices[0]?.delta.content ?? '';
  }
  assert.is(text, OPENAI_DEFAULT_REPLY);
  assert.is(chunks[0]!.choices[0]!.delta.role, 'assistant');
  assert.ok(chunks.slice(0, -1).every((c) => c.usage === null));
  assert.is(chunks.at(-2)!.choices[0]!.finish_reason, 'stop');
  const last = chunks.at(-1)!;
  assert.equal(last.choices, []);
  assert.is(last.usage!.prompt_tokens, openaiPromptTokens(body));
  assert.is(last.usage!.prompt_tokens_details?.cached_tokens, openaiPromptTokens(body));
  assert.is(last.usage!.completion_tokens_details?.reasoning_tokens, OPENAI_REASONING_TOKENS.low);
  assert.is(last.usage!.completion_tokens, OPENAI_REASONING_TOKENS.low! + words(OPENAI_DEFAULT_REPLY));

  const without = await openai.chat.completions.create({ ...body, stream: true });
  const plain: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of without) plain.push(chunk);
  assert.ok(
    plain.every((c) => c.usage === undefined && c.choices.length === 1),
    'no usage unless asked for',
  );
});

test('openai: tool calls, plain and through chat.completions.stream()', async () => {
  const body = { model: 'gpt-test', tools: [lookupTool], messages: [{ role: 'user' as const, content: 'Look up tollgate' }] };
  const completion = await openaiTools.chat.completions.create(body);
  const choice = completion.choices[0]!;
  assert.is(choice.finish_reason, 'tool_calls');
  assert.is(choice.message.content, null);
  const call = choice.message.tool_calls![0]!;
  if (call.type !== 'function') throw new Error('expected a function call');
  assert.is(call.function.name, 'lookup');
  assert.is(call.function.arguments, lookupArguments);
  assert.is(completion.usage!.completion_tokens, Math.ceil(lookupArguments.length / 4));

  const final = await openaiTools.chat.completions.stream({ ...body, stream_options: { include_usage: true } }).finalChatCompletion();
  const streamed = final.choices[0]!.message.tool_calls![0]!;
  if (streamed.type !== 'function') throw new Error('expected a function call');
  assert.is(streamed.function.name, 'lookup');
  assert.is(streamed.function.arguments, lookupArguments);
  assert.ok(streamed.id.startsWith('call_'));
  assert.is(final.choices[0]!.finish_reason, 'tool_calls');
  assert.is(final.usage?.completion_tokens, Math.ceil(lookupArguments.length / 4));
});

test('openai: max_tokens / max_completion_tokens cut the answer (finish_reason length)', async () => {
  const capped = await openai.chat.completions.create({ model: 'gpt-test', max_completion_tokens: 3, messages: [{ role: 'user', content: 'Hi' }] });
  assert.is(capped.choices[0]!.finish_reason, 'length');
  assert.is(capped.choices[0]!.message.content, wordPieces(OPENAI_DEFAULT_REPLY).slice(0, 3).join(''));
  assert.is(capped.usage!.completion_tokens, 3);
  const legacy = await openai.chat.completions.create({ model: 'gpt-test', max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] });
  assert.is(legacy.usage!.completion_tokens, 2);
  const allReasoning = await openai.chat.completions.create({
    model: 'gpt-test',
    reasoning_effort: 'medium',
    max_completion_tokens: 10,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.is(allReasoning.choices[0]!.message.content, '');
  assert.is(allReasoning.choices[0]!.finish_reason, 'length');
  assert.is(allReasoning.usage!.completion_tokens_details?.reasoning_tokens, 10);
});

test('openai: responses.create with reasoning and encrypted content', async () => {
  gpt.clearCache();
  const body = {
    model: 'gpt-test',
    instructions: 'Be brief.',
    input: 'Hello',
    reasoning: { effort: 'medium' as const },
    include: ['reasoning.encrypted_content' as const],
  };
  const response = await openai.responses.create(body);
  assert.ok(response.id.startsWith('resp_'));
  assert.is(response.object, 'response');
  assert.is(response.status, 'completed');
  assert.is(response.output_text, OPENAI_DEFAULT_REPLY);
  const [reasoning, message] = response.output;
  if (reasoning?.type !== 'reasoning' || message?.type !== 'message') throw new Error('expected reasoning, then a message');
  assert.ok(reasoning.encrypted_content && reasoning.encrypted_content.length > 10);
  assert.equal(response.usage, {
    input_tokens: openaiPromptTokens(body),
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: OPENAI_REASONING_TOKENS.medium! + words(OPENAI_DEFAULT_REPLY),
    output_tokens_details: { reasoning_tokens: OPENAI_REASONING_TOKENS.medium! },
    total_tokens: openaiPromptTokens(body) + OPENAI_REASONING_TOKENS.medium! + words(OPENAI_DEFAULT_REPLY),
  });
  const plain = await openai.responses.create({ model: 'gpt-test', input: 'Hello', reasoning: { effort: 'low' } });
  const item = plain.output[0]!;
  if (item.type !== 'reasoning') throw new Error('expected a reasoning item');
  assert.is(item.encrypted_content, undefined, 'encrypted content only when included');
  const again = await openai.responses.create(body);
  assert.is(again.usage!.input_tokens_details.cached_tokens, openaiPromptTokens(body));
});

test('openai: a raw Responses stream has every event, numbered, ending in response.completed', async () => {
  const body = { model: 'gpt-test', input: [{ role: 'user' as const, content: 'Stream it' }], reasoning: { effort: 'low' as const } };
  const stream = await openai.responses.create({ ...body, stream: true });
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types.slice(0, 2), ['response.created', 'response.in_progress']);
  for (const type of [
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
  ]) {
    assert.ok(types.includes(type as never), `missing ${type}`);
  }
  assert.equal(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
  );
  const last = events.at(-1)!;
  if (last.type !== 'response.completed') throw new Error(`ended with ${last.type}`);
  assert.is(last.response.status, 'completed');
  assert.is(last.response.usage!.input_tokens, openaiPromptTokens(body));
  assert.is(last.response.usage!.output_tokens_details.reasoning_tokens, OPENAI_REASONING_TOKENS.low);
  const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
  assert.is(text, OPENAI_DEFAULT_REPLY);
});

test('openai: responses.stream().finalResponse() rebuilds text and function calls', async () => {
  const stream = openai.responses.stream({ model: 'gpt-test', input: 'Hello' });
  let deltas = '';
  stream.on('response.output_text.delta', (event) => (deltas += event.delta));
  const final = await stream.finalResponse();
  assert.is(final.output_text, OPENAI_DEFAULT_REPLY);
  assert.is(deltas, OPENAI_DEFAULT_REPLY);
  assert.is(final.usage!.output_tokens, words(OPENAI_DEFAULT_REPLY));

  const tools = [{ type: 'function' as const, name: 'lookup', parameters: { type: 'object', properties: {} }, strict: false }];
  const withTool = await openaiTools.responses.stream({ model: 'gpt-test', input: 'Look it up', tools }).finalResponse();
  const call = withTool.output[0]!;
  if (call.type !== 'function_call') throw new Error(`expected function_call, got ${call.type}`);
  assert.is(call.name, 'lookup');
  assert.is(call.arguments, lookupArguments);
  assert.ok(call.call_id.startsWith('call_'));
  const plainTool = await openaiTools.responses.create({ model: 'gpt-test', input: 'Look it up', tools });
  const plainCall = plainTool.output[0]!;
  if (plainCall.type !== 'function_call') throw new Error(`expected function_call, got ${plainCall.type}`);
  assert.equal([plainCall.name, plainCall.arguments, plainCall.status], ['lookup', lookupArguments, 'completed']);
  assert.is(plainTool.usage!.output_tokens, Math.ceil(lookupArguments.length / 4));
});

test('openai: max_output_tokens makes the response incomplete', async () => {
  const body = { model: 'gpt-test', input: 'Hi', reasoning: { effort: 'low' as const }, max_output_tokens: 16 };
  const response = await openai.responses.create(body);
  assert.is(response.status, 'incomplete');
  assert.equal(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.is(
    response.output_text,
    wordPieces(OPENAI_DEFAULT_REPLY)
      .slice(0, 16 - OPENAI_REASONING_TOKENS.low!)
      .join(''),
  );
  assert.is(response.usage!.output_tokens, 16);
  const events: string[] = [];
  for await (const event of await openai.responses.create({ ...body, stream: true })) events.push(event.type);
  assert.is(events.at(-1), 'response.incomplete');
  const tooSmall = await rejection(openai.responses.create({ ...body, max_output_tokens: 8 }));
  assert.instance(tooSmall, OpenAI.BadRequestError);
});

test('openai: mid-stream errors: chat error chunk throws, Responses ends in response.failed', async () => {
  gpt.script({ errorEventAfter: 3 });
  const chat = await openai.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
  let received = 0;
  const error = await rejection(
    (async () => {
      for await (const _ of chat) received++;
    })(),
  );
  assert.instance(error, OpenAI.APIError);
  assert.is((error as InstanceType<typeof OpenAI.APIError>).type, 'server_error');
  assert.is(received, 3);

  gpt.script({ errorEventAfter: 4 });
  const failed = await openai.responses.stream({ model: 'gpt-test', input: 'Hi' }).finalResponse();
  assert.is(failed.status, 'failed');
  assert.is(failed.error?.code, 'server_error');
});

test('openai: a cut stream makes the SDK throw', async () => {
  gpt.script({ cutAfterEvents: 2 }, { cutAfterEvents: 3 });
  const chat = await openai.chat.completions.create({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
  const chatError = await rejection(
    (async () => {
      for await (const _ of chat) {
        /* drain */
      }
    })(),
  );
  assert.instance(chatError, Error);
  const responsesError = await rejection(openai.responses.stream({ model: 'gpt-test', input: 'Hi' }).finalResponse());
  assert.instance(responsesError, Error);
});

test('openai: images.generate returns a real image, with usage for gpt-image models', async () => {
  const generated = await openai.images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse at dusk', size: '1536x1024', quality: 'low' });
  const bytes = Buffer.from(generated.data![0]!.b64_json!, 'base64');
  const meta = await sharp(bytes).metadata();
  assert.is(meta.format, 'png');
  assert.is(meta.width, 1536);
  assert.is(meta.height, 1024);
  assert.ok(generated.created > 0);
  const text = Math.ceil('a lighthouse at dusk'.length / 4);
  assert.equal(generated.usage, {
    input_tokens: text,
    input_tokens_details: { text_tokens: text, image_tokens: 0 },
    output_tokens: 408,
    total_tokens: text + 408,
  });
  const jpeg = await openai.images.generate({ model: 'gpt-image-1', prompt: 'x', output_format: 'jpeg', n: 2 });
  assert.is(jpeg.data!.length, 2);
  assert.is((await sharp(Buffer.from(jpeg.data![1]!.b64_json!, 'base64')).metadata()).format, 'jpeg');
  const dalle = await openai.images.generate({ model: 'dall-e-3', prompt: 'x', response_format: 'b64_json' });
  assert.is(dalle.usage, undefined);
  const noPrompt = await rejection(openai.images.generate({ model: 'gpt-image-1', prompt: '' }));
  assert.instance(noPrompt, OpenAI.BadRequestError);
});

test('openai: images.edit takes files (multipart) and JSON image URLs', async () => {
  const png = await sharp({ create: { width: 32, height: 32, channels: 3, background: { r: 1, g: 2, b: 3 } } })
    .png()
    .toBuffer();
  const edited = await openai.images.edit({ model: 'gpt-image-1', prompt: 'make it warmer', image: await toFile(png, 'in.png', { type: 'image/png' }) });
  assert.ok((await sharp(Buffer.from(edited.data![0]!.b64_json!, 'base64')).metadata()).width === 1024);
  assert.is(edited.usage?.input_tokens_details.image_tokens, 85);
  const recorded = gpt.requests.at(-1)!;
  assert.ok(String(recorded.headers['content-type']).startsWith('multipart/form-data'));
  const file = recorded.body.image as RecordedFile;
  assert.is(file.filename, 'in.png');
  assert.ok(file.bytes.equals(png));

  const two = await openai.images.edit({
    model: 'gpt-image-1',
    prompt: 'merge',
    image: [await toFile(png, 'a.png', { type: 'image/png' }), await toFile(png, 'b.png', { type: 'image/png' })],
  });
  assert.is(two.usage?.input_tokens_details.image_tokens, 170);

  const json = await fetch(`${gpt.url}/v1/images/edits`, {
    method: 'POST',
    headers: { authorization: 'Bearer test-openai-key', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-image-1', prompt: 'warmer', images: [{ image_url: `data:image/png;base64,${png.toString('base64')}` }] }),
  });
  assert.is(json.status, 200);
  assert.ok(((await json.json()) as { data: unknown[] }).data.length === 1);

  const broken = await rejection(
    openai.images.edit({ model: 'gpt-image-1', prompt: 'x', image: await toFile(Buffer.from('not an image'), 'x.png', { type: 'image/png' }) }),
  );
  assert.instance(broken, OpenAI.BadRequestError);
});

test('openai: status faults, garbage, wrong key and unknown routes', async () => {
  gpt.script({ status: 429 }, { status: 500 }, { garbage: true });
  const limited = (await rejection(openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }))) as InstanceType<
    typeof OpenAI.APIError
  >;
  assert.instance(limited, OpenAI.RateLimitError);
  assert.is(limited.code, 'rate_limit_exceeded');
  assert.is(limited.headers?.get('retry-after'), '1');
  const broken = await rejection(openai.responses.create({ model: 'gpt-test', input: 'Hi' }));
  assert.instance(broken, OpenAI.InternalServerError);
  assert.is((broken as InstanceType<typeof OpenAI.APIError>).type, 'server_error');
  const garbled = await rejection(openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }));
  assert.instance(garbled, SyntaxError);

  const wrong = new OpenAI({ apiKey: 'wrong-key', baseURL: `${gpt.url}/v1`, maxRetries: 0 });
  const denied = (await rejection(wrong.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }))) as InstanceType<
    typeof OpenAI.APIError
  >;
  assert.instance(denied, OpenAI.AuthenticationError);
  assert.is(denied.code, 'invalid_api_key');
  assert.is(denied.type, 'invalid_request_error');

  const missing = await fetch(`${gpt.url}/v1/nothing`, { method: 'POST', headers: { authorization: 'Bearer test-openai-key' } });
  assert.is(missing.status, 404);
  assert.equal(await missing.json(), { error: { message: 'Invalid URL (POST /v1/nothing)', type: 'invalid_request_error', param: null, code: null } });
});

test('openai: a hanging request counts as abandoned when the client gives up', async () => {
  gpt.script({ hang: true });
  const before = gpt.abandoned;
  const error = await rejection(openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }, { timeout: 150 }));
  assert.instance(error, OpenAI.APIConnectionTimeoutError);
  await until(() => gpt.abandoned === before + 1);
});

test.run();
