// Vertex AI as a native upstream, end to end: Google's Gemini models (`vertex`, through
// @google/genai in its Vertex mode) and Anthropic's Claude models (`vertex-anthropic`, rawPredict)
// in one project and location, authorized by google-auth-library from credentials the models
// config reads from an environment variable (workload identity federation, whose token exchange
// the Vertex double answers). First the official clients against the double itself
// (@google/genai, @anthropic-ai/vertex-sdk); then a real gateway (real HTTP, the run's database)
// called by the official openai and Anthropic clients: usage exact to the token in the charge,
// Messages passed through to Claude on Vertex (cache_control and count_tokens included), a
// translated chat with tools, one token exchange for many calls, refused credentials naming no
// secret and charging nothing, failover from Vertex on 429.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { GoogleAuth, JWT } from 'google-auth-library';
import { googleAuthOptions, parseCredentials } from '../src/upstream/vertex/auth.ts';
import OpenAI from 'openai';
import { parseModelsConfig } from '../src/catalogue/models-config.ts';
import { anthropicVertex } from './support/test-tools.ts';
import { eventually, openAccount, type TestAccount } from './support/http.ts';
import { VERTEX_LOCATION, VERTEX_PROJECT, startVertexDouble, type VertexDouble } from './support/vertex-double.ts';
import { assertChargedAsSent, ledgerOf, onlyCharge, settled, startLoggedGateway, type LoggedGateway } from './support/upstream-gateway.ts';
import { startGeminiDouble, type GeminiDouble } from './support/gemini-double.ts';

const REPLY = 'Vertex answers from its publisher models with a short and predictable reply.';
const GEMINI = 'gemini-2.5-flash';
const CLAUDE = 'claude-sonnet-4-5@20250929';
const MILLI = 1100;
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

let vertex: VertexDouble;
let backup: GeminiDouble;
let g: LoggedGateway;
let credentialsJson: string;

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const account = () => openAccount(g.gw, { quota: 10_000_000 });
const openaiFor = (acct: TestAccount) => new OpenAI({ apiKey: acct.key, baseURL: g.gw.baseUrl, maxRetries: 0 });
const anthropicFor = (acct: TestAccount) => new Anthropic({ apiKey: acct.key, baseURL: g.gw.url, maxRetries: 0 });
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;

test.before(async () => {
  vertex = await startVertexDouble({ reply: REPLY });
  backup = await startGeminiDouble({ apiKey: 'backup-gemini-key', reply: 'The backup channel answers.' });
  credentialsJson = JSON.stringify(vertex.credentials());
  const common = { project: VERTEX_PROJECT, location: VERTEX_LOCATION, credentialsEnv: 'TG_VERTEX_CREDENTIALS', baseURL: vertex.url, timeoutMs: 5000 };
  g = await startLoggedGateway(
    {
      vertex: { type: 'vertex', ...common },
      claude: { type: 'vertex-anthropic', ...common },
      refused: { type: 'vertex', ...common, credentialsEnv: 'TG_VERTEX_REFUSED' },
      backup: { type: 'gemini', apiKeyEnv: 'TG_BACKUP_KEY', baseURL: backup.url, timeoutMs: 5000 },
    },
    {
      'test/vertex-gemini': { provider: 'vertex', upstreamModel: GEMINI },
      'test/vertex-claude': { provider: 'claude', upstreamModel: CLAUDE },
      'test/vertex-refused': { provider: 'refused', upstreamModel: GEMINI },
      'test/vertex-embed': { provider: 'vertex', upstreamModel: 'gemini-embedding-001' },
      'test/vertex-embed-2': { provider: 'vertex', upstreamModel: 'gemini-embedding-2-preview' },
      'test/vertex-fo': {
        channels: [
          { provider: 'vertex', upstreamModel: GEMINI, id: 'fo-vertex' },
          { provider: 'backup', upstreamModel: GEMINI, id: 'fo-backup' },
        ],
      },
    },
    {
      TG_VERTEX_CREDENTIALS: credentialsJson,
      TG_VERTEX_REFUSED: JSON.stringify(vertex.credentials('a-subject-token-the-pool-refuses')),
      TG_BACKUP_KEY: 'backup-gemini-key',
    },
    MILLI,
  );
});

test.after(async () => {
  await g?.stop();
  await vertex?.close();
  await backup?.close();
});

