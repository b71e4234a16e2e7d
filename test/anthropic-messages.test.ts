// The official Anthropic SDK against a gateway started as a separate process: POST /v1/messages
// (plain and streamed, system prompts, tools with a tool_use / tool_result round trip, images),
// /v1/messages/count_tokens, Anthropic-shaped errors, and the billing each call leaves in
// GET /v1/usage.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Anthropic from '@anthropic-ai/sdk';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { startUpstreamDouble } from './support/upstream-double.ts';
import { eventually, openAccount, startGatewayWithRoutes } from './support/http.ts';

let gw: GatewayProcess;
let client: Anthropic;
let origin: string;

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
  totals: UsageModel;
  models: UsageModel[];
}

async function getJson<T>(path: string): Promise<T> {
  const r = await fetch(`${gw.baseUrl}${path}`, { headers: { authorization: `Bearer ${gw.key}` } });
  return r.json() as Promise<T>;
}
const subscription = () => getJson<Sub>('/subscription');
const usage = () => getJson<UsageBody>('/usage');
/** ceil((input + output) x multiplier), with the multiplier in thousandths as the ledger keeps it. */
const billedAt = (input: number, output: number, milli: number) => Math.ceil(((input + output) * milli) / 1000);

/** Runs `fn` and returns what it threw (uvu must not see errors from inside a catch block). */
async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

const WEATHER_TOOL: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Current weather for a city.',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

// A 1x1 PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

test.before(async () => {
  // uvu reports a failing hook badly: say what went wrong before rethrowing.
  gw = await spawnGateway().catch((err: Error) => {
    console.error(`could not start the gateway: ${err.message}`);
    throw err;
  });
  origin = gw.baseUrl.replace(/\/v1$/, '');
  client = new Anthropic({ apiKey: gw.key, baseURL: origin, maxRetries: 0 });
});
test.after(async () => {
  await gw?.stop();
});

test('messages.create with a system prompt: an Anthropic message, billed at the multiplier', async () => {
  const before = await subscription();
  const { data, response } = await client.messages
    .create({
      model: 'alpha-sonnet-5',
      max_tokens: 300,
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'Explain toll roads in one paragraph.' }],
    })
    .withResponse();
  assert.is(data.type, 'message');
  assert.is(data.role, 'assistant');
  assert.is(data.model, 'alpha-sonnet-5');
  assert.match(data.id, /^msg_/);
  assert.is(data.stop_reason, 'end_turn');
  assert.is(data.content.length, 1);
  assert.is(data.content[0].type, 'text');
  assert.ok((data.content[0] as Anthropic.TextBlock).text.length > 10);
  assert.ok(data.usage.input_tokens > 0 && data.usage.output_tokens > 0);
  const billed = billedAt(data.usage.input_tokens, data.usage.output_tokens, 1500);
  assert.is(Number(response.headers.get('x-tollgate-billed-tokens')), billed);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, billed);
  assert.is(after.quota.reserved, 0);

  // The system prompt is part of the input: the same call without it costs fewer input tokens.
  const bare = await client.messages.create({
    model: 'alpha-sonnet-5',
    max_tokens: 300,
    messages: [{ role: 'user', content: 'Explain toll roads in one paragraph.' }],
  });
  assert.ok(bare.usage.input_tokens < data.usage.input_tokens);
});

