// The openai SDK's responses.create against a gateway started as a separate process: plain and
// streamed, every event and every Response checked against OpenAI's OpenAPI schemas, a function
// tool round trip, instructions, what Codex CLI sends, errors, and billing in GET /v1/usage.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI from 'openai';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { startUpstreamDouble } from './support/upstream-double.ts';
import { eventually, openAccount, startGatewayWithRoutes } from './support/http.ts';
import { assertMatches } from './support/openapi.ts';

let gw: GatewayProcess;
let client: OpenAI;

interface Sub {
  quota: { used: number; reserved: number };
}
interface UsageModel {
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  billed_tokens: number;
}
interface UsageBody {
  models: UsageModel[];
}

async function getJson<T>(path: string): Promise<T> {
  const r = await fetch(`${gw.baseUrl}${path}`, { headers: { authorization: `Bearer ${gw.key}` } });
  return r.json() as Promise<T>;
}
const subscription = () => getJson<Sub>('/subscription');
const usage = () => getJson<UsageBody>('/usage');
/** ceil((input + output) x multiplier), with the multiplier in thousandths as the ledger keeps it. */
const billedAt = (u: OpenAI.Responses.ResponseUsage, milli: number) => Math.ceil(((u.input_tokens + u.output_tokens) * milli) / 1000);

async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

const WEATHER: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city.',
  strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
};

/** Streams a request, checking every event against the schema and the sequence numbers. */
async function streamed(params: OpenAI.Responses.ResponseCreateParamsNonStreaming) {
  const stream = await client.responses.create({ ...params, stream: true });
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const event of stream) {
    assertMatches('ResponseStreamEvent', event);
    assert.is(event.sequence_number, events.length, 'sequence numbers count up from 0');
    events.push(event);
  }
  return events;
}

test.before(async () => {
  // uvu reports a failing hook badly: say what went wrong before rethrowing.
  gw = await spawnGateway().catch((err: Error) => {
    console.error(`could not start the gateway: ${err.message}`);
    throw err;
  });
  client = new OpenAI({ apiKey: gw.key, baseURL: gw.baseUrl, maxRetries: 0 });
});
test.after(async () => {
  await gw?.stop();
});

test('responses.create: a Response object with instructions and usage, billed at the multiplier', async () => {
  const before = await subscription();
  const { data, response } = await client.responses
    .create({
      model: 'gen-6-terra',
      instructions: 'You are terse.',
      input: 'Explain toll roads in one paragraph.',
      reasoning: { effort: 'high' },
    })
    .withResponse();
  assertMatches('Response', data);
  assert.is(data.object, 'response');
  assert.match(data.id, /^resp_/);
  assert.is(data.status, 'completed');
  assert.is(data.model, 'cx/gen-6-terra');
  assert.is(data.instructions, 'You are terse.');
  assert.is(data.reasoning?.effort, 'high');
  assert.is(data.output.length, 1);
  const msg = data.output[0] as OpenAI.Responses.ResponseOutputMessage;
  assert.equal([msg.type, msg.role, msg.status, msg.content[0].type], ['message', 'assistant', 'completed', 'output_text']);
  assert.ok(data.output_text.length > 10);
  const u = data.usage!;
  assert.ok(u.input_tokens > 0 && u.output_tokens > 0);
  assert.is(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(u.input_tokens_details, { cached_tokens: 0, cache_write_tokens: 0 } as never);
  assert.equal(u.output_tokens_details, { reasoning_tokens: 0 });
  const billed = billedAt(u, 1250);
  assert.is(Number(response.headers.get('x-tollgate-billed-tokens')), billed);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, billed);
  assert.is(after.quota.reserved, 0);

  // The instructions are part of the input.
  const bare = await client.responses.create({ model: 'gen-6-terra', input: 'Explain toll roads in one paragraph.' });
  assert.ok(bare.usage!.input_tokens < u.input_tokens);
  assert.is(bare.instructions, null);
  assert.is(bare.reasoning?.effort, null, 'an effort outside low..max is not forwarded');
});