test('the double speaks Vertex to the official clients: @google/genai in Vertex mode and @anthropic-ai/vertex-sdk', async () => {
  const credentials = vertex.credentials() as never;
  const genai = new GoogleGenAI({
    vertexai: true,
    project: VERTEX_PROJECT,
    location: VERTEX_LOCATION,
    googleAuthOptions: { credentials, scopes: [SCOPE] },
    httpOptions: { baseUrl: vertex.url },
  });
  const reply = await genai.models.generateContent({ model: GEMINI, contents: 'Say hello' });
  assert.is(reply.text, REPLY);
  assert.ok((reply.usageMetadata?.promptTokenCount ?? 0) > 0);
  assert.equal(last(vertex.seen), { publisher: 'google', model: GEMINI, method: 'generateContent' });

  const claude = await anthropicVertex({
    region: VERTEX_LOCATION,
    projectId: VERTEX_PROJECT,
    baseURL: `${vertex.url}/v1`,
    googleAuth: new GoogleAuth({ credentials, scopes: [SCOPE] }),
    maxRetries: 0,
  });
  const message = await claude.messages.create({ model: CLAUDE, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] });
  assert.is(message.type, 'message');
  assert.ok(message.usage.input_tokens > 0);
  assert.equal(last(vertex.seen), { publisher: 'anthropic', model: CLAUDE, method: 'rawPredict' });
  const counted = await claude.messages.countTokens({ model: CLAUDE, messages: [{ role: 'user', content: 'Say hello' }] });
  assert.ok(counted.input_tokens > 0);
});

test('models config: a vertex provider needs a project and a location; a credentials variable that holds no JSON stops the start', () => {
  const config = (provider: Record<string, unknown>) => ({
    providers: { v: { type: 'vertex-anthropic', project: VERTEX_PROJECT, location: 'europe-west1', ...provider } },
    models: { m: { provider: 'v', upstreamModel: CLAUDE } },
  });
  assert.ok(parseModelsConfig(config({})));
  assert.ok(parseModelsConfig(config({ credentialsEnv: 'GOOGLE_CREDS', structuredOutputModels: ['claude-sonnet-4-5'] })));
  assert.throws(() => parseModelsConfig(config({ project: undefined })), /project/);
  // A service account key (what most operators put in the variable) becomes a JWT client with Vertex's scope.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = {
    type: 'service_account',
    project_id: VERTEX_PROJECT,
    private_key_id: 'k1',
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    client_email: `tollgate@${VERTEX_PROJECT}.iam.gserviceaccount.com`,
  };
  const options = googleAuthOptions(parseCredentials(JSON.stringify(key), 'GOOGLE_CREDS'), VERTEX_PROJECT);
  assert.instance(options.authClient, JWT);
  assert.is((options.authClient as JWT).email, key.client_email);
  assert.equal(options.scopes, [SCOPE]);
  assert.throws(() => parseCredentials('not json', 'GOOGLE_CREDS'), /GOOGLE_CREDS must hold Google credentials as JSON/);
  assert.throws(() => parseModelsConfig(config({ apiKeyEnv: 'X' })), /additional properties/);
});

test('Gemini on Vertex: a chat completion, whole and streamed, charged the usageMetadata Vertex sent', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const whole = await client.chat.completions.create({
    model: 'test/vertex-gemini',
    messages: [{ role: 'user', content: `Which berth is free at ${nonce()}?` }],
  });
  assert.is(whole.choices[0]!.message.content, REPLY);
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), last(vertex.gemini.usages), MILLI);

  const stream = await client.chat.completions.create({
    model: 'test/vertex-gemini',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: `And the next one at ${nonce()}?` }],
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.is(text, REPLY);
  const charges = (await settled(g.gw, acct.accountId, 2)).charges;
  assertChargedAsSent(last(charges), last(vertex.gemini.usages), MILLI);
  assert.equal(last(vertex.seen), { publisher: 'google', model: GEMINI, method: 'streamGenerateContent' });
});

