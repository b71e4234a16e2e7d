// The Bedrock double as the official client sees it: @aws-sdk/client-bedrock-runtime's
// BedrockRuntimeClient sends Converse and ConverseStream to it, signed with SigV4, over HTTP/2 (its
// default handler) and HTTP/1.1 (NodeHttpHandler), and reads every answer with its own
// deserializers: plain text with exact usage, a stream's events (text in word pieces, metadata
// usage), tools and a follow-up with the tool result, structured output, prompt caching (written,
// then read; inputTokens without either), reasoning, maxTokens, stop sequences, filters; errors as
// the SDK's typed exceptions; a wrong secret, key or region refused by the signature check;
// exceptions and cuts inside a stream; a client that leaves.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  BedrockRuntimeClient,
  BedrockRuntimeServiceException,
  ConverseCommand,
  ConverseStreamCommand,
  ModelStreamErrorException,
  ThrottlingException,
  ValidationException,
  type ConverseCommandInput,
  type ConverseStreamOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { createAjv } from '../src/ajv.ts';
import {
  BEDROCK_ACCESS_KEY_ID,
  BEDROCK_DEFAULT_REASONING,
  BEDROCK_FILTERED_WORD,
  BEDROCK_GUARDRAIL_MESSAGE,
  BEDROCK_REASONING_TOKENS,
  BEDROCK_SECRET_ACCESS_KEY,
  BEDROCK_STATUS_ERRORS,
  bedrockCachePrefixes,
  bedrockJsonTokens,
  bedrockPromptTokens,
  bedrockTextTokens,
  startBedrockDouble,
  type BedrockDouble,
} from './support/bedrock-double.ts';
import { wordPieces } from './support/double-http.ts';

const MODEL = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
const REPLY = 'Bedrock answers through the Converse API with a short and predictable reply.';
const SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 2 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const TOOLS = { tools: [{ toolSpec: { name: 'get_forecast', description: 'The forecast for a city', inputSchema: { json: SCHEMA } } }] };

const KEYS = { accessKeyId: BEDROCK_ACCESS_KEY_ID, secretAccessKey: BEDROCK_SECRET_ACCESS_KEY };
let double: BedrockDouble;
let h2: BedrockRuntimeClient;
let h1: BedrockRuntimeClient;

const clientFor = (extra: Partial<ConstructorParameters<typeof BedrockRuntimeClient>[0]> = {}) =>
  new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: double.url,
    credentials: KEYS,
    maxAttempts: 1,
    ...extra,
  });

test.before(async () => {
  double = await startBedrockDouble({ reply: REPLY });
  h2 = clientFor();
  h1 = clientFor({ requestHandler: new NodeHttpHandler() });
});

test.after(async () => {
  for (const client of [h1, h2]) client?.destroy();
  await double?.close();
});

type Json = Record<string, any>;
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
const ask = (text: string): ConverseCommandInput => ({ modelId: MODEL, messages: [{ role: 'user', content: [{ text }] }] });

/** The stream's events, each as { type: payload }, in order. */
async function events(client: BedrockRuntimeClient, input: ConverseCommandInput): Promise<[string, Json][]> {
  const out = await client.send(new ConverseStreamCommand(input));
  const list: [string, Json][] = [];
  for await (const event of out.stream as AsyncIterable<ConverseStreamOutput>) {
    const [type, payload] = Object.entries(event).find(([, v]) => v !== undefined)!;
    list.push([type, payload as Json]);
  }
  return list;
}

const deltas = (list: [string, Json][], key: string) =>
  list.filter(([t, p]) => t === 'contentBlockDelta' && p.delta[key] !== undefined).map(([, p]) => p.delta[key] as Json | string);

async function failure(promise: Promise<unknown>): Promise<Json> {
  const error = await promise.then(() => undefined).catch((e: unknown) => e as Json);
  assert.ok(error, 'expected a failure');
  return error!;
}

// ---- Converse -----------------------------------------------------------------------------------

