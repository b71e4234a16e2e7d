// Azure OpenAI as a native upstream, end to end: the official clients (OpenAI, Anthropic) call a
// real gateway (real HTTP, the run's database) whose models route to a local Azure OpenAI double
// through the `openai` package's AzureOpenAI client. Covered: the client itself accepts the double
// (deployment path, api-version, api-key); plain and streamed chat completions, and the Messages
// and Responses dialects over the Azure channel; tools and structured output; usage exact to the
// token in the ChatCharged event (cached and reasoning tokens included); each kind of error in
// the caller's dialect (content filter, bad key, unknown api-version, 429/5xx) with nothing
// charged; a client that leaves mid-stream; failover from Azure to another channel on 429 and
// 503. The key appears in no error body and no log line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import pino from 'pino';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { AzureOpenAI } from 'openai';
import { settingsFromEnv } from '../src/config.ts';
import { startGateway, type RunningGateway } from '../src/server.ts';
import { priceModel } from '../src/catalogue/index.ts';
import { parseModelsConfig } from '../src/catalogue/models-config.ts';
import { streams } from '../src/ledger/events.ts';
import { countTextTokens } from '../src/upstream/tokenizer.ts';
import { dropSchemas } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { call, eventually, openAccount, writeModelsConfig, type TestAccount } from './support/http.ts';
import { AZURE_API_VERSION, AZURE_FILTERED_WORD, startAzureOpenAIDouble, type AzureOpenAIDouble } from './support/azure-openai-double.ts';
import { OPENAI_REASONING_TOKENS, openaiPromptTokens, startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { wordPieces } from './support/double-http.ts';
import { leaveChatStream } from './support/upstream-gateway.ts';

const KEY = 'azure-SECRET-key-0123456789abcdef0123456789';
const WRONG_KEY = 'azure-WRONG-key-NEVERshown-9876543210fedcba';
const ENV: Record<string, string> = { TG_AZURE_KEY: KEY, TG_AZURE_WRONG_KEY: WRONG_KEY, TG_AZURE_GPT_KEY: 'test-openai-key' };
const REPLY = 'Azure answers from its deployment with a short and predictable reply.';
const TOOL_ARGS = '{"city":"Oslo","unit":"celsius"}';
const DEPLOYMENT = 'gpt-4o-prod';
const AZURE = 'test/azure';
const MILLI = 1200;
const FIRST_BYTE_TIMEOUT_MS = 500;

let azure: AzureOpenAIDouble;
let azureTools: AzureOpenAIDouble;
let gpt: OpenAIDouble;
let gw: RunningGateway;
let stopGateway: () => Promise<void>;
const logLines: string[] = [];

const azureProvider = (endpoint: string, extra: Record<string, unknown> = {}) => ({
  type: 'azure-openai',
  endpoint,
  apiVersion: AZURE_API_VERSION,
  apiKeyEnv: 'TG_AZURE_KEY',
  timeoutMs: 5000,
  ...extra,
});

const MODELS: Record<string, { provider: string; upstreamModel: string } | { channels: { provider: string; upstreamModel: string; id: string }[] }> = {
  [AZURE]: { provider: 'azure', upstreamModel: DEPLOYMENT },
  'test/azure-tools': { provider: 'azureTools', upstreamModel: 'tools-deploy' },
  'test/azure-fixed': { provider: 'azureFixed', upstreamModel: 'ignored-model-name' },
  'test/azure-badkey': { provider: 'azureBadKey', upstreamModel: DEPLOYMENT },
  'test/azure-oldversion': { provider: 'azureOldVersion', upstreamModel: DEPLOYMENT },
  'test/azure-err': { channels: [{ provider: 'azure', upstreamModel: DEPLOYMENT, id: 'azure-err' }] },
  'test/azure-fo': {
    channels: [
      { provider: 'azure', upstreamModel: DEPLOYMENT, id: 'fo-azure' },
      { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fo-gpt' },
    ],
  },
  'test/azure-fo-fast': {
    channels: [
      { provider: 'azureFast', upstreamModel: DEPLOYMENT, id: 'fast-azure' },
      { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fast-gpt' },
    ],
  },
};

/** A gateway like support/http.ts's startGatewayWithRoutes, but logging everything into logLines. */
async function startLoggedGateway(): Promise<void> {
  const path = writeModelsConfig({
    providers: {
      azure: azureProvider(azure.url),
      azureTools: azureProvider(azureTools.url),
      azureFixed: azureProvider(azure.url, { deployment: 'fixed-deploy' }),
      azureFast: azureProvider(azure.url, { firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS }),
      azureBadKey: azureProvider(azure.url, { apiKeyEnv: 'TG_AZURE_WRONG_KEY' }),
      azureOldVersion: azureProvider(azure.url, { apiVersion: '2023-05-15' }),
      gpt: { type: 'openai', baseURL: `${gpt.url}/v1`, apiKeyEnv: 'TG_AZURE_GPT_KEY', timeoutMs: 5000 },
    },
    models: MODELS,
  });
  const settings = {
    ...settingsFromEnv({}),
    upstreamSecret: (variable: string) => ENV[variable],
    port: 0,
    dataDir: '',
    schema: uniqueSchema('az'),
    databaseUrl: process.env.DATABASE_URL || undefined,
    logLevel: 'debug',
    modelsConfig: path,
  };
  gw = await startGateway(settings, pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }));
  for (const modelId of Object.keys(MODELS)) await priceModel(gw.ledger, { modelId, multiplierMilli: MILLI, status: 'ACTIVE', alias: null }, 'admin:test');
  await gw.ledger.caughtUp();
  stopGateway = async () => {
    await gw.close();
    if (settings.databaseUrl) await dropSchemas(settings.databaseUrl, settings.schema);
    rmSync(dirname(path), { recursive: true, force: true });
  };
}

test.before(async () => {
  try {
    azure = await startAzureOpenAIDouble({ apiKey: KEY, reply: REPLY });
    azureTools = await startAzureOpenAIDouble({ apiKey: KEY, toolCall: { arguments: TOOL_ARGS } });
    gpt = await startOpenAIDouble({ reply: 'The other channel answers.' });
    await startLoggedGateway();
  } catch (err) {
    console.error(`could not start the gateway: ${(err as Error).stack}`);
    throw err;
  }
});

test.after(async () => {
  await stopGateway?.();
  for (const d of [azure, azureTools, gpt]) await d?.close();
});

test.before.each(() => {
  azure.setDefault(null);
});

// ---- Helpers --------------------------------------------------------------------------------

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const openaiFor = (acct: TestAccount) => new OpenAI({ apiKey: acct.key, baseURL: gw.baseUrl, maxRetries: 0 });
const anthropicFor = (acct: TestAccount) => new Anthropic({ apiKey: acct.key, baseURL: gw.url, maxRetries: 0 });
const billedAt = (prompt: number, completion: number) => Math.ceil(((prompt + completion) * MILLI) / 1000);

async function ledgerOf(accountId: string): Promise<{ charges: Data[]; releases: Data[]; holds: Data[] }> {
  const events = await gw.ledger.events.readStream(streams.account(accountId), 0);
  const of = (type: string) => events.filter((e) => e.type === type).map((e) => e.data as Data);
  return { charges: of('ChatCharged'), releases: of('ReservationReleased'), holds: of('QuotaReserved') };
}

/** The one charge of an account's one call, once settled. */
async function onlyCharge(accountId: string): Promise<Data> {
  const l = await eventually(
    () => ledgerOf(accountId),
    (x) => x.charges.length + x.releases.length > 0,
  );
  assert.equal([l.holds.length, l.charges.length, l.releases.length], [1, 1, 0], 'one hold, charged');
  return l.charges[0]!;
}

/** The charge's usage equals the usage the double sent, to the token, and the price follows from it (the ledger leaves out zero details). */
function assertChargedAsSent(charge: Data, sent: Data): void {
  assert.equal(
    [charge.promptTokens, charge.completionTokens, charge.cachedTokens ?? 0, charge.reasoningTokens ?? 0],
    [sent.prompt_tokens, sent.completion_tokens, sent.prompt_tokens_details.cached_tokens, sent.completion_tokens_details.reasoning_tokens],
  );
  assert.is(charge.billed, billedAt(charge.promptTokens, charge.completionTokens));
}

function assertNoKey(text: string): void {
  assert.not.ok(text.includes(KEY), 'the key leaked');
  assert.not.ok(text.includes(WRONG_KEY), 'the wrong key leaked');
}

const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;

// ---- The double as the official client sees it ----------------------------------------------

test('the AzureOpenAI client itself calls the double: deployment path, api-version, api-key; Azure fields and usage details', async () => {
  const client = new AzureOpenAI({ endpoint: azure.url, apiKey: KEY, apiVersion: AZURE_API_VERSION, deployment: 'direct-deploy', maxRetries: 0 });
  const calls = azure.calls;
  const reply = (await client.chat.completions.create({
    model: 'unused',
    messages: [{ role: 'user', content: `Hello ${nonce()}` }],
    max_completion_tokens: 100,
  })) as unknown as Data;
  assert.is(azure.calls, calls + 1, 'the client reached the double');
  const request = last(azure.requests);
  assert.is(request.path, '/openai/deployments/direct-deploy/chat/completions');
  assert.is(request.headers['api-key'], KEY);
  assert.is(request.headers.authorization, undefined);
  assert.equal(last(azure.seen), { deployment: 'direct-deploy', apiVersion: AZURE_API_VERSION });
  assert.is(reply.choices[0].message.content, REPLY);
  assert.ok(Array.isArray(reply.prompt_filter_results) && reply.choices[0].content_filter_results, 'Azure fields');
  assert.is(reply.usage.prompt_tokens_details.cached_tokens, 0);
  assert.is(reply.usage.completion_tokens_details.reasoning_tokens, 0);

  const chunks: Data[] = [];
  const stream = await client.chat.completions.create({
    model: 'unused',
    messages: [{ role: 'user', content: `Hello ${nonce()}` }],
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) chunks.push(chunk as unknown as Data);
  assert.equal([chunks[0]!.id, chunks[0]!.choices], ['', []], 'Azure first chunk: prompt filter results only');
  assert.ok(chunks[0]!.prompt_filter_results);
  assert.is(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), REPLY);
  assert.equal(last(chunks).usage, last(azure.usages));

  const wrongClient = new AzureOpenAI({ endpoint: azure.url, apiKey: 'nope', apiVersion: AZURE_API_VERSION, maxRetries: 0 });
  const wrong = (await wrongClient.models.list().then(
    () => null,
    (error: unknown) => error,
  )) as { status?: number } | null;
  assert.is(wrong?.status, 401);
});

test('models config: an azure-openai provider needs an endpoint or a resource, an apiVersion and its key variable', () => {
  const config = (provider: Record<string, unknown>) => ({
    providers: { az: { type: 'azure-openai', apiVersion: AZURE_API_VERSION, apiKeyEnv: 'AZ_KEY', ...provider } },
    models: { m: { provider: 'az', upstreamModel: 'd' } },
  });
  assert.ok(parseModelsConfig(config({ resource: 'my-resource' })));
  assert.ok(parseModelsConfig(config({ endpoint: 'https://my-resource.openai.azure.com', deployment: 'd1' })));
  assert.throws(() => parseModelsConfig(config({})), /provider az \(azure-openai\) needs endpoint/);
  assert.throws(() => parseModelsConfig(config({ endpoint: 'https://x.openai.azure.com', apiVersion: undefined })), /needs apiVersion/);
  assert.throws(() => parseModelsConfig(config({ resource: 'r', apiKey: KEY })), /must NOT have additional properties/);
});

// ---- Calls through the gateway ------------------------------------------------------------

test('plain chat: sent to the deployment with the api-version and api-key; usage exact in the charge, cached and reasoning included', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const client = openaiFor(acct);
  const params = {
    model: AZURE,
    reasoning_effort: 'high' as const,
    messages: [
      { role: 'system' as const, content: `You answer for harbour ${nonce()}.` },
      { role: 'user' as const, content: 'Which berth is free?' },
    ],
  };
  const first = await client.chat.completions.create(params);
  assert.is(first.choices[0]!.message.content, REPLY);
  assert.is(first.model, AZURE);
  const request = last(azure.requests);
  assert.is(request.path, `/openai/deployments/${DEPLOYMENT}/chat/completions`);
  assert.equal(last(azure.seen), { deployment: DEPLOYMENT, apiVersion: AZURE_API_VERSION });
  assert.is(request.headers['api-key'], KEY);
  assert.is(request.headers.authorization, undefined, 'no Bearer token to Azure');
  assert.is(request.body.reasoning_effort, 'high');
  const sent = last(azure.usages);
  const prompt = openaiPromptTokens(request.body);
  const reasoning = OPENAI_REASONING_TOKENS.high!;
  assert.equal(
    [sent.prompt_tokens, sent.completion_tokens, sent.completion_tokens_details.reasoning_tokens],
    [prompt, reasoning + wordPieces(REPLY).length, reasoning],
  );
  const charge = await onlyCharge(acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.channel, charge.upstreamModel, charge.api, charge.streamed], [`azure/${DEPLOYMENT}`, DEPLOYMENT, 'chat.completions', false]);
  assert.match(charge.upstreamId, /^chatcmpl-/);

  // The same prompt again: Azure reports it cached, inside prompt_tokens, and the charge says so.
  await client.chat.completions.create(params);
  const again = last(azure.usages);
  assert.is(again.prompt_tokens_details.cached_tokens, prompt);
  const l = await eventually(
    () => ledgerOf(acct.accountId),
    (x) => x.charges.length === 2,
  );
  assertChargedAsSent(l.charges[1]!, again);
});