test('Claude on Vertex: /v1/messages passes through (cache_control kept, model in the path), charged as Anthropic counts, count_tokens answered', async () => {
  const acct = await account();
  const client = anthropicFor(acct);
  const system = [
    {
      type: 'text' as const,
      text: `You are the harbour master of port ${nonce()}. ${'Keep every answer short. '.repeat(200)}`,
      cache_control: { type: 'ephemeral' as const },
    },
  ];
  const first = await client.messages.create({ model: 'test/vertex-claude', max_tokens: 256, system, messages: [{ role: 'user', content: 'Hello' }] });
  assert.is(first.model, 'test/vertex-claude');
  assert.ok((first.usage.cache_creation_input_tokens ?? 0) > 0, 'the prefix was written to the cache');
  const sent = last(vertex.anthropic.requests).body as Data;
  assert.is(sent.model, CLAUDE);
  assert.equal(sent.system, system);
  const second = await client.messages.create({ model: 'test/vertex-claude', max_tokens: 256, system, messages: [{ role: 'user', content: 'Hello' }] });
  assert.ok((second.usage.cache_read_input_tokens ?? 0) > 0, 'the prefix was read from the cache');

  const charges = (await settled(g.gw, acct.accountId, 2)).charges;
  for (const [charge, reply] of [
    [charges[0]!, first],
    [charges[1]!, second],
  ] as const) {
    const u = reply.usage;
    assert.is(charge.promptTokens, u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0));
    assert.is(charge.completionTokens, u.output_tokens);
    assert.is(charge.cachedTokens ?? 0, u.cache_read_input_tokens ?? 0);
    assert.is(charge.cacheWriteTokens ?? 0, u.cache_creation_input_tokens ?? 0);
  }

  const streamed = client.messages.stream({ model: 'test/vertex-claude', max_tokens: 256, messages: [{ role: 'user', content: `Stream it ${nonce()}` }] });
  const final = await streamed.finalMessage();
  assert.ok(final.content.length > 0);
  assert.equal(last(vertex.seen), { publisher: 'anthropic', model: CLAUDE, method: 'streamRawPredict' });
  const third = last((await settled(g.gw, acct.accountId, 3)).charges);
  assert.is(third.completionTokens, final.usage.output_tokens);

  const counted = await client.messages.countTokens({ model: 'test/vertex-claude', messages: [{ role: 'user', content: 'How many tokens is this?' }] });
  assert.ok(counted.input_tokens > 0);
  assert.equal(last(vertex.seen), { publisher: 'anthropic', model: 'count-tokens', method: 'rawPredict' });
});

test('Claude on Vertex from a chat completions caller: translated, a tool call comes back and the follow-up with its result works', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const tools = [
    {
      type: 'function' as const,
      function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    },
  ];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: `Weather in Oslo ${nonce()}?` }];
  const asked = await client.chat.completions.create({ model: 'test/vertex-claude', messages, tools, tool_choice: 'required' });
  const call = asked.choices[0]!.message.tool_calls?.[0];
  assert.ok(call && call.type === 'function' && call.function.name === 'get_weather', JSON.stringify(asked.choices[0]));
  const answered = await client.chat.completions.create({
    model: 'test/vertex-claude',
    tools,
    messages: [...messages, asked.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"temp":3}' }],
  });
  assert.ok(typeof answered.choices[0]!.message.content === 'string');
  const results = (last(vertex.anthropic.requests).body as Data).messages.at(-1).content;
  assert.equal(results[0].type, 'tool_result');
  assert.is((await settled(g.gw, acct.accountId, 2)).charges.length, 2);
});

test('Gemini on Vertex from a Responses caller, and Claude on Vertex with structured output from a chat completions caller', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  const response = await client.responses.create({ model: 'test/vertex-gemini', input: `Responses ${nonce()}` });
  assert.is(response.output_text, REPLY);
  assertChargedAsSent(await onlyCharge(g.gw, acct.accountId), last(vertex.gemini.usages), MILLI);

  const schema = { type: 'object', properties: { berth: { type: 'integer' } }, required: ['berth'], additionalProperties: false };
  const reply = await client.chat.completions.create({
    model: 'test/vertex-claude',
    response_format: { type: 'json_schema', json_schema: { name: 'berth', schema, strict: true } },
    messages: [{ role: 'user', content: `Which berth? ${nonce()}` }],
  });
  // The Vertex version form counts as the model's name: native structured output, not a forced tool.
  const sent = last(vertex.anthropic.requests).body as Data;
  assert.equal(sent.output_config?.format, { type: 'json_schema', schema });
  assert.is(typeof JSON.parse(reply.choices[0]!.message.content ?? '').berth, 'number');
});

