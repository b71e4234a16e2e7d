// Structured output as client libraries ask for it (the openai SDK's parse helpers with a zod
// schema, as the Vercel AI SDK's object output and LangChain's withStructuredOutput send it):
// chat completions and Responses through every kind of upstream (the simulated one, an
// OpenAI-compatible one, OpenAI's own, Anthropic with and without native structured outputs),
// plain and streamed. The parsed object must validate against the schema, and the ledger must
// charge exactly the usage the reply reports.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { z } from 'zod';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { createAjv } from '../src/ajv.ts';
import { messagesRequest } from '../src/upstream/anthropic/translate.ts';
import type { ChatCall } from '../src/upstream/port.ts';
import { countTextTokens } from '../src/upstream/tokenizer.ts';
import { ledgerView, openAccount, startGatewayWithRoutes, type TestAccount } from './support/http.ts';
import type { TestGateway } from './support/gateway.ts';
import { startUpstreamDouble, type UpstreamDouble } from './support/upstream-double.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';

type Json = Record<string, unknown>;

const CalendarEvent = z.object({
  name: z.string(),
  date: z.string(),
  attendees: z.array(z.object({ who: z.string(), role: z.enum(['host', 'guest']) })),
  budget: z.number().nullable(),
  confirmed: z.boolean(),
});
const RESPONSE_FORMAT = zodResponseFormat(CalendarEvent, 'calendar_event');
const TEXT_FORMAT = zodTextFormat(CalendarEvent, 'calendar_event');
const SCHEMA = RESPONSE_FORMAT.json_schema.schema as Json;
const PROMPT = 'Alice and Bob are going to a science fair on Friday. Extract the event.';

const validate = createAjv({ strict: false }).compile(SCHEMA);
function assertValid(value: unknown, where: string) {
  assert.ok(validate(value), `${where}: ${JSON.stringify(value)} does not match the schema: ${JSON.stringify(validate.errors)}`);
}

/** Each pairing: a priced public model and the upstream behind it. */
const MODELS = {
  simulated: 'so/simulated',
  compatible: 'so/compatible',
  openai: 'so/openai',
  claudeNative: 'so/claude-native',
  claudeTool: 'so/claude-tool',
} as const;
const ALL = Object.values(MODELS);

let gw: TestGateway;
let compatible: UpstreamDouble;
let openaiUp: OpenAIDouble;
let claude: AnthropicDouble;

test.before(async () => {
  compatible = await startUpstreamDouble();
  openaiUp = await startOpenAIDouble({ apiKey: 'so-openai-key' });
  claude = await startAnthropicDouble({ apiKey: 'so-anthropic-key' });
  gw = await startGatewayWithRoutes(
    {
      'so-compatible': { type: 'openai-compatible', baseURL: compatible.url, timeoutMs: 10_000 },
      'so-openai': { type: 'openai', baseURL: `${openaiUp.url}/v1`, apiKeyEnv: 'SO_OPENAI_KEY', timeoutMs: 10_000 },
      'so-anthropic': { type: 'anthropic', baseURL: claude.url, apiKeyEnv: 'SO_ANTHROPIC_KEY', timeoutMs: 10_000 },
    },
    {
      [MODELS.simulated]: { provider: 'simulated', upstreamModel: 'gen-6-luna', multiplierMilli: 1000 },
      [MODELS.compatible]: { provider: 'so-compatible', upstreamModel: 'double-model', multiplierMilli: 1000 },
      [MODELS.openai]: { provider: 'so-openai', upstreamModel: 'gpt-5-mini', multiplierMilli: 1000 },
      // On the default list of models with native structured outputs, and not.
      [MODELS.claudeNative]: { provider: 'so-anthropic', upstreamModel: 'claude-sonnet-4-5-20250929', multiplierMilli: 1000 },
      [MODELS.claudeTool]: { provider: 'so-anthropic', upstreamModel: 'claude-opus-4-1', multiplierMilli: 1000 },
    },
    { env: { SO_OPENAI_KEY: 'so-openai-key', SO_ANTHROPIC_KEY: 'so-anthropic-key' } },
  );
});
test.after(async () => {
  await gw?.stop();
  await compatible?.close();
  await openaiUp?.close();
  await claude?.close();
});

async function account(): Promise<{ acct: TestAccount; client: OpenAI }> {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  return { acct, client: new OpenAI({ apiKey: acct.key, baseURL: `${gw.url}/v1`, maxRetries: 0 }) };
}