test('a provider with a fixed deployment sends every call there, whatever the upstream model', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  await openaiFor(acct).chat.completions.create({ model: 'test/azure-fixed', messages: [{ role: 'user', content: `Hi ${nonce()}` }] });
  assert.is(last(azure.requests).path, '/openai/deployments/fixed-deploy/chat/completions');
});

test('streamed chat completions: text, then the usage; the charge is the usage Azure streamed', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const stream = await openaiFor(acct).chat.completions.create({
    model: AZURE,
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
  const sent = last(azure.usages);
  assert.equal([usage?.prompt_tokens, usage?.completion_tokens], [sent.prompt_tokens, sent.completion_tokens]);
  assert.ok(last(azure.requests).body.stream_options, 'the gateway asked Azure for the usage');
  const charge = await onlyCharge(acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.streamed, charge.aborted, charge.api], [true, false, 'chat.completions']);
});

test('/v1/messages streamed over the Azure channel: Anthropic events, the usage Azure counted, charged exactly', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const stream = anthropicFor(acct).messages.stream({ model: AZURE, max_tokens: 300, messages: [{ role: 'user', content: `Messages ${nonce()}` }] });
  const final = await stream.finalMessage();
  assert.is(final.content[0]?.type === 'text' ? final.content[0].text : '', REPLY);
  const sent = last(azure.usages);
  assert.equal(
    [final.usage.input_tokens + (final.usage.cache_read_input_tokens ?? 0), final.usage.output_tokens],
    [sent.prompt_tokens, sent.completion_tokens],
  );
  const charge = await onlyCharge(acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.api, charge.streamed, charge.channel], ['messages', true, `azure/${DEPLOYMENT}`]);
});

