// Gemini as a native upstream, end to end: the official clients (OpenAI, Anthropic) call a real
// gateway (real HTTP, the run's database) whose models route to a local Gemini API double
// (support/gemini-double.ts) through the @google/genai client. Covered here: the models config;
// plain and streamed chat completions, the Messages and Responses dialects over the Gemini
// channel; tools (the call comes back in the caller's dialect, a follow-up with the result works,
// Gemini 3's thought signatures included); structured output; usage exact to the token in the
// ChatCharged event (cached and thinking tokens); thought text never shown; embeddings; the key in no
// log line. Errors, failover and a client that leaves: upstream-gemini-errors.test.ts.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { parseModelsConfig } from '../src/catalogue/models-config.ts';
import { createAjv } from '../src/ajv.ts';
import { openAccount, type TestAccount } from './support/http.ts';
import { jsonPieces, wordPieces } from './support/double-http.ts';
import { GEMINI_THOUGHT_SUMMARY, GEMINI_THOUGHT_TOKENS, geminiPromptTokens, startGeminiDouble, type GeminiDouble } from './support/gemini-double.ts';
import { assertChargedAsSent, onlyCharge, settled, startLoggedGateway, type LoggedGateway } from './support/upstream-gateway.ts';

const KEY = 'AIzaSy-gemini-SECRET-key-0123456789abcdef';
const REPLY = 'Gemini answers from the double with a short and predictable reply.';
const FLASH = 'gemini-2.5-flash';
const MILLI = 1300;

let gemini: GeminiDouble;
let g: LoggedGateway;

const MODELS = {
  'test/gemini': { provider: 'gemini', upstreamModel: FLASH },
  'test/gemini-think': { provider: 'gemini', upstreamModel: 'gemini-2.5-flash-thinking' },
  'test/gemini-3': { provider: 'gemini', upstreamModel: 'gemini-3-pro-preview' },
  'test/gemini-v1': { provider: 'geminiV1', upstreamModel: FLASH },
  'test/gemini-embed': { provider: 'gemini', upstreamModel: 'gemini-embedding-001' },
};

test.before(async () => {
  // alwaysThoughts: every call that thinks gets a thought part back, asked for or not.
  gemini = await startGeminiDouble({ apiKey: KEY, reply: REPLY, alwaysThoughts: true });
  const provider = { type: 'gemini', apiKeyEnv: 'TG_GEMINI_KEY', baseURL: gemini.url, timeoutMs: 5000 };
  g = await startLoggedGateway({ gemini: provider, geminiV1: { ...provider, apiVersion: 'v1' } }, MODELS, { TG_GEMINI_KEY: KEY }, MILLI);
});

test.after(async () => {
  await g?.stop();
  await gemini?.close();
});

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const openaiFor = (acct: TestAccount) => new OpenAI({ apiKey: acct.key, baseURL: g.gw.baseUrl, maxRetries: 0 });
const anthropicFor = (acct: TestAccount) => new Anthropic({ apiKey: acct.key, baseURL: g.gw.url, maxRetries: 0 });
const account = () => openAccount(g.gw, { quota: 10_000_000 });
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
const words = (text: string) => wordPieces(text).length;
const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
};
const weatherTool = { type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: weatherSchema } };

test('models config: a gemini provider needs its key variable and takes baseURL, apiVersion and timeouts only', () => {
  const config = (provider: Record<string, unknown>) => ({
    providers: { gm: { type: 'gemini', apiKeyEnv: 'GM_KEY', ...provider } },
    models: { m: { provider: 'gm', upstreamModel: FLASH } },
  });
  assert.ok(parseModelsConfig(config({})));
  assert.ok(parseModelsConfig(config({ baseURL: 'https://proxy.example', apiVersion: 'v1', timeoutMs: 1000, firstByteTimeoutMs: 500 })));
  assert.throws(() => parseModelsConfig(config({ apiKeyEnv: undefined })), /apiKeyEnv/);
  assert.throws(() => parseModelsConfig(config({ apiKey: KEY })), /additional properties/);
});

