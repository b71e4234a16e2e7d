// AWS Bedrock as a native upstream, end to end: the official clients (OpenAI, Anthropic) call a
// real gateway (real HTTP, the run's database) whose models route to a local Bedrock double
// through @aws-sdk/client-bedrock-runtime (SigV4 checked for real by the double). Covered: the
// models config of a `bedrock` provider; plain and streamed chat completions, the Messages and
// Responses dialects over the Bedrock channel; tools and a follow-up with the tool result;
// structured output; reasoning_effort as Anthropic's thinking; usage exact to the token in the
// ChatCharged event (prompt = inputTokens + cacheReadInputTokens + cacheWriteInputTokens); a
// Messages caller's cache_control as Bedrock cache points (written, then read); temporary
// credentials (a session token) and the SDK's own credential chain; Titan embeddings. Errors, failover, a client
// that leaves and the logs: upstream-bedrock-errors.test.ts.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { createAjv } from '../src/ajv.ts';
import { parseModelsConfig } from '../src/catalogue/models-config.ts';
import { eventually, openAccount } from './support/http.ts';
import { BedrockRuntimeClient, InvokeModelCommand } from '@aws-sdk/client-bedrock-runtime';
import {
  BEDROCK_ACCESS_KEY_ID,
  BEDROCK_SECRET_ACCESS_KEY,
  BEDROCK_DEFAULT_REASONING,
  bedrockCachePrefixes,
  bedrockJsonTokens,
  bedrockPromptTokens,
  bedrockTextTokens,
} from './support/bedrock-double.ts';
import {
  MODEL,
  NOVA,
  REPLY,
  SESSION_TOKEN,
  assertChargedAsSent,
  assertNoSecret,
  ledgerOf,
  onlyCharge,
  startBedrockWorld,
  type BedrockWorld,
} from './support/bedrock-gateway.ts';

let w: BedrockWorld;

test.before(async () => {
  w = await startBedrockWorld();
});

test.after(async () => {
  await w?.stop();
});

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
const SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 2 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const TOOLS = [{ type: 'function' as const, function: { name: 'get_forecast', description: 'The forecast for a city', parameters: SCHEMA } }];

test('models config: a bedrock provider needs a region, and both key variables or neither', () => {
  const config = (provider: Record<string, unknown>) => ({
    providers: { aws: { type: 'bedrock', region: 'us-east-1', ...provider } },
    models: { m: { provider: 'aws', upstreamModel: MODEL } },
  });
  assert.ok(
    parseModelsConfig(config({ accessKeyIdEnv: 'K', secretAccessKeyEnv: 'S', sessionTokenEnv: 'T', endpoint: 'https://vpce.example', timeoutMs: 1000 })),
  );
  assert.ok(parseModelsConfig(config({})), 'the SDK credential chain');
  assert.throws(() => parseModelsConfig(config({ region: undefined })), /provider aws \(bedrock\) needs region/);
  assert.throws(() => parseModelsConfig(config({ accessKeyIdEnv: 'K' })), /secretAccessKeyEnv/);
  assert.throws(() => parseModelsConfig(config({ secretAccessKey: 'inline' })), /must NOT have additional properties/);
});

test('plain chat: Converse on the model id, signed with the key; reply and usage exact in the charge', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const reply = await w.openai(acct).chat.completions.create({
    model: 'test/bedrock',
    temperature: 0.3,
    messages: [
      { role: 'system', content: `You answer for harbour ${nonce()}.` },
      { role: 'user', content: 'Which berth is free?' },
    ],
  });
  assert.equal([reply.choices[0]!.message.content, reply.choices[0]!.finish_reason, reply.model], [REPLY, 'stop', 'test/bedrock']);
  const request = last(w.bedrock.requests);
  assert.equal(last(w.bedrock.seen), { modelId: MODEL, operation: 'Converse' });
  assert.is(request.path, `/model/${encodeURIComponent(MODEL)}/converse`);
  assert.match(String(request.headers.authorization), new RegExp(`Credential=${BEDROCK_ACCESS_KEY_ID}/\\d{8}/us-east-1/bedrock/aws4_request`));
  assert.equal(request.body.system, [{ text: request.body.system[0].text }]);
  assert.match(request.body.system[0].text, /^You answer for harbour/);
  assert.equal(request.body.messages, [{ role: 'user', content: [{ text: 'Which berth is free?' }] }]);
  assert.is(request.body.inferenceConfig.temperature, 0.3);
  assert.ok(Number.isInteger(request.body.inferenceConfig.maxTokens), 'the output cap goes out');
  const sent = last(w.bedrock.usages);
  const prompt = bedrockPromptTokens(request.body);
  assert.equal([sent.inputTokens, sent.outputTokens], [prompt, bedrockTextTokens(REPLY)]);
  assert.equal([reply.usage?.prompt_tokens, reply.usage?.completion_tokens], [prompt, bedrockTextTokens(REPLY)]);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.channel, charge.upstreamModel, charge.api, charge.streamed], [`bedrock/${MODEL}`, MODEL, 'chat.completions', false]);
  assert.match(String(charge.upstreamId), /^[0-9a-f-]{36}$/, "Bedrock's request id");
});