for (const [protocol, client] of [
  ['HTTP/2.0', () => h2],
  ['HTTP/1.1', () => h1],
] as const) {
  test(`Converse over ${protocol}: the reply, usage exact to the token, the call as Bedrock sees it`, async () => {
    const input: ConverseCommandInput = {
      ...ask('Which berth is free?'),
      system: [{ text: 'You answer for the harbour.' }],
      inferenceConfig: { temperature: 0.2 },
    };
    const out = await client().send(new ConverseCommand(input));
    const request = last(double.requests);
    assert.equal([request.protocol, request.path], [protocol, `/model/${encodeURIComponent(MODEL)}/converse`]);
    assert.equal(last(double.seen), { modelId: MODEL, operation: 'Converse' });
    assert.match(
      String(request.headers.authorization),
      new RegExp(`^AWS4-HMAC-SHA256 Credential=${BEDROCK_ACCESS_KEY_ID}/\\d{8}/us-east-1/bedrock/aws4_request, `),
    );
    assert.equal(request.body.system, [{ text: 'You answer for the harbour.' }]);
    assert.equal(out.output?.message?.content, [{ text: REPLY }]);
    assert.equal([out.output?.message?.role, out.stopReason, out.$metadata.httpStatusCode], ['assistant', 'end_turn', 200]);
    assert.ok(out.$metadata.requestId, 'x-amzn-requestid read');
    const prompt = bedrockPromptTokens(request.body);
    const output = bedrockTextTokens(REPLY);
    assert.equal(out.usage, { inputTokens: prompt, outputTokens: output, totalTokens: prompt + output });
    assert.equal(last(double.usages), out.usage);
    assert.ok((out.metrics?.latencyMs ?? 0) >= 1);
  });

  test(`ConverseStream over ${protocol}: events in order, text in word pieces, metadata usage`, async () => {
    const list = await events(client(), ask('Stream a little.'));
    assert.equal(last(double.seen), { modelId: MODEL, operation: 'ConverseStream' });
    assert.is(last(double.requests).protocol, protocol);
    const types = list.map(([t]) => t);
    assert.equal(types.slice(0, 1).concat(types.slice(-3)), ['messageStart', 'contentBlockStop', 'messageStop', 'metadata']);
    assert.equal(list[0]![1], { role: 'assistant' });
    const text = deltas(list, 'text');
    assert.equal(text, wordPieces(REPLY), 'one delta per word');
    assert.is(text.join(''), REPLY);
    assert.is(list.find(([t]) => t === 'messageStop')![1].stopReason, 'end_turn');
    const meta = last(list)[1];
    assert.equal(meta.usage, last(double.usages));
    const prompt = bedrockPromptTokens(last(double.requests).body);
    assert.equal([meta.usage.inputTokens, meta.usage.outputTokens, meta.usage.totalTokens], [prompt, text.length, prompt + text.length]);
    assert.ok(meta.metrics.latencyMs >= 1);
  });
}

// ---- Tools ----------------------------------------------------------------------------------

test('tools: a toolUse with input valid against the schema, then a follow-up with the toolResult answers in text', async () => {
  const input: ConverseCommandInput = { ...ask('Forecast for Oslo?'), toolConfig: { ...TOOLS, toolChoice: { auto: {} } } };
  const first = await h2.send(new ConverseCommand(input));
  assert.is(first.stopReason, 'tool_use');
  const use = first.output?.message?.content?.[0]?.toolUse;
  assert.ok(use, JSON.stringify(first.output));
  assert.is(use.name, 'get_forecast');
  assert.match(use.toolUseId!, /^tooluse_[A-Za-z0-9_-]{22}$/);
  assert.ok(createAjv().validate(SCHEMA, use.input), JSON.stringify(use.input));
  assert.is(first.usage?.outputTokens, bedrockJsonTokens(JSON.stringify(use.input)));

  const followUp: ConverseCommandInput = {
    ...input,
    messages: [
      ...input.messages!,
      { role: 'assistant', content: [{ toolUse: use }] },
      { role: 'user', content: [{ toolResult: { toolUseId: use.toolUseId, content: [{ json: { sky: 'clear' } }, { text: 'and calm' }], status: 'success' } }] },
    ],
  };
  const second = await h2.send(new ConverseCommand(followUp));
  assert.equal([second.stopReason, second.output?.message?.content], ['end_turn', [{ text: REPLY }]]);
  assert.is(second.usage?.inputTokens, bedrockPromptTokens(last(double.requests).body));
  assert.equal(last(double.requests).body.messages[2].content[0].toolResult.content, [{ json: { sky: 'clear' } }, { text: 'and calm' }]);

  // Bedrock needs the toolConfig whenever the conversation holds tool blocks.
  const refused = await failure(h2.send(new ConverseCommand({ ...followUp, toolConfig: undefined })));
  assert.ok(refused instanceof ValidationException);
  assert.match(refused.message, /toolConfig field must be defined/);
});