test('plain chat: generateContent with the key in x-goog-api-key; usage exact in the charge', async () => {
  const acct = await account();
  const reply = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini',
    messages: [
      { role: 'system', content: `You answer for harbour ${nonce()}.` },
      { role: 'user', content: 'Which berth is free?' },
    ],
  });
  assert.is(reply.choices[0]!.message.content, REPLY);
  assert.is(reply.choices[0]!.finish_reason, 'stop');
  const request = last(gemini.requests);
  assert.is(request.path, `/v1beta/models/${FLASH}:generateContent`);
  assert.is(request.headers['x-goog-api-key'], KEY);
  assert.is(request.headers.authorization, undefined);
  assert.equal(request.body.contents, [{ role: 'user', parts: [{ text: 'Which berth is free?' }] }]);
  assert.match(JSON.stringify(request.body.systemInstruction), /You answer for harbour/);
  const sent = last(gemini.usages);
  assert.equal([sent.promptTokenCount, sent.candidatesTokenCount], [geminiPromptTokens(request.body), words(REPLY)]);
  assert.equal([reply.usage?.prompt_tokens, reply.usage?.completion_tokens], [sent.promptTokenCount, sent.candidatesTokenCount]);
  const charge = await onlyCharge(g.gw, acct.accountId);
  assertChargedAsSent(charge, sent, MILLI);
  assert.equal([charge.channel, charge.upstreamModel, charge.api, charge.streamed], [`gemini/${FLASH}`, FLASH, 'chat.completions', false]);
  assert.is(charge.upstreamId, last(gemini.responseIds));
});

test('implicit caching: a repeated long prompt is charged with cachedContentTokenCount as cached tokens', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const manual = `Harbour ${nonce()} rules: berths go in order of arrival; ships wait outside the breakwater. `.repeat(50);
  const params = {
    model: 'test/gemini',
    messages: [
      { role: 'system' as const, content: manual },
      { role: 'user' as const, content: 'Which berth?' },
    ],
  };
  await client.chat.completions.create(params);
  const first = last(gemini.usages);
  assert.is(first.cachedContentTokenCount, undefined);
  const again = await client.chat.completions.create(params);
  const sent = last(gemini.usages);
  assert.ok(sent.cachedContentTokenCount > 0 && sent.cachedContentTokenCount <= sent.promptTokenCount, JSON.stringify(sent));
  assert.is(again.usage?.prompt_tokens_details?.cached_tokens, sent.cachedContentTokenCount);
  const l = await settled(g.gw, acct.accountId, 2);
  assertChargedAsSent(l.charges[0]!, first, MILLI);
  assertChargedAsSent(l.charges[1]!, sent, MILLI);
});

test('thinking: reasoning_effort becomes a thinking budget; thoughts charged as completion and reasoning tokens, their text never shown', async () => {
  const acct = await account();
  const reply = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini',
    reasoning_effort: 'low',
    max_completion_tokens: 500,
    messages: [{ role: 'user', content: `Think ${nonce()}` }],
  });
  const config = last(gemini.requests).body.generationConfig as Data;
  assert.ok(config.thinkingConfig.thinkingBudget > 0 && config.thinkingConfig.thinkingBudget <= 500, JSON.stringify(config));
  assert.is(config.maxOutputTokens, 500);
  const sent = last(gemini.usages);
  assert.is(sent.thoughtsTokenCount, GEMINI_THOUGHT_TOKENS);
  assert.is(reply.choices[0]!.message.content, REPLY, 'the thought part is not answer text');
  assert.equal(
    [reply.usage?.completion_tokens, reply.usage?.completion_tokens_details?.reasoning_tokens],
    [words(REPLY) + GEMINI_THOUGHT_TOKENS, GEMINI_THOUGHT_TOKENS],
  );
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), sent, MILLI);

  // A model that thinks by default, streamed: the thought part is the first chunk; nothing of it shows.
  const stream = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini-think',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: `Think aloud ${nonce()}` }],
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.is(text, REPLY);
  const l = await settled(g.gw, acct.accountId, 2);
  assertChargedAsSent(l.charges[1]!, last(gemini.usages), MILLI);
  assert.is(l.charges[1]!.reasoningTokens, GEMINI_THOUGHT_TOKENS);
});

test('streamed chat completions: streamGenerateContent?alt=sse, the text, then the usage; the charge is the last chunk’s usage', async () => {
  const acct = await account();
  const stream = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: `Stream for ${nonce()}` }],
  });
  let text = '';
  let usage: Data | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.is(text, REPLY);
  assert.equal(last(gemini.seen), { model: FLASH, method: 'streamGenerateContent', apiVersion: 'v1beta', alt: 'sse' });
  const sent = last(gemini.usages);
  assert.equal([usage?.prompt_tokens, usage?.completion_tokens], [sent.promptTokenCount, words(REPLY)], 'the last chunk’s counts, not a sum');
  const charge = await onlyCharge(g.gw, acct.accountId);
  assertChargedAsSent(charge, sent, MILLI);
  assert.equal([charge.streamed, charge.aborted, charge.api], [true, false, 'chat.completions']);
});