/** The account's one charge equals the usage the caller was shown (multiplier 1.000). */
async function assertChargedAsReported(accountId: string, prompt: number, completion: number, where: string) {
  const view = await ledgerView(gw, accountId);
  assert.is(view.chatCharges.length, 1, `${where}: one charge`);
  const charge = view.chatCharges[0]!.data;
  assert.is(charge.promptTokens, prompt, `${where}: prompt tokens charged`);
  assert.is(charge.completionTokens, completion, `${where}: completion tokens charged`);
  assert.is(charge.billed, prompt + completion, `${where}: billed`);
  assert.is(view.row.reserved, 0, `${where}: no hold left`);
}

/** What the Anthropic double was last asked. */
const lastClaudeBody = () => claude.requests.at(-1)!.body;

function assertClaudeWasAskedFor(model: string, where: string) {
  if (model !== MODELS.claudeNative && model !== MODELS.claudeTool) return;
  const body = lastClaudeBody();
  if (model === MODELS.claudeNative) {
    assert.equal(body.output_config, { format: { type: 'json_schema', schema: SCHEMA } }, `${where}: native structured output`);
    assert.is(body.tool_choice, undefined, where);
  } else {
    assert.is(body.output_config, undefined, `${where}: no native structured output on this model`);
    assert.equal(body.tool_choice, { type: 'tool', name: 'calendar_event' }, `${where}: the answer tool is forced`);
    assert.equal((body.tools as Json[]).at(-1)!.input_schema, SCHEMA, where);
  }
}

for (const model of ALL) {
  test(`chat.completions.parse through ${model}: message.parsed matches the schema, charged as reported`, async () => {
    const { acct, client } = await account();
    const completion = await client.chat.completions.parse({
      model,
      messages: [{ role: 'user', content: PROMPT }],
      response_format: RESPONSE_FORMAT,
    });
    const choice = completion.choices[0]!;
    assert.is(choice.finish_reason, 'stop');
    assert.ok(choice.message.parsed, `${model}: parsed (content ${JSON.stringify(choice.message.content)})`);
    assertValid(choice.message.parsed, model);
    assert.equal(JSON.parse(choice.message.content!), choice.message.parsed);
    assert.equal(choice.message.tool_calls ?? [], [], 'no tool call shown');
    assertClaudeWasAskedFor(model, model);
    const usage = completion.usage!;
    await assertChargedAsReported(acct.accountId, usage.prompt_tokens, usage.completion_tokens, model);
  });

  test(`chat.completions.stream through ${model}: the streamed JSON parses and matches the schema, charged as reported`, async () => {
    const { acct, client } = await account();
    const stream = client.chat.completions.stream({
      model,
      messages: [{ role: 'user', content: PROMPT }],
      response_format: RESPONSE_FORMAT,
      stream_options: { include_usage: true },
    });
    let deltas = 0;
    stream.on('content.delta', () => deltas++);
    const final = await stream.finalChatCompletion();
    const message = final.choices[0]!.message;
    assert.ok(deltas >= 1, 'the JSON arrives as content');
    assert.ok(message.parsed, `${model}: parsed (content ${JSON.stringify(message.content)})`);
    assertValid(message.parsed, `${model} streamed`);
    assertClaudeWasAskedFor(model, `${model} streamed`);
    const usage = final.usage!;
    await assertChargedAsReported(acct.accountId, usage.prompt_tokens, usage.completion_tokens, `${model} streamed`);
  });

  test(`responses.parse through ${model}: output_parsed matches the schema, charged as reported`, async () => {
    const { acct, client } = await account();
    const response = await client.responses.parse({ model, input: PROMPT, text: { format: TEXT_FORMAT } });
    assert.is(response.status, 'completed');
    assert.ok(response.output_parsed, `${model}: output_parsed (output_text ${JSON.stringify(response.output_text)})`);
    assertValid(response.output_parsed, `${model} responses`);
    assert.ok(
      response.output.every((item) => item.type !== 'function_call'),
      'no function call shown',
    );
    assertClaudeWasAskedFor(model, `${model} responses`);
    const usage = response.usage!;
    await assertChargedAsReported(acct.accountId, usage.input_tokens, usage.output_tokens, `${model} responses`);
  });

  test(`responses.stream through ${model}: the final output_parsed matches the schema, charged as reported`, async () => {
    const { acct, client } = await account();
    const stream = client.responses.stream({ model, input: PROMPT, text: { format: TEXT_FORMAT } });
    let deltas = 0;
    stream.on('response.output_text.delta', () => deltas++);
    const response = await stream.finalResponse();
    assert.ok(deltas >= 1, 'the JSON arrives as output text');
    assert.ok(response.output_parsed, `${model}: output_parsed (output_text ${JSON.stringify(response.output_text)})`);
    assertValid(response.output_parsed, `${model} responses streamed`);
    assertClaudeWasAskedFor(model, `${model} responses streamed`);
    const usage = response.usage!;
    await assertChargedAsReported(acct.accountId, usage.input_tokens, usage.output_tokens, `${model} responses streamed`);
  });

  test(`json_object through ${model}: the content is a JSON object`, async () => {
    const { acct, client } = await account();
    const completion = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: `${PROMPT} Answer in JSON.` }],
      response_format: { type: 'json_object' },
    });
    const content = completion.choices[0]!.message.content!;
    const value: unknown = JSON.parse(content);
    assert.type(value, 'object');
    assert.ok(value !== null && !Array.isArray(value), `${model}: ${content}`);
    const usage = completion.usage!;
    await assertChargedAsReported(acct.accountId, usage.prompt_tokens, usage.completion_tokens, `${model} json_object`);
  });
}