test('tools streamed: contentBlockStart names the tool, the input JSON arrives in pieces; a forced choice picks its tool', async () => {
  const tools = [
    ...TOOLS.tools,
    { toolSpec: { name: 'get_tide', inputSchema: { json: { type: 'object', properties: { port: { type: 'string', minLength: 8 } }, required: ['port'] } } } },
  ];
  const list = await events(h1, { ...ask('Tide at Bergen?'), toolConfig: { tools, toolChoice: { tool: { name: 'get_tide' } } } });
  const start = list.find(([t]) => t === 'contentBlockStart')![1];
  assert.is(start.start.toolUse.name, 'get_tide');
  const pieces = deltas(list, 'toolUse').map((d) => (d as Json).input as string);
  assert.ok(pieces.length > 1, 'several pieces');
  const input = JSON.parse(pieces.join('')) as Json;
  assert.ok(createAjv().validate(tools[1]!.toolSpec.inputSchema.json, input));
  assert.is(list.find(([t]) => t === 'messageStop')![1].stopReason, 'tool_use');
  assert.is(last(list)[1].usage.outputTokens, pieces.length);
});

test('structured output: outputConfig.textFormat answers JSON that parses and fits the schema', async () => {
  const out = await h2.send(
    new ConverseCommand({
      ...ask('Plan a trip.'),
      outputConfig: { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(SCHEMA), name: 'trip' } } } },
    }),
  );
  const text = out.output?.message?.content?.[0]?.text ?? '';
  assert.ok(createAjv().validate(SCHEMA, JSON.parse(text)), text);
  assert.is(out.usage?.outputTokens, bedrockJsonTokens(text));
  assert.is(typeof last(double.requests).body.outputConfig.textFormat.structure.jsonSchema.schema, 'string', 'the schema travels as a string');
});

// ---- Caching, reasoning, limits --------------------------------------------------------------

test('prompt caching: a cachePoint prefix is written, then read; inputTokens excludes both; clearCache forgets', async () => {
  const input: ConverseCommandInput = {
    modelId: MODEL,
    system: [{ text: `A long and stable system prompt for the cache ${Date.now()}.` }, { cachePoint: { type: 'default' } }],
    messages: [{ role: 'user', content: [{ text: 'First question?' }] }],
  };
  const body = () => last(double.requests).body;
  const first = await h2.send(new ConverseCommand(input));
  const all = bedrockPromptTokens(body());
  const [prefix] = bedrockCachePrefixes(body());
  assert.ok(prefix! > 0 && prefix! < all);
  const output = bedrockTextTokens(REPLY);
  assert.equal(first.usage, {
    inputTokens: all - prefix!,
    outputTokens: output,
    totalTokens: all + output,
    cacheReadInputTokens: 0,
    cacheWriteInputTokens: prefix,
    cacheDetails: [{ ttl: '5m', inputTokens: prefix }],
  });
  const list = await events(h2, input);
  assert.equal(last(list)[1].usage, {
    inputTokens: all - prefix!,
    outputTokens: output,
    totalTokens: all + output,
    cacheReadInputTokens: prefix,
    cacheWriteInputTokens: 0,
  });
  double.clearCache();
  const again = await h1.send(new ConverseCommand(input));
  assert.is(again.usage?.cacheWriteInputTokens, prefix);
});