test('streamed chat completions: ConverseStream text, then the usage; the charge is the metadata usage', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const stream = await w.openai(acct).chat.completions.create({
    model: 'test/bedrock',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: `Stream for ${nonce()}` }],
  });
  let text = '';
  let usage: Data | undefined;
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal([text, finish], [REPLY, 'stop']);
  assert.equal(last(w.bedrock.seen), { modelId: MODEL, operation: 'ConverseStream' });
  const sent = last(w.bedrock.usages);
  assert.equal([usage?.prompt_tokens, usage?.completion_tokens], [sent.inputTokens, sent.outputTokens]);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.streamed, charge.aborted, charge.api], [true, false, 'chat.completions']);
});

test('/v1/messages streamed over Bedrock: Anthropic events and usage, charged exactly', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const final = await w
    .anthropic(acct)
    .messages.stream({ model: 'test/bedrock', max_tokens: 300, messages: [{ role: 'user', content: `Messages ${nonce()}` }] })
    .finalMessage();
  assert.is(final.content[0]?.type === 'text' ? final.content[0].text : '', REPLY);
  assert.is(final.stop_reason, 'end_turn');
  const sent = last(w.bedrock.usages);
  assert.equal([final.usage.input_tokens, final.usage.output_tokens], [sent.inputTokens, sent.outputTokens]);
  assert.is(last(w.bedrock.requests).body.inferenceConfig.maxTokens, 300);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assertChargedAsSent(charge, sent);
  assert.equal([charge.api, charge.streamed], ['messages', true]);
});

test('/v1/responses streamed over Bedrock: Responses events and usage, charged exactly', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const stream = await w.openai(acct).responses.create({ model: 'test/bedrock', input: `Responses ${nonce()}`, stream: true });
  let text = '';
  let usage: Data | undefined;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') usage = event.response.usage as Data;
  }
  assert.is(text, REPLY);
  const sent = last(w.bedrock.usages);
  assert.equal([usage?.input_tokens, usage?.output_tokens], [sent.inputTokens, sent.outputTokens]);
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), sent);
});

test('tools: a toolUse comes back as a tool call (plain and streamed); the follow-up sends toolUse and toolResult back', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const client = w.openai(acct);
  const messages = [{ role: 'user' as const, content: `Forecast for Oslo? ${nonce()}` }];
  const plain = await client.chat.completions.create({ model: 'test/bedrock', tools: TOOLS, tool_choice: 'auto', messages });
  const call = plain.choices[0]!.message.tool_calls?.[0];
  assert.ok(call?.type === 'function', JSON.stringify(plain.choices[0]));
  assert.equal([plain.choices[0]!.finish_reason, call.function.name], ['tool_calls', 'get_forecast']);
  const args = JSON.parse(call.function.arguments) as Data;
  assert.ok(createAjv().validate(SCHEMA, args), call.function.arguments);
  const sentTools = last(w.bedrock.requests).body.toolConfig;
  assert.equal(sentTools, {
    tools: [{ toolSpec: { name: 'get_forecast', description: 'The forecast for a city', inputSchema: { json: SCHEMA } } }],
    toolChoice: { auto: {} },
  });
  assert.is(last(w.bedrock.usages).outputTokens, bedrockJsonTokens(call.function.arguments));
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), last(w.bedrock.usages));

  const followUp = await client.chat.completions.create({
    model: 'test/bedrock',
    tools: TOOLS,
    messages: [...messages, plain.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"sky":"clear","wind":3}' }],
  });
  assert.equal([followUp.choices[0]!.message.content, followUp.choices[0]!.finish_reason], [REPLY, 'stop']);
  const body = last(w.bedrock.requests).body;
  assert.equal(body.messages[1], { role: 'assistant', content: [{ toolUse: { toolUseId: call.id, name: 'get_forecast', input: args } }] });
  assert.equal(body.messages[2], { role: 'user', content: [{ toolResult: { toolUseId: call.id, content: [{ json: { sky: 'clear', wind: 3 } }] } }] });

  const stream = await client.chat.completions.create({ model: 'test/bedrock', tools: TOOLS, tool_choice: 'required', messages, stream: true });
  let streamedArgs = '';
  let name = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
      streamedArgs += t.function?.arguments ?? '';
      name ||= t.function?.name ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(last(w.bedrock.requests).body.toolConfig.toolChoice, { any: {} });
  assert.equal([name, finish], ['get_forecast', 'tool_calls']);
  assert.ok(createAjv().validate(SCHEMA, JSON.parse(streamedArgs)), streamedArgs);
  const l = await eventually(
    () => ledgerOf(w.gw, acct.accountId),
    (x) => x.charges.length === 3,
  );
  assertChargedAsSent(l.charges[2]!, last(w.bedrock.usages));
});