test('what Claude Code sends is accepted: ?beta=true, Bearer token, system blocks with cache_control, thinking, metadata, unknown blocks', async () => {
  const beta = new Anthropic({ apiKey: null, authToken: gw.key, baseURL: origin, maxRetries: 0 });
  const msg = await beta.beta.messages.create({
    model: 'alpha-haiku-4.5',
    max_tokens: 2000,
    system: [{ type: 'text', text: 'You are a coding assistant.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Summarise the ferry timetable.', cache_control: { type: 'ephemeral' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Let me think.', signature: 'sig' },
          { type: 'redacted_thinking', data: 'abc' },
          { type: 'text', text: 'Which ferry?' },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'Ferry leaves at nine.' } },
          { type: 'text', text: 'The harbour ferry.' },
        ],
      },
    ],
    tools: [WEATHER_TOOL, { type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
    thinking: { type: 'enabled', budget_tokens: 1024 },
    metadata: { user_id: 'user_abc_account_def_session_123' },
    betas: ['interleaved-thinking-2025-05-14'],
    // Fields this SDK version may not know, sent by Claude Code releases.
    ...({ context_management: { edits: [] }, temperature: 1 } as object),
  });
  assert.is(msg.model, 'alpha-haiku-4.5');
  assert.is(msg.stop_reason, 'end_turn');
  assert.ok(msg.content[0].type === 'text' && msg.content[0].text.length > 0);

  const raw = await fetch(`${origin}/v1/messages?beta=true`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${gw.key}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219',
    },
    body: JSON.stringify({ model: 'alpha-haiku-4.5', max_tokens: 50, messages: [{ role: 'user', content: 'hi there' }], output_config: { effort: 'high' } }),
  });
  assert.is(raw.status, 200);
  assert.is(((await raw.json()) as { type: string }).type, 'message');
});

test('streamed with messages.stream: Anthropic event order, text and usage match the final message', async () => {
  const before = await subscription();
  const stream = client.messages.stream({
    model: 'alpha-opus-5',
    max_tokens: 400,
    system: [{ type: 'text', text: 'Be brief.' }],
    messages: [{ role: 'user', content: 'Stream me a sentence about harbours.' }],
  });
  const events: Anthropic.MessageStreamEvent[] = [];
  let text = '';
  stream.on('streamEvent', (e) => events.push(structuredClone(e))); // the SDK builds its snapshot in place
  stream.on('text', (t) => {
    text += t;
  });
  const final = await stream.finalMessage();
  const types = events.map((e) => e.type);
  // (The SDK drops ping events; the raw stream test below sees them.)
  assert.equal(types.slice(0, 2), ['message_start', 'content_block_start']);
  assert.equal(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(types.filter((t) => t === 'content_block_delta').length > 3, 'text arrives in pieces');
  const start = events[0] as Anthropic.RawMessageStartEvent;
  assert.is(start.message.model, 'alpha-opus-5');
  assert.equal(start.message.content, []);
  const delta = events.at(-2) as Anthropic.RawMessageDeltaEvent;
  assert.is(delta.delta.stop_reason, 'end_turn');
  assert.is(delta.usage.output_tokens, final.usage.output_tokens);
  assert.ok(text.length > 10);
  assert.is((final.content[0] as Anthropic.TextBlock).text, text);
  assert.is(final.usage.input_tokens, start.message.usage.input_tokens);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, billedAt(final.usage.input_tokens, final.usage.output_tokens, 1750));
});

test('streamed with create({stream: true}), and the raw SSE: event names, ping, data types', async () => {
  const stream = await client.messages.create({
    model: 'alpha-sonnet-5',
    max_tokens: 200,
    stream: true,
    messages: [{ role: 'user', content: 'Describe a lighthouse.' }],
  });
  const types: string[] = [];
  let text = '';
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  }
  assert.is(types[0], 'message_start');
  assert.is(types.at(-1), 'message_stop');
  assert.ok(text.length > 10);

  const r = await fetch(`${origin}/v1/messages?beta=true`, {
    method: 'POST',
    headers: { 'x-api-key': gw.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'alpha-sonnet-5', max_tokens: 200, stream: true, messages: [{ role: 'user', content: 'Describe a lighthouse.' }] }),
  });
  assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
  const frames = (await r.text())
    .trim()
    .split('\n\n')
    .map((f) => {
      const [ev, data] = f.split('\n');
      return { event: ev.replace(/^event: /, ''), data: JSON.parse(data.replace(/^data: /, '')) as { type: string } };
    });
  for (const f of frames) assert.is(f.data.type, f.event, 'the event name is the data type');
  const names = frames.map((f) => f.event);
  const deltas = names.filter((n) => n === 'content_block_delta').length;
  assert.equal(names, [
    'message_start',
    'content_block_start',
    'ping',
    ...Array(deltas).fill('content_block_delta'),
    'content_block_stop',
    'message_delta',
    'message_stop',
  ]);
  assert.ok(deltas > 3);
});