test('the simulated upstream: the same request gets the same JSON, another request other JSON', async () => {
  const { client } = await account();
  const ask = (content: string) =>
    client.chat.completions.parse({ model: MODELS.simulated, messages: [{ role: 'user', content }], response_format: RESPONSE_FORMAT });
  const [a, b, c] = await Promise.all([ask(PROMPT), ask(PROMPT), ask('A different request about a dinner party.')]);
  assert.is(a.choices[0]!.message.content, b.choices[0]!.message.content);
  assert.is.not(a.choices[0]!.message.content, c.choices[0]!.message.content);
  assertValid(c.choices[0]!.message.parsed, 'other request');
});

test('the simulated upstream: JSON cut at max_tokens ends with finish_reason length and is charged as counted', async () => {
  const { acct, client } = await account();
  const ask = (cap?: number) =>
    client.chat.completions.create({
      model: MODELS.simulated,
      messages: [{ role: 'user', content: PROMPT }],
      response_format: RESPONSE_FORMAT,
      ...(cap && { max_completion_tokens: cap }),
    });
  const whole = (await ask()).choices[0]!.message.content!;
  const completion = await ask(5);
  const choice = completion.choices[0]!;
  assert.is(choice.finish_reason, 'length');
  assert.is(completion.usage!.completion_tokens, 5);
  const cut = choice.message.content!;
  assert.ok(cut.startsWith('{') && whole.startsWith(cut) && cut.length < whole.length, `${cut} is the start of ${whole}`);
  assert.throws(() => JSON.parse(cut));
  const charges = (await ledgerView(gw, acct.accountId)).chatCharges.map((e) => e.data);
  assert.equal(
    charges.map((c) => c.completionTokens),
    [countTextTokens(whole), 5],
    'each charged as the simulated upstream counted its text',
  );
});

test('a schema the simulated upstream cannot honour is a 400 in the caller dialect, and nothing is charged', async () => {
  const { acct, client } = await account();
  const error = await client.chat.completions
    .create({
      model: MODELS.simulated,
      messages: [{ role: 'user', content: PROMPT }],
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'huge', schema: { type: 'object', properties: { s: { type: 'string', minLength: 1_000_000 } }, required: ['s'] } },
      },
    })
    .then(
      () => null,
      (e: unknown) => e,
    );
  assert.instance(error, OpenAI.BadRequestError);
  assert.match((error as InstanceType<typeof OpenAI.BadRequestError>).message, /response_format 'huge'.*minLength/);
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 0);
  assert.is(view.releases.length, 1, 'the hold is released');
  assert.is(view.row.quota_used, 0);
  assert.is(view.row.reserved, 0);
});

test('a malformed response_format or text.format is a 400 naming the field, before anything is held', async () => {
  const { acct, client } = await account();
  const refused = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.BadRequestError>,
    );
  const messages = [{ role: 'user' as const, content: PROMPT }];
  const cases: [Promise<unknown>, string][] = [
    [client.chat.completions.create({ model: MODELS.simulated, messages, response_format: { type: 'json_schema' } as never }), 'response_format.json_schema'],
    [
      client.chat.completions.create({ model: MODELS.simulated, messages, response_format: { type: 'json_schema', json_schema: { name: 'has spaces' } } }),
      'response_format.json_schema.name',
    ],
    [client.chat.completions.create({ model: MODELS.simulated, messages, response_format: { type: 'yaml' } as never }), 'response_format.type'],
    [client.responses.create({ model: MODELS.simulated, input: PROMPT, text: { format: { type: 'json_schema', name: 'x' } as never } }), 'text.format.schema'],
  ];
  // Every refusal is caught at once: the calls run together, and one that fails before the loop
  // reaches it would otherwise be an unhandled rejection that ends the test process.
  const outcomes = cases.map(([promise, param]) => [refused(promise), param] as const);
  for (const [outcome, param] of outcomes) {
    const error = await outcome;
    assert.instance(error, OpenAI.BadRequestError, param);
    assert.is(error!.param, param);
  }
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.reservations.length, 0, 'nothing was held');
});