test('structured output: response_format becomes outputConfig.textFormat; the answer parses and fits the schema', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const reply = await w.openai(acct).chat.completions.create({
    model: 'test/bedrock',
    response_format: { type: 'json_schema', json_schema: { name: 'trip', schema: SCHEMA, strict: true } },
    messages: [{ role: 'user', content: `Plan a trip ${nonce()}` }],
  });
  const format = last(w.bedrock.requests).body.outputConfig.textFormat;
  assert.equal([format.type, format.structure.jsonSchema.name, JSON.parse(format.structure.jsonSchema.schema)], ['json_schema', 'trip', SCHEMA]);
  const text = reply.choices[0]!.message.content ?? '';
  assert.ok(createAjv().validate(SCHEMA, JSON.parse(text)), text);
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), last(w.bedrock.usages));
});

test("reasoning_effort on an Anthropic model is Anthropic's thinking: reasoning billed, never shown; none on Nova", async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const client = w.openai(acct);
  const messages = [{ role: 'user' as const, content: `Think about it ${nonce()}` }];
  const reply = await client.chat.completions.create({ model: 'test/bedrock', reasoning_effort: 'high', max_completion_tokens: 8000, messages });
  assert.is(reply.choices[0]!.message.content, REPLY);
  assert.not.ok(JSON.stringify(reply).includes(BEDROCK_DEFAULT_REASONING), 'the reasoning is not shown');
  const thinking = last(w.bedrock.requests).body.additionalModelRequestFields?.thinking;
  assert.is(thinking?.type, 'enabled');
  assert.ok(thinking.budget_tokens >= 1024 && thinking.budget_tokens < 8000, JSON.stringify(thinking));
  const sent = last(w.bedrock.usages);
  assert.is(sent.outputTokens, bedrockTextTokens(BEDROCK_DEFAULT_REASONING) + bedrockTextTokens(REPLY));
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), sent);

  await client.chat.completions.create({ model: 'test/bedrock-nova', reasoning_effort: 'high', max_completion_tokens: 8000, messages });
  assert.equal(last(w.bedrock.seen).modelId, NOVA);
  assert.is(last(w.bedrock.requests).body.additionalModelRequestFields, undefined);
});

test('caching from /v1/messages: cache_control becomes cache points; written, then read; the charge splits them exactly', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const client = w.anthropic(acct);
  const system = [{ type: 'text' as const, text: `A long and stable harbour handbook, edition ${nonce()}.`, cache_control: { type: 'ephemeral' as const } }];
  const first = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'Where is berth 4?', cache_control: { type: 'ephemeral' as const } }] }];
  const one = await client.messages.create({ model: 'test/bedrock', max_tokens: 200, system, messages: first });
  const body1 = last(w.bedrock.requests).body;
  assert.equal(body1.system.at(-1), { cachePoint: { type: 'default' } });
  assert.equal(body1.messages[0].content.at(-1), { cachePoint: { type: 'default' } });
  const prefixes = bedrockCachePrefixes(body1);
  assert.is(prefixes.length, 2);
  const sent1 = last(w.bedrock.usages);
  assert.equal([sent1.cacheWriteInputTokens, sent1.cacheReadInputTokens], [prefixes[1], 0]);
  assert.equal([one.usage.cache_creation_input_tokens, one.usage.cache_read_input_tokens, one.usage.input_tokens], [prefixes[1], 0, sent1.inputTokens]);
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), sent1);

  const two = await client.messages.create({
    model: 'test/bedrock',
    max_tokens: 200,
    system,
    messages: [...first, { role: 'assistant', content: REPLY }, { role: 'user', content: 'And berth 5?' }],
  });
  const body2 = last(w.bedrock.requests).body;
  const sent2 = last(w.bedrock.usages);
  assert.equal([sent2.cacheReadInputTokens, sent2.cacheWriteInputTokens], [prefixes[1], 0], 'the prefix is read');
  assert.is(sent2.inputTokens, bedrockPromptTokens(body2) - prefixes[1]!, 'inputTokens is only what follows');
  assert.equal([two.usage.cache_read_input_tokens, two.usage.input_tokens], [prefixes[1], sent2.inputTokens]);
  const l = await eventually(
    () => ledgerOf(w.gw, acct.accountId),
    (x) => x.charges.length === 2,
  );
  assertChargedAsSent(l.charges[1]!, sent2);
  assert.equal([l.charges[1]!.cachedTokens, l.charges[1]!.promptTokens], [prefixes[1], bedrockPromptTokens(body2)]);
});