test('a Messages caller that leaves a Claude-on-Vertex stream pays what was streamed; the upstream stream is dropped', async () => {
  const acct = await account();
  const leave = new AbortController();
  // Claude on Vertex takes its time between events: the caller leaves mid-reply.
  vertex.anthropic.script({ chunkDelayMs: 40 });
  const res = await fetch(`${g.gw.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': acct.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test/vertex-claude', max_tokens: 512, stream: true, messages: [{ role: 'user', content: `A long story ${nonce()}` }] }),
    signal: leave.signal,
  });
  const abandoned = vertex.abandoned;
  let deltas = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      deltas += (
        Buffer.from(chunk)
          .toString('utf8')
          .match(/"text_delta"/g) ?? []
      ).length;
      if (deltas >= 2) {
        leave.abort();
        break;
      }
    }
  } catch (err) {
    if (!leave.signal.aborted) throw err;
  }
  const charge = await onlyCharge(g.gw, acct.accountId);
  assert.equal([charge.aborted, charge.streamed], [true, true]);
  assert.ok(charge.completionTokens > 0 && charge.promptTokens > 0);
  await eventually(
    async () => vertex.abandoned,
    (n) => n > abandoned,
  );
});

test('embeddings on Vertex: one text a request (:predict, or :embedContent for the newer models), each counted by Vertex and charged so', async () => {
  const acct = await account();
  const client = openaiFor(acct);
  for (const [model, method] of [
    ['test/vertex-embed', 'predict'],
    ['test/vertex-embed-2', 'embedContent'],
  ] as const) {
    const before = vertex.embeddingTokens.length;
    const input = [`first harbour ${nonce()}`, 'second harbour, a longer text than the first one'];
    const reply = await client.embeddings.create({ model, input, dimensions: 64, encoding_format: 'float' });
    assert.equal(
      reply.data.map((d) => d.embedding.length),
      [64, 64],
    );
    const counted = vertex.embeddingTokens.slice(before);
    assert.is(counted.length, 2);
    assert.is(reply.usage.prompt_tokens, counted[0]! + counted[1]!);
    assert.equal(last(vertex.seen).method, method);
  }
  const charges = (await settled(g.gw, acct.accountId, 2)).charges;
  assert.equal(
    charges.map((c) => c.api),
    ['embeddings', 'embeddings'],
  );
});

test('one token exchange serves many calls: the bearer token is cached and refreshed by the library', () => {
  // Both providers share nothing but the credentials; each exchanged once for every call above.
  assert.ok(vertex.tokenExchanges >= 1);
  assert.ok(vertex.tokenExchanges <= 4, `${vertex.tokenExchanges} exchanges for ${vertex.seen.length} calls`);
});

test('refused credentials: a 502 that names no secret, nothing charged', async () => {
  const acct = await account();
  const error = await openaiFor(acct)
    .chat.completions.create({ model: 'test/vertex-refused', messages: [{ role: 'user', content: 'Hello' }] })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.instance(error, OpenAI.APIError);
  if (!(error instanceof OpenAI.APIError)) return;
  assert.is(error.status, 502);
  const body = JSON.stringify(error.error);
  assert.not.match(body, 'a-subject-token-the-pool-refuses');
  assert.not.match(body, vertex.url.replace('http://', ''));
  const l = await settled(g.gw, acct.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 1]);
});

test('a 429 from Vertex fails over to the next channel; the credentials and tokens appear in no log line', async () => {
  const acct = await account();
  vertex.script({ status: 429 });
  const reply = await openaiFor(acct).chat.completions.create({ model: 'test/vertex-fo', messages: [{ role: 'user', content: `Fail over ${nonce()}` }] });
  assert.is(reply.choices[0]!.message.content, 'The backup channel answers.');
  const charge = await onlyCharge(g.gw, acct.accountId);
  assert.is(charge.channel, 'fo-backup');
  const logs = g.logLines.join('\n');
  const subject = JSON.parse(credentialsJson).credential_source.file as string;
  assert.not.match(logs, subject);
  assert.not.match(logs, /ya29\./);
  assert.ok((await ledgerOf(g.gw, acct.accountId)).charges.length === 1);
});

test.run();