test('max_tokens cuts the reply: stop_reason max_tokens, output_tokens at most the cap', async () => {
  const msg = await client.messages.create({
    model: 'alpha-sonnet-5',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'Write a long essay about bridges.' }],
  });
  assert.is(msg.stop_reason, 'max_tokens');
  assert.ok(msg.usage.output_tokens <= 5 && msg.usage.output_tokens > 0);
});

test('tools: tool_use reply, then a tool_result round trip in the history', async () => {
  const question: Anthropic.MessageParam = { role: 'user', content: 'Please use get_weather for Paris.' };
  const first = await client.messages.create({
    model: 'alpha-sonnet-5',
    max_tokens: 300,
    tools: [WEATHER_TOOL],
    tool_choice: { type: 'auto' },
    messages: [question],
  });
  assert.is(first.stop_reason, 'tool_use');
  const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
  assert.ok(use, 'a tool_use block');
  assert.is(use!.name, 'get_weather');
  assert.type((use!.input as { city: unknown }).city, 'string');

  const second = await client.messages.create({
    model: 'alpha-sonnet-5',
    max_tokens: 300,
    tools: [WEATHER_TOOL],
    messages: [
      question,
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use!.id, content: [{ type: 'text', text: '18 degrees and sunny' }] }] },
    ],
  });
  assert.is(second.stop_reason, 'end_turn');
  const text = (second.content[0] as Anthropic.TextBlock).text;
  assert.ok(text.startsWith('The tool finished and its result is in.'), text);
  assert.ok(second.usage.input_tokens > first.usage.input_tokens, 'the history is counted');

  // tool_choice {type: 'tool'} forces the named tool even without asking for it; streamed, the
  // arguments arrive as input_json_delta and the SDK assembles them.
  const forced = client.messages.stream({
    model: 'alpha-sonnet-5',
    max_tokens: 300,
    tools: [WEATHER_TOOL],
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Lisbon' }],
  });
  const deltas: string[] = [];
  forced.on('streamEvent', (e) => {
    if (e.type === 'content_block_delta') deltas.push(e.delta.type);
  });
  const final = await forced.finalMessage();
  assert.is(final.stop_reason, 'tool_use');
  assert.ok(deltas.length > 0 && deltas.every((d) => d === 'input_json_delta'));
  const block = final.content[0] as Anthropic.ToolUseBlock;
  assert.is(block.type, 'tool_use');
  assert.equal(block.input, { city: 'Lisbon' });
});

test('images as base64 and url sources are accepted and counted', async () => {
  const messages: Anthropic.MessageParam[] = [
    {
      role: 'user',
      content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
        { type: 'text', text: 'What is in these pictures?' },
      ],
    },
  ];
  const counted = await client.messages.countTokens({ model: 'alpha-sonnet-5', messages });
  const textOnly = await client.messages.countTokens({ model: 'alpha-sonnet-5', messages: [{ role: 'user', content: 'What is in these pictures?' }] });
  assert.ok(counted.input_tokens >= textOnly.input_tokens + 2 * 765, `${counted.input_tokens} vs ${textOnly.input_tokens}`);
  const msg = await client.messages.create({ model: 'alpha-sonnet-5', max_tokens: 100, messages });
  assert.is(msg.usage.input_tokens, counted.input_tokens);
});