test('chat completions send no cache points (the wire has no cache marks)', async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  await w.openai(acct).chat.completions.create({ model: 'test/bedrock', messages: [{ role: 'user', content: `No marks ${nonce()}` }] });
  assert.not.ok(JSON.stringify(last(w.bedrock.requests).body).includes('cachePoint'));
  const sent = last(w.bedrock.usages);
  assert.is(sent.cacheReadInputTokens, undefined, 'no cache fields without a cache point');
  assertChargedAsSent(await onlyCharge(w.gw, acct.accountId), sent);
});

test('Titan embeddings: InvokeModel one text a request (signed), each counting its tokens; the charge is their sum; token ids refused', async () => {
  // The double straight through the official client first.
  const client = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: w.bedrock.url,
    credentials: { accessKeyId: BEDROCK_ACCESS_KEY_ID, secretAccessKey: BEDROCK_SECRET_ACCESS_KEY },
    maxAttempts: 1,
  });
  const direct = await client.send(
    new InvokeModelCommand({
      modelId: 'amazon.titan-embed-text-v2:0',
      contentType: 'application/json',
      body: JSON.stringify({ inputText: 'Oslo', dimensions: 256 }),
    }),
  );
  const parsed = JSON.parse(Buffer.from(direct.body).toString('utf8')) as Data;
  assert.equal([parsed.embedding.length, parsed.inputTextTokenCount], [256, last(w.bedrock.embeddingTokens)]);

  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const before = w.bedrock.embeddingTokens.length;
  const input = [`harbour ${nonce()}`, 'a second and somewhat longer text about the harbour'];
  const reply = await w.openai(acct).embeddings.create({ model: 'test/bedrock-titan', input, dimensions: 512, encoding_format: 'float' });
  assert.equal(
    reply.data.map((d) => [d.index, d.embedding.length]),
    [
      [0, 512],
      [1, 512],
    ],
  );
  const counted = w.bedrock.embeddingTokens.slice(before);
  assert.is(counted.length, 2);
  assert.is(reply.usage.prompt_tokens, counted[0]! + counted[1]!);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assert.equal([charge.api, charge.promptTokens, charge.completionTokens], ['embeddings', counted[0]! + counted[1]!, 0]);
  assert.equal(last(w.bedrock.seen), { modelId: 'amazon.titan-embed-text-v2:0', operation: 'InvokeModel' });

  const refused = await w
    .openai(acct)
    .embeddings.create({ model: 'test/bedrock-titan', input: [[1, 2, 3]] })
    .then(
      () => undefined,
      (e: unknown) => e as { status?: number },
    );
  assert.is(refused?.status, 400);
});

test("temporary credentials carry their session token; without key variables the SDK's own chain signs", async () => {
  const acct = await openAccount(w.gw, { quota: 10_000_000 });
  const session = await w.openai(acct).chat.completions.create({ model: 'test/bedrock-session', messages: [{ role: 'user', content: `Temp ${nonce()}` }] });
  assert.is(session.choices[0]!.message.content, REPLY);
  assert.is(last(w.temporary.requests).headers['x-amz-security-token'], SESSION_TOKEN);
  const chain = await w.openai(acct).chat.completions.create({ model: 'test/bedrock-chain', messages: [{ role: 'user', content: `Chain ${nonce()}` }] });
  assert.is(chain.choices[0]!.message.content, REPLY);
  assert.match(String(last(w.bedrock.requests).headers.authorization), new RegExp(`Credential=${BEDROCK_ACCESS_KEY_ID}/`));
  const l = await eventually(
    () => ledgerOf(w.gw, acct.accountId),
    (x) => x.charges.length === 2,
  );
  assert.equal(
    l.charges.map((c) => c.channel),
    [`bedrockSession/${MODEL}`, `bedrockChain/${MODEL}`],
  );
  for (const line of w.logLines) assertNoSecret(line);
});

test.run();