test('streamed: the Responses event sequence, each event and the final Response valid', async () => {
  const before = await subscription();
  const events = await streamed({
    model: 'cx/gen-6-sol',
    instructions: 'Be brief.',
    input: [{ role: 'user', content: 'Stream me a sentence about harbours.' }],
  });
  const types = events.map((e) => e.type);
  const deltas = types.filter((t) => t === 'response.output_text.delta').length;
  assert.ok(deltas > 3, 'text arrives in pieces');
  assert.equal(types, [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.content_part.added',
    ...Array(deltas).fill('response.output_text.delta'),
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ]);
  const created = events[0] as OpenAI.Responses.ResponseCreatedEvent;
  assert.is(created.response.status, 'in_progress');
  assert.not.ok('usage' in created.response, 'no usage until the response is finished');
  assert.not.ok('usage' in (events[1] as OpenAI.Responses.ResponseInProgressEvent).response);
  const text = events
    .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');
  const done = events.find((e): e is OpenAI.Responses.ResponseTextDoneEvent => e.type === 'response.output_text.done')!;
  assert.is(done.text, text);
  const completed = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
  assertMatches('Response', completed);
  assert.is(completed.id, created.response.id);
  assert.is(completed.status, 'completed');
  assert.is(((completed.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).text, text);
  const itemDone = events.find((e): e is OpenAI.Responses.ResponseOutputItemDoneEvent => e.type === 'response.output_item.done')!;
  assert.equal(itemDone.item, completed.output[0]);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, billedAt(completed.usage!, 1500));
});

test('max_output_tokens cuts the reply: status incomplete with the reason', async () => {
  const res = await client.responses.create({ model: 'cx/gen-6-sol', max_output_tokens: 16, input: 'Write a long essay about bridges and rivers.' });
  assertMatches('Response', res);
  assert.is(res.status, 'incomplete');
  assert.equal(res.incomplete_details, { reason: 'max_output_tokens' });
  assert.ok(res.usage!.output_tokens <= 16);
  const events = await streamed({ model: 'cx/gen-6-sol', max_output_tokens: 16, input: 'Write a long essay about bridges and rivers.' });
  assert.is(events.at(-1)!.type, 'response.incomplete');
});