test('count_tokens: the input a call would be billed for, free of charge', async () => {
  const params = {
    model: 'alpha-sonnet-5',
    system: 'You are terse.',
    tools: [WEATHER_TOOL],
    messages: [{ role: 'user' as const, content: 'How long is the Golden Gate bridge?' }],
  };
  const before = await subscription();
  const counted = await client.messages.countTokens(params);
  const after = await subscription();
  assert.is(after.quota.used, before.quota.used);
  assert.ok(counted.input_tokens > 0);
  const msg = await client.messages.create({ ...params, max_tokens: 100 });
  assert.is(msg.usage.input_tokens, counted.input_tokens);

  const anonymous = await fetch(`${origin}/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(params),
  });
  assert.is(anonymous.status, 401);
  assert.equal(((await anonymous.json()) as { error: { type: string } }).error.type, 'authentication_error');
});

test('errors come back in Anthropic shape with the gateway statuses', async () => {
  const bad = new Anthropic({ apiKey: 'sk_svc_' + 'x'.repeat(43), baseURL: origin, maxRetries: 0 });
  const e401 = await thrown(() => bad.messages.create({ model: 'alpha-sonnet-5', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
  assert.instance(e401, Anthropic.AuthenticationError);
  const body401 = (e401 as InstanceType<typeof Anthropic.APIError>).error as { type: string; error: { type: string; message: string }; request_id: string };
  assert.equal([body401.type, body401.error.type], ['error', 'authentication_error']);
  assert.match(body401.error.message, /API key/);
  assert.match(body401.request_id, /^req_/);

  const e403 = await thrown(() => client.messages.create({ model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
  assert.instance(e403, Anthropic.PermissionDeniedError);
  const body403 = (e403 as InstanceType<typeof Anthropic.APIError>).error as { type: string; error: { type: string; message: string } };
  assert.is(body403.type, 'error');
  assert.is(body403.error.type, 'permission_error');
  assert.match(body403.error.message, /no-such-model/);

  const e400 = await thrown(() => client.messages.create({ model: 'alpha-sonnet-5', messages: [{ role: 'user', content: 'x' }] } as never));
  assert.instance(e400, Anthropic.BadRequestError);
  const body400 = (e400 as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string; message: string } };
  assert.is(body400.error.type, 'invalid_request_error');
  assert.match(body400.error.message, /max_tokens/);

  const e400b = await thrown(() =>
    client.messages.countTokens({ model: 'alpha-sonnet-5', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64' } }] }] } as never),
  );
  assert.instance(e400b, Anthropic.BadRequestError);

  // Raw: a missing key is a 401 in Anthropic shape too (the shape is set before authentication).
  const r = await fetch(`${origin}/v1/messages?beta=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.is(r.status, 401);
  const body = (await r.json()) as { type: string; error: { type: string; message: string } };
  assert.is(body.type, 'error');
  assert.is(body.error.type, 'authentication_error');
  // The chat-completions dialect keeps OpenAI's shape.
  const chat = await fetch(`${gw.baseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.is(((await chat.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
});

test('usage: each Messages call shows up in GET /v1/usage with its model and billed tokens', async () => {
  const before = await usage();
  const row = (u: UsageBody) => u.models.find((m) => m.model === 'alpha-opus-4.7');
  assert.not.ok(row(before), 'alpha-opus-4.7 unused so far');
  const a = await client.messages.create({ model: 'alpha-opus-4.7', max_tokens: 200, messages: [{ role: 'user', content: 'Name three rivers.' }] });
  const b = await client.messages
    .stream({ model: 'alpha-opus-4.7', max_tokens: 200, messages: [{ role: 'user', content: 'Name three lakes.' }] })
    .finalMessage();
  const after = row(await usage())!;
  assert.ok(after, 'a usage row for alpha-opus-4.7');
  assert.is(after.requests, 2);
  assert.is(after.prompt_tokens, a.usage.input_tokens + b.usage.input_tokens);
  assert.is(after.completion_tokens, a.usage.output_tokens + b.usage.output_tokens);
  assert.is(after.billed_tokens, billedAt(a.usage.input_tokens, a.usage.output_tokens, 1750) + billedAt(b.usage.input_tokens, b.usage.output_tokens, 1750));
});

test('through an OpenAI-compatible upstream: the canonical request it receives, and upstream failures as api_error', async () => {
  const double = await startUpstreamDouble({ toolCall: { name: 'get_weather', arguments: '{"city":"Oslo"}' } });
  const local = await startGatewayWithRoutes(
    { double: { type: 'openai-compatible', baseURL: double.url, timeoutMs: 5000 } },
    { 'test/double-chat': { provider: 'double', upstreamModel: 'double-model', multiplierMilli: 1000 } },
  );
  try {
    const account = await openAccount(local, { quota: 1_000_000 });
    const c = new Anthropic({ apiKey: account.key, baseURL: local.url, maxRetries: 0 });
    const used = async () =>
      ((await (await fetch(`${local.url}/v1/subscription`, { headers: { authorization: `Bearer ${account.key}` } })).json()) as Sub).quota;

    const msg = (await c.messages.create({
      model: 'test/double-chat',
      max_tokens: 50,
      system: [{ type: 'text', text: 'Be brief.' }],
      tools: [WEATHER_TOOL],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      temperature: 0.5,
      stop_sequences: ['END'],
      messages: [
        { role: 'user', content: 'Weather in Bergen?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Bergen' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'rain', is_error: false },
            { type: 'text', text: 'And in Oslo?' },
          ],
        },
      ],
    } as never)) as Anthropic.Message;
    assert.is(msg.stop_reason, 'tool_use');
    assert.equal(msg.content, [{ type: 'tool_use', id: 'call_double_1', name: 'get_weather', input: { city: 'Oslo' } }] as never);
    const sent = double.requests.at(-1)!.body as Record<string, unknown>;
    assert.is(sent.model, 'double-model');
    assert.equal(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Bergen?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'rain' },
      { role: 'user', content: 'And in Oslo?' },
    ]);
    assert.equal(sent.tools, [
      { type: 'function', function: { name: 'get_weather', description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.input_schema } },
    ]);
    assert.is(sent.tool_choice, 'required');
    assert.is(sent.parallel_tool_calls, false);
    assert.is(sent.temperature, 0.5);
    assert.equal(sent.stop, ['END']);

    const before = await used();
    double.failNext(500);
    const e = await thrown(() => c.messages.create({ model: 'test/double-chat', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }));
    assert.instance(e, Anthropic.APIError);
    assert.is((e as InstanceType<typeof Anthropic.APIError>).status, 502);
    assert.is(((e as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string } }).error.type, 'api_error');

    double.failNext(500);
    const r = await fetch(`${local.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': account.key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test/double-chat', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    // Failed before its first byte: an error status in Anthropic's shape, not a 200 stream.
    assert.is(r.status, 502);
    assert.is(((await r.json()) as { error: { type: string } }).error.type, 'api_error');
    // A release is not a charge, so the read model may show it a moment later.
    const after = await eventually(used, (q) => q.reserved === 0);
    assert.equal([after.used, after.reserved], [before.used, 0], 'failed calls are not charged');

    // Quota used up: 402 billing_error; over the call rate: 429 rate_limit_error.
    const poor = await openAccount(local, { quota: 5 });
    const e402 = await thrown(() =>
      new Anthropic({ apiKey: poor.key, baseURL: local.url, maxRetries: 0 }).messages.create({
        model: 'test/double-chat',
        max_tokens: 50,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    );
    assert.is((e402 as InstanceType<typeof Anthropic.APIError>).status, 402);
    assert.is(((e402 as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string } }).error.type, 'billing_error');
    const slow = await openAccount(local, { quota: 1_000_000, requestsPerMinute: 1 });
    const sc = new Anthropic({ apiKey: slow.key, baseURL: local.url, maxRetries: 0 });
    await sc.messages.create({ model: 'test/double-chat', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    const e429 = await thrown(() => sc.messages.create({ model: 'test/double-chat', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }));
    assert.instance(e429, Anthropic.RateLimitError);
    assert.is(((e429 as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string } }).error.type, 'rate_limit_error');
  } finally {
    await local.stop();
    await double.close();
  }
});

test.run();