test('/v1/responses streamed over the Azure channel: Responses events, the usage Azure counted, charged exactly', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const stream = await openaiFor(acct).responses.create({ model: AZURE, input: `Responses ${nonce()}`, stream: true });
  let text = '';
  let usage: Data | undefined;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') usage = event.response.usage as Data;
  }
  assert.is(text, REPLY);
  const sent = last(azure.usages);
  assert.equal([usage?.input_tokens, usage?.output_tokens], [sent.prompt_tokens, sent.completion_tokens]);
  const charge = await onlyCharge(acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.api, charge.streamed], ['responses', true]);
});

test('tools: a tool call comes back whole, plain and streamed, and is charged as Azure counted it', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const client = openaiFor(acct);
  const tools = [
    {
      type: 'function' as const,
      function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
    },
  ];
  const messages = [{ role: 'user' as const, content: `Weather in Oslo? ${nonce()}` }];
  const plain = await client.chat.completions.create({ model: 'test/azure-tools', tools, messages });
  const toolCall = plain.choices[0]!.message.tool_calls?.[0];
  assert.equal(
    [plain.choices[0]!.finish_reason, toolCall?.type === 'function' && toolCall.function.name, toolCall?.type === 'function' && toolCall.function.arguments],
    ['tool_calls', 'get_weather', TOOL_ARGS],
  );
  assert.equal(last(azureTools.requests).body.tools, tools);
  const first = await onlyCharge(acct.accountId);
  assertChargedAsSent(first, last(azureTools.usages));

  const stream = await client.chat.completions.create({ model: 'test/azure-tools', tools, messages, stream: true });
  let args = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) args += t.function?.arguments ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal([args, finish], [TOOL_ARGS, 'tool_calls']);
  const l = await eventually(
    () => ledgerOf(acct.accountId),
    (x) => x.charges.length === 2,
  );
  assertChargedAsSent(l.charges[1]!, last(azureTools.usages));
});