test('anthropic: a schema that is not strict goes as a forced tool even to a model with native structured outputs', async () => {
  const { acct, client } = await account();
  // Anthropic refuses objects that are not closed in output_config.format; a tool's input_schema takes them.
  const schema = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city', 'days'] };
  const completion = await client.chat.completions.create({
    model: MODELS.claudeNative,
    messages: [{ role: 'user', content: 'Plan three days in Lyon.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'trip', schema } },
  });
  const body = lastClaudeBody();
  assert.is(body.output_config, undefined);
  assert.equal(body.tool_choice, { type: 'tool', name: 'trip' });
  const value: unknown = JSON.parse(completion.choices[0]!.message.content!);
  assert.ok(createAjv({ strict: false }).validate(schema, value), JSON.stringify(value));
  assert.is(completion.choices[0]!.finish_reason, 'stop');
  await assertChargedAsReported(acct.accountId, completion.usage!.prompt_tokens, completion.usage!.completion_tokens, 'not strict');
});

test('/v1/messages with output_config.format: answered with schema-valid JSON, translated (simulated) and passed through (Anthropic)', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const anthropic = new Anthropic({ apiKey: acct.key, baseURL: gw.url, maxRetries: 0 });
  for (const model of [MODELS.simulated, MODELS.claudeNative]) {
    const message = await anthropic.messages.create({
      model,
      max_tokens: 1024,
      messages: [{ role: 'user', content: PROMPT }],
      output_config: { format: { type: 'json_schema', schema: SCHEMA } },
    });
    const text = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    assertValid(JSON.parse(text), `messages ${model}`);
    assert.is(message.stop_reason, 'end_turn');
  }
  assert.equal(lastClaudeBody().output_config, { format: { type: 'json_schema', schema: SCHEMA } }, 'passed through as the caller wrote it');
});

// ---- The translation's request shapes -------------------------------------------------------

const call = (extra: Partial<ChatCall>): ChatCall => ({
  upstreamModel: 'claude-opus-4-1',
  messages: [{ role: 'user', content: PROMPT }],
  maxTokens: 8192,
  params: { response_format: RESPONSE_FORMAT },
  signal: new AbortController().signal,
  ...extra,
});
const weather = { type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

test('translation: with the caller own tools any tool must be called (theirs or the answer), and thinking stays off', () => {
  const { body, answerTool } = messagesRequest(call({ tools: [weather], reasoningEffort: 'high' }), false, []);
  assert.equal(body.tool_choice, { type: 'any' });
  assert.equal(
    (body.tools as Json[]).map((t) => t.name),
    ['weather', 'calendar_event'],
  );
  assert.is(body.thinking, undefined, 'Anthropic refuses thinking with a forced tool');
  assert.equal(answerTool, { name: 'calendar_event', wrapped: false });
  const named = messagesRequest(call({ tools: [{ ...weather, function: { ...weather.function, name: 'calendar_event' } }] }), false, []);
  assert.is(named.answerTool!.name, 'calendar_event_answer', 'the answer tool never takes a caller tool name');
});

test('translation: native structured output keeps thinking; a schema whose root is no object is carried as {value}', () => {
  const native = messagesRequest(call({ upstreamModel: 'claude-haiku-4-5', reasoningEffort: 'high' }), false, ['claude-haiku-4-5']);
  assert.equal(native.body.output_config, { format: { type: 'json_schema', schema: SCHEMA } });
  assert.ok(native.body.thinking, 'thinking is on');
  assert.is(native.answerTool, undefined);
  const list = { type: 'array', items: { type: 'string' } };
  const wrapped = messagesRequest(call({ params: { response_format: { type: 'json_schema', json_schema: { name: 'names', schema: list } } } }), false, []);
  assert.equal((wrapped.body.tools as Json[])[0]!.input_schema, { type: 'object', properties: { value: list }, required: ['value'] });
  assert.equal(wrapped.answerTool, { name: 'names', wrapped: true });
});

test.run();