test('function tools: a function_call, then a function_call_output round trip', async () => {
  const question = { role: 'user' as const, content: 'Please use get_weather for Paris.' };
  const first = await client.responses.create({ model: 'cx/gen-6-sol', tools: [WEATHER], tool_choice: 'auto', input: [question] });
  assertMatches('Response', first);
  assert.equal(
    first.tools.map((t) => t.type),
    ['function'],
  );
  const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
  assert.ok(call, 'a function_call item');
  assert.is(call!.name, 'get_weather');
  assert.type((JSON.parse(call!.arguments) as { city: unknown }).city, 'string');

  const second = await client.responses.create({
    model: 'cx/gen-6-sol',
    tools: [WEATHER],
    input: [question, call!, { type: 'function_call_output', call_id: call!.call_id, output: '18 degrees and sunny' }],
  });
  assertMatches('Response', second);
  assert.ok(second.output_text.startsWith('The tool finished and its result is in.'), second.output_text);
  assert.ok(second.usage!.input_tokens > first.usage!.input_tokens, 'the history is counted');

  // Forced and streamed: output_item.added with a function_call, argument deltas, .done, output_item.done.
  const events = await streamed({ model: 'cx/gen-6-sol', tools: [WEATHER], tool_choice: { type: 'function', name: 'get_weather' }, input: 'Lisbon' });
  const types = events.map((e) => e.type);
  const deltas = types.filter((t) => t === 'response.function_call_arguments.delta').length;
  assert.ok(deltas > 0);
  assert.equal(types, [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    ...Array(deltas).fill('response.function_call_arguments.delta'),
    'response.function_call_arguments.done',
    'response.output_item.done',
    'response.completed',
  ]);
  const added = events[2] as OpenAI.Responses.ResponseOutputItemAddedEvent;
  assert.is(added.item.type, 'function_call');
  const argsDone = events.find((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent => e.type === 'response.function_call_arguments.done')!;
  assert.equal(JSON.parse(argsDone.arguments), { city: 'Lisbon' });
  const completed = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
  assertMatches('Response', completed);
  assert.equal(completed.tool_choice, { type: 'function', name: 'get_weather' });
  const item = completed.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  assert.equal([item.type, item.name, item.arguments, item.status], ['function_call', 'get_weather', argsDone.arguments, 'completed']);
});

test('what Codex CLI sends is accepted: hosted and custom tools ignored, reasoning items, developer role, images, store false', async () => {
  const body = {
    model: 'cx/gen-6-sol',
    instructions: 'You are a coding agent.',
    store: false,
    stream: false,
    parallel_tool_calls: false,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'abc',
    reasoning: { effort: 'minimal', summary: 'auto' },
    tools: [
      {
        type: 'function',
        name: 'shell',
        description: 'Runs a command',
        strict: false,
        parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] },
      },
      { type: 'local_shell' },
      { type: 'web_search' },
      { type: 'custom', name: 'apply_patch', description: 'Patch files', format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' } },
    ],
    tool_choice: 'auto',
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: '<permissions>read-only</permissions>' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>cwd=/tmp</environment_context>' }] },
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'What does this screenshot show?' },
          { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'auto' },
        ],
      },
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look.', annotations: [] }] },
      { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'README.md' },
      { type: 'custom_tool_call', call_id: 'call_2', name: 'apply_patch', input: '*** Begin Patch' },
      { type: 'custom_tool_call_output', call_id: 'call_2', output: 'Done' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Thanks, now summarise.' }] },
    ],
  };
  const res = (await client.responses.create(body as never)) as OpenAI.Responses.Response;
  assertMatches('Response', res);
  assert.equal(
    res.tools.map((t) => (t as { name: string }).name),
    ['shell'],
    'only function tools are used and echoed',
  );
  assert.is(res.parallel_tool_calls, false);
  assert.is((res as unknown as { store: boolean }).store, false);
  assert.ok(res.output_text.length > 0);
  assert.ok(res.usage!.input_tokens > 765, 'the image is counted');
});

test('errors: previous_response_id is refused, unknown models and bad keys in OpenAI shape', async () => {
  const e1 = await thrown(() => client.responses.create({ model: 'cx/gen-6-sol', input: 'again', previous_response_id: 'resp_123' }));
  assert.instance(e1, OpenAI.BadRequestError);
  assert.is((e1 as InstanceType<typeof OpenAI.APIError>).param, 'previous_response_id');
  assert.match((e1 as Error).message, /previous_response_id.*not supported/);

  const e2 = await thrown(() => client.responses.create({ model: 'no-such-model', input: 'x' }));
  assert.instance(e2, OpenAI.PermissionDeniedError);
  assert.is((e2 as InstanceType<typeof OpenAI.APIError>).code, 'model_not_found');

  const e3 = await thrown(() => client.responses.create({ model: 'cx/gen-6-sol' } as never));
  assert.instance(e3, OpenAI.BadRequestError);
  assert.is((e3 as InstanceType<typeof OpenAI.APIError>).param, 'input');

  const bad = new OpenAI({ apiKey: 'sk_svc_' + 'x'.repeat(43), baseURL: gw.baseUrl, maxRetries: 0 });
  const e4 = await thrown(() => bad.responses.create({ model: 'cx/gen-6-sol', input: 'x' }));
  assert.instance(e4, OpenAI.AuthenticationError);
  assert.is((e4 as InstanceType<typeof OpenAI.APIError>).type, 'invalid_request_error');
});