test('structured output: response_format reaches Azure and the answer is JSON valid against the schema', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const schema = { type: 'object', properties: { berth: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['berth'], additionalProperties: false };
  const response_format = { type: 'json_schema' as const, json_schema: { name: 'berth', schema, strict: true } };
  const reply = await openaiFor(acct).chat.completions.create({
    model: AZURE,
    response_format,
    messages: [{ role: 'user', content: `Which berth? ${nonce()}` }],
  });
  assert.equal(last(azure.requests).body.response_format, response_format);
  const answer = JSON.parse(reply.choices[0]!.message.content ?? '') as { berth: number };
  assert.ok(Number.isInteger(answer.berth) && answer.berth >= 1 && answer.berth <= 9, JSON.stringify(answer));
  assertChargedAsSent(await onlyCharge(acct.accountId), last(azure.usages));
});

// ---- Errors ---------------------------------------------------------------------------------

test("Azure's content filter: a 400 in the caller's dialect naming the filter, tried once, nothing charged", async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const calls = azure.calls;
  const chat = await call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: 'test/azure-fo', messages: [{ role: 'user', content: `Tell me about ${AZURE_FILTERED_WORD}` }] },
  });
  assert.is(chat.status, 400, chat.text);
  assert.is(chat.json.error.code, 'upstream_rejected_request');
  assert.match(chat.json.error.message, /Azure OpenAI's content filter \(flagged: hate\)/);
  assert.is(azure.calls, calls + 1, 'not retried, and no failover to the other channel');
  assertNoKey(chat.text);

  const messages = await call(gw, '/v1/messages', {
    key: acct.key,
    headers: { 'anthropic-version': '2023-06-01' },
    body: { model: AZURE, max_tokens: 100, stream: true, messages: [{ role: 'user', content: `Tell me about ${AZURE_FILTERED_WORD}` }] },
  });
  assert.is(messages.status, 400, messages.text);
  assert.is(messages.json.type, 'error');
  assert.is(messages.json.error.type, 'invalid_request_error');
  assert.match(messages.json.error.message, /content filter/);
  const l = await ledgerOf(acct.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 2]);
  assert.ok(
    l.releases.every((r) => r.reason === 'invalid_request'),
    JSON.stringify(l.releases),
  );
});