test('/v1/messages streamed over the Gemini channel: Anthropic events, Gemini’s usage, no thinking text, charged exactly', async () => {
  const acct = await account();
  const stream = anthropicFor(acct).messages.stream({
    model: 'test/gemini-think',
    max_tokens: 300,
    messages: [{ role: 'user', content: `Messages ${nonce()}` }],
  });
  const final = await stream.finalMessage();
  assert.equal(
    final.content.map((b) => b.type),
    ['text'],
  );
  assert.is(final.content[0]?.type === 'text' ? final.content[0].text : '', REPLY);
  const sent = last(gemini.usages);
  assert.equal(
    [final.usage.input_tokens + (final.usage.cache_read_input_tokens ?? 0), final.usage.output_tokens],
    [sent.promptTokenCount, sent.candidatesTokenCount + sent.thoughtsTokenCount],
  );
  const charge = await onlyCharge(g.gw, acct.accountId);
  assertChargedAsSent(charge, sent, MILLI);
  assert.equal([charge.api, charge.streamed], ['messages', true]);
});

test('/v1/responses over the Gemini channel, plain and streamed: Responses events, Gemini’s usage, charged exactly', async () => {
  const acct = await account();
  const plain = await openaiFor(acct).responses.create({ model: 'test/gemini-think', input: `Responses ${nonce()}` });
  assert.is(plain.output_text, REPLY);
  assert.not.ok(JSON.stringify(plain).includes(GEMINI_THOUGHT_SUMMARY), 'no thought text anywhere in the response');
  assert.equal([plain.usage?.input_tokens, plain.usage?.output_tokens], [last(gemini.usages).promptTokenCount, words(REPLY) + GEMINI_THOUGHT_TOKENS]);
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), last(gemini.usages), MILLI);
  const stream = await openaiFor(acct).responses.create({ model: 'test/gemini', input: `Responses ${nonce()}`, stream: true });
  let text = '';
  let usage: Data | undefined;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') usage = event.response.usage as Data;
  }
  assert.is(text, REPLY);
  const sent = last(gemini.usages);
  assert.equal([usage?.input_tokens, usage?.output_tokens], [sent.promptTokenCount, sent.candidatesTokenCount]);
  const l = await settled(g.gw, acct.accountId, 2);
  assertChargedAsSent(l.charges[1]!, sent, MILLI);
  assert.equal([l.charges[1]!.api, l.charges[1]!.streamed], ['responses', true]);
});

test('tools over chat completions: functionDeclarations out, the call back as a tool call (plain and streamed), the result answered', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const question = { role: 'user' as const, content: `Weather in Oslo? ${nonce()}` };
  const plain = await client.chat.completions.create({ model: 'test/gemini', tools: [weatherTool], messages: [question] });
  const body = last(gemini.requests).body as Data;
  assert.equal(body.tools[0].functionDeclarations[0].name, 'get_weather');
  assert.equal(body.tools[0].functionDeclarations[0].parametersJsonSchema ?? body.tools[0].functionDeclarations[0].parameters, weatherSchema);
  const call = plain.choices[0]!.message.tool_calls?.[0];
  assert.is(plain.choices[0]!.finish_reason, 'tool_calls');
  assert.ok(call?.type === 'function' && call.function.name === 'get_weather');
  const args = JSON.parse(call.type === 'function' ? call.function.arguments : '');
  assert.ok(createAjv().validate(weatherSchema, args), JSON.stringify(args));
  assert.is(last(gemini.usages).candidatesTokenCount, jsonPieces(JSON.stringify(args)).length);
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), last(gemini.usages), MILLI);

  const followUp = await client.chat.completions.create({
    model: 'test/gemini',
    tools: [weatherTool],
    messages: [question, plain.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature":4}' }],
  });
  assert.equal([followUp.choices[0]!.message.content, followUp.choices[0]!.finish_reason], [REPLY, 'stop']);
  const contents = last(gemini.requests).body.contents as Data[];
  assert.equal(
    contents.map((c) => c.role),
    ['user', 'model', 'user'],
  );
  assert.equal([contents[1]!.parts[0].functionCall.name, contents[1]!.parts[0].functionCall.args], ['get_weather', args]);
  assert.equal([contents[2]!.parts[0].functionResponse.name, contents[2]!.parts[0].functionResponse.response], ['get_weather', { temperature: 4 }]);

  const forced = await client.chat.completions.create({ model: 'test/gemini', tools: [weatherTool], tool_choice: 'required', messages: [question] });
  assert.equal((last(gemini.requests).body as Data).toolConfig, { functionCallingConfig: { mode: 'ANY' } });
  assert.ok(forced.choices[0]!.message.tool_calls?.length === 1);
  const stream = await client.chat.completions.create({ model: 'test/gemini', tools: [weatherTool], messages: [question], stream: true });
  let streamedArgs = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) streamedArgs += t.function?.arguments ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal([JSON.parse(streamedArgs), finish], [args, 'tool_calls']);
});