test('reasoning: thinking enabled gives a reasoningContent block with a signature, counted in outputTokens', async () => {
  const input: ConverseCommandInput = {
    ...ask('Think first.'),
    inferenceConfig: { maxTokens: 4096 },
    additionalModelRequestFields: { thinking: { type: 'enabled', budget_tokens: 2048 } },
  };
  const out = await h2.send(new ConverseCommand(input));
  const [reasoning, text] = out.output?.message?.content ?? [];
  assert.is(reasoning?.reasoningContent?.reasoningText?.text, BEDROCK_DEFAULT_REASONING);
  assert.ok(reasoning?.reasoningContent?.reasoningText?.signature);
  assert.is(text?.text, REPLY);
  assert.is(out.usage?.outputTokens, BEDROCK_REASONING_TOKENS + bedrockTextTokens(REPLY));

  const list = await events(h2, input);
  const streamed = deltas(list, 'reasoningContent') as Json[];
  assert.is(streamed.map((d) => d.text ?? '').join(''), BEDROCK_DEFAULT_REASONING);
  assert.is(last(streamed).signature, reasoning?.reasoningContent?.reasoningText?.signature);
  assert.is(deltas(list, 'text').join(''), REPLY);

  const refused = await failure(
    h2.send(new ConverseCommand({ ...input, additionalModelRequestFields: { thinking: { type: 'enabled', budget_tokens: 100 } } })),
  );
  assert.is(refused.name, 'ValidationException');
  assert.match(refused.message, /budget_tokens/);
});

test('maxTokens cuts the reply (max_tokens), a stop sequence ends it (stop_sequence), a filter stops it', async () => {
  const cut = await h2.send(new ConverseCommand({ ...ask('Say a lot.'), inferenceConfig: { maxTokens: 5 } }));
  assert.equal([cut.stopReason, cut.usage?.outputTokens, cut.output?.message?.content?.[0]?.text], ['max_tokens', 5, wordPieces(REPLY).slice(0, 5).join('')]);
  const stopped = await h2.send(new ConverseCommand({ ...ask('Say a lot.'), inferenceConfig: { stopSequences: ['Converse'] } }));
  const text = stopped.output?.message?.content?.[0]?.text ?? '';
  assert.equal([stopped.stopReason, text], ['stop_sequence', REPLY.slice(0, REPLY.indexOf('Converse'))]);
  assert.is(stopped.usage?.outputTokens, bedrockTextTokens(text));
  const filtered = await h2.send(new ConverseCommand(ask(`About ${BEDROCK_FILTERED_WORD}`)));
  assert.equal([filtered.stopReason, filtered.output?.message?.content, filtered.usage?.outputTokens], ['content_filtered', [], 0]);
  const guarded = await h2.send(
    new ConverseCommand({ ...ask(`About ${BEDROCK_FILTERED_WORD}`), guardrailConfig: { guardrailIdentifier: 'gr-1', guardrailVersion: '1' } }),
  );
  assert.equal([guarded.stopReason, guarded.output?.message?.content], ['guardrail_intervened', [{ text: BEDROCK_GUARDRAIL_MESSAGE }]]);
});

// ---- Errors ---------------------------------------------------------------------------------

test("errors are the SDK's typed exceptions with Bedrock's status, type and message", async () => {
  const unknown = await failure(h2.send(new ConverseCommand({ ...ask('hi'), modelId: 'anthropic.claude-nonexistent-v9:0' })));
  assert.ok(unknown instanceof ValidationException);
  assert.equal([unknown.$metadata.httpStatusCode, unknown.message], [400, 'The provided model identifier is invalid.']);

  const order = await failure(h2.send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'assistant', content: [{ text: 'hi' }] }] })));
  assert.equal([order.name, order.$metadata.httpStatusCode], ['ValidationException', 400]);
  assert.match(order.message, /must start with a user message/);

  for (const status of [429, 503, 500, 403, 408, 404, 400]) {
    double.script({ status });
    const [type, message] = BEDROCK_STATUS_ERRORS[status]!;
    const error = await failure(h2.send(new ConverseCommand(ask('hi'))));
    assert.equal([error.name, error.$metadata.httpStatusCode, error.message], [type, status, message], `status ${status}`);
    assert.ok(error instanceof BedrockRuntimeServiceException);
    assert.is(error.$fault, status >= 500 ? 'server' : 'client');
  }
  double.script({ status: 429 });
  assert.ok((await failure(h1.send(new ConverseStreamCommand(ask('hi'))))) instanceof ThrottlingException, 'a stream refused before it starts');
});