test('usage: each Responses call shows up in GET /v1/usage with its model and billed tokens', async () => {
  const row = (u: UsageBody) => u.models.find((m) => m.model === 'cx/gen-6-astra');
  assert.not.ok(row(await usage()), 'cx/gen-6-astra unused so far');
  const a = await client.responses.create({ model: 'gen-6-astra', input: 'Name three rivers.' });
  const events = await streamed({ model: 'cx/gen-6-astra', input: 'Name three lakes.' });
  const b = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
  const after = row(await usage())!;
  assert.ok(after, 'a usage row for cx/gen-6-astra');
  assert.is(after.requests, 2);
  assert.is(after.prompt_tokens, a.usage!.input_tokens + b.usage!.input_tokens);
  assert.is(after.completion_tokens, a.usage!.output_tokens + b.usage!.output_tokens);
  assert.is(after.billed_tokens, billedAt(a.usage!, 2000) + billedAt(b.usage!, 2000));
});

test('through an OpenAI-compatible upstream: the canonical request it receives, and upstream failures', async () => {
  const double = await startUpstreamDouble();
  const local = await startGatewayWithRoutes(
    { double: { type: 'openai-compatible', baseURL: double.url, timeoutMs: 5000 } },
    { 'test/double-chat': { provider: 'double', upstreamModel: 'double-model', multiplierMilli: 1000 } },
  );
  try {
    const account = await openAccount(local, { quota: 1_000_000 });
    const c = new OpenAI({ apiKey: account.key, baseURL: `${local.url}/v1`, maxRetries: 0 });
    const quota = async () =>
      ((await (await fetch(`${local.url}/v1/subscription`, { headers: { authorization: `Bearer ${account.key}` } })).json()) as Sub).quota;

    const res = await c.responses.create({
      model: 'test/double-chat',
      instructions: 'Be brief.',
      max_output_tokens: 64,
      temperature: 0.5,
      parallel_tool_calls: false,
      reasoning: { effort: 'low' },
      tools: [WEATHER, { type: 'web_search' }],
      tool_choice: { type: 'function', name: 'get_weather' },
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object', properties: {} }, strict: true } },
      input: [
        { role: 'developer', content: 'Answer in English.' },
        { role: 'user', content: [{ type: 'input_text', text: 'Weather in Bergen?' }] },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'message', role: 'assistant', status: 'completed', id: 'msg_1', content: [{ type: 'output_text', text: 'Checking.', annotations: [] }] },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Bergen"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'rain' },
        { role: 'user', content: 'And in Oslo?' },
      ],
    });
    assertMatches('Response', res);
    assert.ok(res.output_text.length > 0);
    const sent = double.requests.at(-1)!.body as Record<string, unknown>;
    assert.is(sent.model, 'double-model');
    assert.equal(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'system', content: 'Answer in English.' },
      { role: 'user', content: 'Weather in Bergen?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'rain' },
      { role: 'user', content: 'And in Oslo?' },
    ]);
    assert.equal(sent.tools, [{ type: 'function', function: { name: 'get_weather', description: WEATHER.description, parameters: WEATHER.parameters } }]);
    assert.equal(sent.tool_choice, { type: 'function', function: { name: 'get_weather' } });
    assert.is(sent.reasoning_effort, 'low');
    assert.is(sent.temperature, 0.5);
    assert.is(sent.parallel_tool_calls, false);
    assert.equal(sent.response_format, { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: {} }, strict: true } });

    const before = await quota();
    double.failNext(500);
    const e = await thrown(() => c.responses.create({ model: 'test/double-chat', input: 'hi' }));
    assert.instance(e, OpenAI.APIError);
    assert.is((e as InstanceType<typeof OpenAI.APIError>).status, 502);
    assert.is((e as InstanceType<typeof OpenAI.APIError>).code, 'upstream_error');

    // A stream whose upstream fails before its first byte: an error status, not a 200 stream.
    double.failNext(500);
    const es = await thrown(async () => {
      for await (const _ of await c.responses.create({ model: 'test/double-chat', input: 'hi', stream: true })) {
        /* nothing arrives */
      }
    });
    assert.instance(es, OpenAI.APIError);
    assert.is((es as InstanceType<typeof OpenAI.APIError>).status, 502);
    // A release is not a charge, so the read model may show it a moment later.
    const after = await eventually(quota, (q) => q.reserved === 0);
    assert.equal([after.used, after.reserved], [before.used, 0], 'failed calls are not charged');
  } finally {
    await local.stop();
    await double.close();
  }
});

test.run();