test('a wrong key and an api-version the resource does not serve: 502 naming no key, nothing charged', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  for (const model of ['test/azure-badkey', 'test/azure-oldversion']) {
    const r = await call(gw, '/v1/chat/completions', { key: acct.key, body: { model, messages: [{ role: 'user', content: 'hello' }] } });
    assert.is(r.status, 502, r.text);
    assert.is(r.json.error.code, 'upstream_error');
    assertNoKey(r.text);
  }
  assert.equal(last(azure.seen).apiVersion, '2023-05-15');
  const l = await ledgerOf(acct.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 2]);
});

test('429 and 5xx on the only channel: 502 in the caller’s dialect (OpenAI and Anthropic), nothing charged', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  for (const status of [429, 500, 503]) {
    azure.script({ status });
    const r = await call(gw, '/v1/chat/completions', { key: acct.key, body: { model: 'test/azure-err', messages: [{ role: 'user', content: 'hi' }] } });
    assert.is(r.status, 502, `${status}: ${r.text}`);
    assertNoKey(r.text);
  }
  azure.script({ status: 503 });
  const m = await call(gw, '/v1/messages', {
    key: acct.key,
    headers: { 'anthropic-version': '2023-06-01' },
    body: { model: 'test/azure-err', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
  });
  assert.is(m.status, 502, m.text);
  assert.is(m.json.type, 'error');
  const l = await ledgerOf(acct.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 4]);
  assert.equal(
    l.releases.map((r) => r.failovers?.[0]?.error),
    ['http_429', 'http_500', 'http_503', 'http_503'],
  );
});

test('an error event mid-stream after content: the stream ends with an error, nothing charged', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  azure.script({ errorEventAfter: 4 });
  const r = await call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: 'test/azure-err', stream: true, messages: [{ role: 'user', content: 'hi' }] },
  });
  assert.is(r.status, 200);
  assert.match(r.text, /"error"/);
  assertNoKey(r.text);
  const l = await eventually(
    () => ledgerOf(acct.accountId),
    (x) => x.releases.length > 0,
  );
  assert.equal([l.charges.length, l.releases.length], [0, 1]);
});