test('the signature is checked: a wrong secret, key id, region or session token is refused with 403', async () => {
  const cases: [string, Partial<ConstructorParameters<typeof BedrockRuntimeClient>[0]>, string][] = [
    [
      'wrong secret',
      { credentials: { accessKeyId: BEDROCK_ACCESS_KEY_ID, secretAccessKey: 'not/the+right/secret0123456789abcdefghij' } },
      'InvalidSignatureException',
    ],
    ['unknown key id', { credentials: { accessKeyId: 'AKIAUNKNOWNKEY000000', secretAccessKey: BEDROCK_SECRET_ACCESS_KEY } }, 'UnrecognizedClientException'],
    ['other region', { region: 'eu-west-1' }, 'InvalidSignatureException'],
    ['session token not issued', { credentials: { ...KEYS, sessionToken: 'FwoGZXIvYXdzEXAMPLE' } }, 'UnrecognizedClientException'],
  ];
  for (const [what, config, type] of cases) {
    const client = clientFor(config);
    const calls = double.calls;
    const error = await failure(client.send(new ConverseCommand(ask('hi'))));
    client.destroy();
    assert.is(double.calls, calls + 1, `${what}: reached the double`);
    assert.equal([error.name, error.$metadata.httpStatusCode], [type, 403], what);
    assert.ok(error instanceof BedrockRuntimeServiceException, what);
  }
  const counted = double.usages.length;
  const secret = clientFor({ credentials: { accessKeyId: BEDROCK_ACCESS_KEY_ID, secretAccessKey: 'x'.repeat(40) } });
  const refused = await failure(secret.send(new ConverseStreamCommand(ask('hi'))));
  secret.destroy();
  assert.match(refused.message, /signature we calculated does not match/);
  assert.is(double.usages.length, counted, 'nothing answered');
});

test('in-stream exceptions surface from the iterator as the typed exception, after the events before them', async () => {
  double.script({ errorEventAfter: 3, exception: 'throttlingException' });
  const out = await h2.send(new ConverseStreamCommand(ask('Stream then fail.')));
  const seen: string[] = [];
  const error = await failure(
    (async () => {
      for await (const event of out.stream!) seen.push(Object.keys(event).find((k) => (event as Json)[k] !== undefined)!);
    })(),
  );
  assert.equal(seen, ['messageStart', 'contentBlockDelta', 'contentBlockDelta']);
  assert.ok(error instanceof ThrottlingException, String(error));

  double.script({ errorEventAfter: 2 });
  const again = await h1.send(new ConverseStreamCommand(ask('Stream then fail.')));
  const model = await failure(
    (async () => {
      for await (const _ of again.stream!);
    })(),
  );
  assert.ok(model instanceof ModelStreamErrorException);
  assert.is(model.originalStatusCode, 500);
});

test('a stream cut mid-way or garbled fails the iterator (HTTP/2 and HTTP/1.1); a garbled plain body fails the call', async () => {
  for (const [client, fault] of [
    [h2, { cutAfterEvents: 3 }],
    [h1, { cutAfterEvents: 3 }],
    [h2, { garbage: true }],
  ] as const) {
    double.script(fault);
    const completed = double.usages.length;
    const error = await failure(events(client, ask('Cut me.')));
    assert.ok(error instanceof Error, JSON.stringify(fault));
    assert.is(double.usages.length, completed);
  }
  double.script({ garbage: true });
  assert.ok((await failure(h2.send(new ConverseCommand(ask('hi'))))) instanceof Error);
});

test('a client that leaves mid-stream is counted as abandoned; a stall is left by the abort signal', async () => {
  const abandoned = double.abandoned;
  double.script({ chunkDelayMs: 30 });
  const leave = new AbortController();
  const out = await h2.send(new ConverseStreamCommand(ask('A long story.')), { abortSignal: leave.signal });
  let n = 0;
  // The SDK ends the iterator quietly once its signal aborted (HTTP/2): the leaving shows at the double.
  for await (const _ of out.stream!) {
    if (++n === 3) {
      leave.abort();
      break;
    }
  }
  double.script({ hang: true });
  const stall = new AbortController();
  const pending = h1.send(new ConverseCommand(ask('hello')), { abortSignal: stall.signal });
  setTimeout(() => stall.abort(), 50);
  assert.is((await failure(pending)).name, 'AbortError');
  // The double hears each close when its socket's end arrives: up to 10 s on a loaded machine (2 s was once too short in CI).
  for (const until = Date.now() + 10_000; double.abandoned < abandoned + 2 && Date.now() < until;) await new Promise((r) => setTimeout(r, 20));
  assert.is(double.abandoned, abandoned + 2);
});

test.run();