test('tools over /v1/messages: a tool_use block, then the tool_result answered', async () => {
  const acct = await account();
  const client = anthropicFor(acct);
  const tools = [{ name: 'get_weather', description: 'Weather for a city', input_schema: weatherSchema as Anthropic.Tool.InputSchema }];
  const question = { role: 'user' as const, content: `Weather in Bergen? ${nonce()}` };
  const first = await client.messages.create({ model: 'test/gemini', max_tokens: 300, tools, messages: [question] });
  assert.is(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.ok(use?.type === 'tool_use' && use.name === 'get_weather' && createAjv().validate(weatherSchema, use.input), JSON.stringify(first.content));
  const second = await client.messages.create({
    model: 'test/gemini',
    max_tokens: 300,
    tools,
    messages: [
      question,
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Rain, 9°C' }] },
    ],
  });
  assert.equal(
    second.content.map((b) => (b.type === 'text' ? b.text : b.type)),
    [REPLY],
  );
  const response = (last(gemini.requests).body.contents as Data[])[2]!.parts[0].functionResponse;
  assert.equal([response.name, JSON.stringify(response.response).includes('Rain, 9°C')], ['get_weather', true]);
  const l = await settled(g.gw, acct.accountId, 2);
  assert.equal([l.charges.length, l.charges[1]!.api], [2, 'messages']);
});

test('Gemini 3: a tool call’s thought signature goes back with the follow-up, so the result is answered', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const question = { role: 'user' as const, content: `Weather in Tromsø? ${nonce()}` };
  const first = await client.chat.completions.create({ model: 'test/gemini-3', tools: [weatherTool], messages: [question] });
  const call = first.choices[0]!.message.tool_calls?.[0];
  assert.ok(call, JSON.stringify(first.choices[0]));
  const sent = last(gemini.requests);
  const followUp = await client.chat.completions
    .create({
      model: 'test/gemini-3',
      tools: [weatherTool],
      messages: [question, first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: 'Snow' }],
    })
    .catch((error: Error) => error);
  const part = (last(gemini.requests).body.contents as Data[])[1]?.parts?.[0];
  assert.ok(!(followUp instanceof Error), `the follow-up failed: ${String(followUp)}; sent back ${JSON.stringify(part)} after ${sent.path}`);
  assert.is(followUp.choices[0]!.message.content, REPLY);
  assert.type(part.thoughtSignature, 'string');
});

test('structured output: response_format json_schema as responseMimeType + responseJsonSchema; the answer is valid JSON for it', async () => {
  const acct = await account();
  const schema = { type: 'object', properties: { berth: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['berth'], additionalProperties: false };
  const reply = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini',
    response_format: { type: 'json_schema', json_schema: { name: 'berth', schema, strict: true } },
    messages: [{ role: 'user', content: `Which berth? ${nonce()}` }],
  });
  const config = last(gemini.requests).body.generationConfig as Data;
  assert.equal([config.responseMimeType, config.responseJsonSchema ?? config.responseSchema], ['application/json', schema]);
  const answer = JSON.parse(reply.choices[0]!.message.content ?? '');
  assert.ok(createAjv().validate(schema, answer), JSON.stringify(answer));
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), last(gemini.usages), MILLI);
});

test('apiVersion: a provider set to v1 calls /v1/models/…', async () => {
  const acct = await account();
  const reply = await openaiFor(acct).chat.completions.create({ model: 'test/gemini-v1', messages: [{ role: 'user', content: `v1 ${nonce()}` }] });
  assert.is(reply.choices[0]!.message.content, REPLY);
  assert.equal(last(gemini.seen), { model: FLASH, method: 'generateContent', apiVersion: 'v1', alt: null });
});

test('embeddings over the Gemini channel: batchEmbedContents, vectors of the asked dimensions, charged as the gateway counts the input', async () => {
  const acct = await account();
  const reply = await openaiFor(acct).embeddings.create({ model: 'test/gemini-embed', input: ['first berth', 'second berth'], dimensions: 12 });
  assert.equal(
    reply.data.map((d) => d.embedding.length),
    [12, 12],
  );
  const request = last(gemini.requests);
  assert.is(request.path, '/v1beta/models/gemini-embedding-001:batchEmbedContents');
  assert.equal(
    (request.body.requests as Data[]).map((r) => [r.content.parts[0].text, r.outputDimensionality]),
    [
      ['first berth', 12],
      ['second berth', 12],
    ],
  );
  const charge = await onlyCharge(g.gw, acct.accountId);
  assert.equal([charge.api, charge.completionTokens, charge.promptTokens], ['embeddings', 0, reply.usage.prompt_tokens]);
  assert.ok(charge.promptTokens > 0);
});

test('the key appears in no log line of this run', () => {
  assert.ok(g.logLines.length > 0, 'the gateway logged');
  for (const line of g.logLines) assert.not.ok(line.includes(KEY), 'the key leaked into the log');
});

test.run();