// ---- A client that leaves ---------------------------------------------------------------------

test('a client that leaves mid-stream pays the prompt and what was streamed (aborted); the Azure stream is dropped', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const abandoned = azure.abandoned;
  azure.script({ chunkDelayMs: 40 });
  const seen = await leaveChatStream(gw, acct.key, { model: AZURE, stream: true, messages: [{ role: 'user', content: `Long story ${nonce()}` }] }, 3);
  const charge = await onlyCharge(acct.accountId);
  assert.equal([charge.aborted, charge.streamed, charge.channel], [true, true, `azure/${DEPLOYMENT}`]);
  const all = countTextTokens(REPLY);
  assert.ok(charge.completionTokens >= countTextTokens(seen) && charge.completionTokens < all, `charged ${charge.completionTokens} of ${all}; saw ${seen}`);
  assert.ok(charge.promptTokens > 0);
  assert.is(charge.billed, billedAt(charge.promptTokens, charge.completionTokens));
  await eventually(
    async () => azure.abandoned,
    (n) => n > abandoned,
  );
  assert.ok(azure.abandoned > abandoned, 'the upstream stream was closed');
});

// ---- Failover ---------------------------------------------------------------------------------

for (const status of [429, 503]) {
  test(`failover: Azure answering ${status} hands the call to the next channel under the same hold; one charge names both`, async () => {
    const acct = await openAccount(gw, { quota: 1_000_000 });
    azure.script({ status });
    const reply = await openaiFor(acct).chat.completions.create({ model: 'test/azure-fo', messages: [{ role: 'user', content: `Failover ${nonce()}` }] });
    assert.is(reply.choices[0]!.message.content, 'The other channel answers.');
    const charge = await onlyCharge(acct.accountId);
    assert.is(charge.channel, 'fo-gpt');
    assert.equal(charge.failovers, [{ channel: 'fo-azure', upstreamModel: DEPLOYMENT, error: `http_${status}` }]);
  });
}

test('failover of a stream: Azure refusing with 429 before any content, the other channel streams it', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  azure.script({ status: 429 });
  const stream = await openaiFor(acct).chat.completions.create({
    model: 'test/azure-fo',
    stream: true,
    messages: [{ role: 'user', content: `Stream fo ${nonce()}` }],
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.is(text, 'The other channel answers.');
  const charge = await onlyCharge(acct.accountId);
  assert.equal([charge.channel, charge.failovers?.[0]?.error], ['fo-gpt', 'http_429']);
});

const failoverCases: [string, Record<string, unknown>, string][] = [
  ['no first byte in time', { firstByteDelayMs: FIRST_BYTE_TIMEOUT_MS * 3 }, 'timeout'],
  ['a body that does not parse', { garbage: true }, 'malformed_reply'],
  ['a stream cut before any content', { cutAfterEvents: 2 }, 'und_err_socket'],
];
for (const [what, fault, error] of failoverCases) {
  test(`failover: Azure with ${what} is retriable; the stream goes to the next channel, the charge names the failure`, async () => {
    const acct = await openAccount(gw, { quota: 1_000_000 });
    azure.script(fault);
    const started = Date.now();
    const r = await call(gw, '/v1/chat/completions', {
      key: acct.key,
      body: { model: 'test/azure-fo-fast', messages: [{ role: 'user', content: `Fault ${nonce()}` }], ...('cutAfterEvents' in fault && { stream: true }) },
    });
    assert.is(r.status, 200, r.text);
    const streamed = [...r.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('');
    assert.is('cutAfterEvents' in fault ? streamed : r.json.choices[0].message.content, 'The other channel answers.');
    const charge = await onlyCharge(acct.accountId);
    assert.is(charge.channel, 'fast-gpt');
    assert.equal(charge.failovers, [{ channel: 'fast-azure', upstreamModel: DEPLOYMENT, error }]);
    assert.ok(Date.now() - started < FIRST_BYTE_TIMEOUT_MS * 3 + 4000, 'failed over promptly');
  });
}

// ---- Last: nothing logged the key -------------------------------------------------------------

test('the key appears in no log line of the whole run', () => {
  assert.ok(logLines.length > 0, 'the gateway logged');
  for (const line of logLines) assertNoKey(line);
});

test.run();
