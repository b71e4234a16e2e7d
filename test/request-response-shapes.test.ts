// The request and response shapes (src/calls/shapes/) against a real gateway on the simulated
// upstream: every kind of /v1 reply, each chunk of a stream and an error of each dialect matches
// its schemas/responses file, with no property the shape leaves out; the request schemas compile
// with the project's ajv (slicedPattern included), refuse what they should with a 400 in the
// caller's dialect and let the rest through. Run alone with:
//   node --import tsx test/request-response-shapes.test.ts
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, readdirSync } from 'node:fs';
import sharp from 'sharp';
import type { Ajv, ValidateFunction } from 'ajv';
import { createAjv } from '../src/ajv.ts';
import { isSliceablePattern, matchesNow } from '../src/http/sliced-pattern.ts';
import { warmValidators } from '../src/http/validate.ts';
import { anthropicErrorType } from '../src/calls/dialects/anthropic-messages/render.ts';
import { requestSchemaDocuments, responseSchemaDocuments } from '../src/calls/shapes/documents.ts';
import { ANTHROPIC_ERROR_TYPES } from '../src/calls/shapes/response-shapes.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, readSse, type Reply, type TestAccount } from './support/http.ts';

const ADMIN = 'tg_admin_shapes_test_token_0123456789abcdef';
const CHAT_MODEL = 'cx/gen-6-luna';
const CLAUDE_MODEL = 'alpha-haiku-4.5';
const RESPONSES_DIR = new URL('../schemas/responses/', import.meta.url);

let gw: TestGateway;
let account: TestAccount;
let png: string;

type Json = Record<string, any>;

// ------------------------------------------------------------------ the response schemas, as checked in

/** Every object that lists its properties made closed: what Tollgate renders has nothing else. */
function closedCopy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closedCopy);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema))
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as Json).map(([p, s]) => [p, closedCopy(s)])) : closedCopy(v);
  if ('properties' in out && !('additionalProperties' in out)) out.additionalProperties = false;
  return out;
}

const responseFiles = readdirSync(RESPONSES_DIR).filter((f) => f.endsWith('.json'));
const strictAjv = createAjv();
const open = new Map<string, ValidateFunction>();
const closed = new Map<string, ValidateFunction>();
for (const file of responseFiles) {
  const name = file.replace(/\.json$/, '');
  const document = JSON.parse(readFileSync(new URL(file, RESPONSES_DIR), 'utf8')) as Json;
  open.set(name, strictAjv.compile(document));
  closed.set(name, strictAjv.compile({ ...(closedCopy(document) as Json), $id: `${document.$id}/closed` }));
}

const errorsOf = (v: ValidateFunction) => (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`).join('; ');

/** Real replies seen, by schema, for the check that a changed reply is refused. */
const seen = new Map<string, unknown>();

/** The reply matches schemas/responses/<name>.json, and has no property its shape leaves out. */
function assertShape(name: string, value: unknown): void {
  const v = open.get(name);
  assert.ok(v, `schemas/responses/${name}.json exists`);
  const excerpt = JSON.stringify(value).slice(0, 500);
  assert.ok(v!(value), `${name}: ${errorsOf(v!)} in ${excerpt}`);
  const c = closed.get(name)!;
  assert.ok(c(value), `${name}, every property declared: ${errorsOf(c)} in ${excerpt}`);
  if (!seen.has(name)) seen.set(name, structuredClone(value));
}

function ok(r: Reply, what: string): Json {
  assert.is(r.status, 200, `${what}: ${r.text.slice(0, 400)}`);
  return r.json as Json;
}

const post = (path: string, body: unknown, key: string | null = account.key) => call(gw, path, { key, body });

/** The data lines of a streamed call, parsed (but the final [DONE]). */
async function streamed(path: string, body: Json): Promise<unknown[]> {
  const res = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  return readSse(res);
}

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN });
  account = await openAccount(gw, { quota: 50_000_000 });
  png = (
    await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 200, g: 40, b: 40 } } })
      .png()
      .toBuffer()
  ).toString('base64');
});

test.after(async () => {
  await gw?.stop();
});

test('every response shape is written to schemas/responses/ and compiles with the strict ajv of src/ajv.ts', () => {
  assert.equal(responseFiles.map((f) => f.replace(/\.json$/, '')).sort(), Object.keys(responseSchemaDocuments()).sort());
});

test('a chat completion, with text and with a tool call', async () => {
  const text = ok(await post('/v1/chat/completions', { model: CHAT_MODEL, messages: [{ role: 'user', content: 'Say hello.' }] }), 'chat');
  assertShape('chat-completions', text);
  assert.type(text.choices[0].message.content, 'string');
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  ];
  const called = ok(
    await post('/v1/chat/completions', { model: CHAT_MODEL, messages: [{ role: 'user', content: 'Use get_weather for Hanoi.' }], tools }),
    'chat with a tool',
  );
  assertShape('chat-completions', called);
  assert.is(called.choices[0].finish_reason, 'tool_calls');
  assert.is(called.choices[0].message.tool_calls[0].function.name, 'get_weather');
});

test('every chunk of a streamed chat completion, with and without the usage chunk, and of a tool call', async () => {
  const base = { model: CHAT_MODEL, messages: [{ role: 'user', content: 'Tell me about rivers.' }], max_tokens: 40 };
  for (const body of [
    base,
    { ...base, stream_options: { include_usage: true } },
    {
      ...base,
      messages: [{ role: 'user', content: 'Call lookup now.' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } } }],
    },
  ]) {
    const payloads = await streamed('/v1/chat/completions', body);
    assert.is(payloads.at(-1), '[DONE]');
    const chunks = payloads.slice(0, -1);
    assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
    for (const chunk of chunks) assertShape('chat-completions-chunk', chunk);
    const last = chunks.at(-1) as Json;
    if ('stream_options' in body) assert.type(last.usage.billed_tokens, 'number');
    else assert.type(last.billed_tokens, 'number');
  }
});

test('an image', async () => {
  const r = ok(
    await post('/v1/images/generations', { model: CLAUDE_MODEL, prompt: 'a red kite over a field', size: '1024x1536', n: 1, response_format: 'b64_json' }),
    'image',
  );
  assertShape('images', r);
  assert.is(r.size, '1024x1536');
});

test('embeddings, as floats and as base64', async () => {
  const floats = ok(await post('/v1/embeddings', { model: CLAUDE_MODEL, input: ['a red kite', 'over a field'], encoding_format: 'float' }), 'embeddings');
  assertShape('embeddings', floats);
  assert.is((floats.data as unknown[]).length, 2);
  const b64 = ok(await post('/v1/embeddings', { model: CLAUDE_MODEL, input: 'a red kite', encoding_format: 'base64', dimensions: 8 }), 'embeddings');
  assertShape('embeddings', b64);
  assert.type((b64.data as Array<{ embedding: unknown }>)[0].embedding, 'string');
});

test('/v1/messages (text and a tool call) and /v1/messages/count_tokens', async () => {
  const message = ok(
    await post('/v1/messages', { model: CLAUDE_MODEL, max_tokens: 60, messages: [{ role: 'user', content: 'Describe a lighthouse.' }] }),
    'message',
  );
  assertShape('messages', message);
  const tools = [{ name: 'get_time', description: 'The time', input_schema: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] } }];
  const tool = ok(
    await post('/v1/messages', { model: CLAUDE_MODEL, max_tokens: 60, tools, messages: [{ role: 'user', content: 'Use get_time for UTC.' }] }),
    'message with a tool',
  );
  assertShape('messages', tool);
  assert.is(tool.stop_reason, 'tool_use');
  const count = ok(await post('/v1/messages/count_tokens', { model: CLAUDE_MODEL, tools, messages: [{ role: 'user', content: 'How many?' }] }), 'count_tokens');
  assertShape('messages-count-tokens', count);
});

test('/v1/responses (text and a function call)', async () => {
  const text = ok(await post('/v1/responses', { model: CHAT_MODEL, input: 'Name three colours.', instructions: 'Be brief.' }), 'response');
  assertShape('responses', text);
  const tools = [
    { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true },
  ];
  const called = ok(
    await post('/v1/responses', { model: CHAT_MODEL, input: 'Use get_weather for Hue.', tools, metadata: { run: 'shapes' } }),
    'response with a tool',
  );
  assertShape('responses', called);
  assert.ok(called.output.some((item: Json) => item.type === 'function_call'));
});

test('/v1/models and /v1/subscription, with a purchase', async () => {
  assertShape('models', ok(await call(gw, '/v1/models', { key: account.key }), 'models'));
  const admin = (path: string, body: unknown, method = 'POST') => call(gw, `/admin/v1${path}`, { key: ADMIN, body, method });
  assert.is((await admin(`/plans/${account.planId}/price`, { amount: 2000 }, 'PUT')).status, 200);
  const paid = await admin(`/accounts/${account.accountId}/payments`, {
    reference: 'INV-SHAPES-1',
    amount: 2000,
    currency: 'USD',
    fee: 0,
    plan_id: account.planId,
  });
  assert.is(paid.status, 201, paid.text);
  await gw.ledger.caughtUp();
  const subscription = ok(await call(gw, '/v1/subscription', { key: account.key }), 'subscription');
  assertShape('subscription', subscription);
  assert.is(subscription.purchases.length, 1);
});

test('errors: OpenAI shape outside the Anthropic routes, Anthropic shape on them', async () => {
  for (const r of [
    await call(gw, '/v1/models'),
    await post('/v1/chat/completions', { model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    await post('/v1/responses', { model: CHAT_MODEL }),
  ]) {
    assert.ok(r.status >= 400, r.text);
    assertShape('error', r.json);
  }
  for (const r of [
    await post('/v1/messages', { model: CLAUDE_MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, null),
    await post('/v1/messages', { model: 'no-such-model', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    await post('/v1/messages/count_tokens', { model: CLAUDE_MODEL }),
  ]) {
    assert.ok(r.status >= 400, r.text);
    assertShape('messages-error', r.json);
  }
  for (let status = 400; status < 600; status++) assert.ok((ANTHROPIC_ERROR_TYPES as readonly string[]).includes(anthropicErrorType(status)), `${status}`);
});

test('the response schemas refuse a reply with a required field gone or, where closed, one field too many', () => {
  assert.equal([...seen.keys()].sort(), [...open.keys()].sort(), 'a real reply of every kind was checked');
  const documents = responseSchemaDocuments() as Record<string, Json>;
  for (const [name, reply] of seen) {
    const v = open.get(name)!;
    const document = documents[name]!;
    const { [document.required[0]]: _gone, ...missing } = reply as Json;
    assert.not.ok(v(missing), `${name} without ${document.required[0]}`);
    if (document.additionalProperties === false) assert.not.ok(v({ ...(reply as Json), unexpected: 1 }), `${name} with one field too many`);
  }
});

// ------------------------------------------------------------------ requests

interface Case {
  body: Json;
  /** The top-level field a refusal names (OpenAI's param starts with it; Anthropic's message names it). */
  field?: string;
}

const dataUri = () => `data:image/png;base64,${png}`;
const user = (content: unknown) => [{ role: 'user', content }];

/** Per request schema: the route, bodies it accepts and bodies it refuses. */
const REQUEST_CASES = (): Record<string, { path: string; anthropic: boolean; valid: Case[]; invalid: Case[] }> => ({
  'chat-completions': {
    path: '/v1/chat/completions',
    anthropic: false,
    valid: [
      {
        body: {
          model: CHAT_MODEL,
          messages: user([
            { type: 'text', text: 'What colour is it?' },
            { type: 'image_url', image_url: { url: dataUri() } },
          ]),
          stop: ['\n\n', 'END'],
          temperature: null,
          max_completion_tokens: 30,
          response_format: { type: 'json_schema', json_schema: { name: 'colour', schema: { type: 'object' } } },
        },
      },
    ],
    invalid: [
      { body: { model: CHAT_MODEL, messages: [] }, field: 'messages' },
      { body: { model: '', messages: user('hi') }, field: 'model' },
      { body: { model: CHAT_MODEL, messages: [{ role: 'robot', content: 'hi' }] }, field: 'messages' },
      { body: { model: CHAT_MODEL, messages: user([{ type: 'text' }]) }, field: 'messages' },
      { body: { model: CHAT_MODEL, messages: user([{ type: 'image_url', image_url: { url: 'ftp://example.com/a.png' } }]) }, field: 'messages' },
      { body: { model: CHAT_MODEL, messages: user('hi'), temperature: 3 }, field: 'temperature' },
      { body: { model: CHAT_MODEL, messages: user('hi'), n: 2 }, field: 'n' },
      { body: { model: CHAT_MODEL, messages: user('hi'), reasoning_effort: 'huge' }, field: 'reasoning_effort' },
      { body: { model: CHAT_MODEL, messages: user('hi'), response_format: { type: 'json_schema' } }, field: 'response_format' },
      { body: { model: CHAT_MODEL, messages: user('hi'), stop: ['a', 'b', 'c', 'd', 'e'] }, field: 'stop' },
    ],
  },
  images: {
    path: '/v1/images/generations',
    anthropic: false,
    valid: [{ body: { model: CLAUDE_MODEL, prompt: 'a small boat', size: '1536x1024', quality: 'auto' } }],
    invalid: [
      { body: { model: CLAUDE_MODEL, prompt: '' }, field: 'prompt' },
      { body: { model: CLAUDE_MODEL, prompt: 'x'.repeat(8001) }, field: 'prompt' },
      { body: { model: CLAUDE_MODEL, prompt: 'a boat', size: '512x512' }, field: 'size' },
      { body: { model: CLAUDE_MODEL, prompt: 'a boat', n: 2 }, field: 'n' },
      { body: { model: CLAUDE_MODEL, prompt: 'a boat', response_format: 'url' }, field: 'response_format' },
    ],
  },
  embeddings: {
    path: '/v1/embeddings',
    anthropic: false,
    valid: [
      { body: { model: CLAUDE_MODEL, input: ['two', 'texts'], encoding_format: 'base64', dimensions: 4 } },
      { body: { model: CLAUDE_MODEL, input: [[1, 2], [3]] } },
    ],
    invalid: [
      { body: { model: CLAUDE_MODEL, input: [] }, field: 'input' },
      { body: { model: CLAUDE_MODEL, input: [''] }, field: 'input' },
      { body: { model: CLAUDE_MODEL, input: 'x', encoding_format: 'int8' }, field: 'encoding_format' },
      { body: { model: CLAUDE_MODEL, input: 'x', dimensions: 0 }, field: 'dimensions' },
    ],
  },
  messages: {
    path: '/v1/messages',
    anthropic: true,
    valid: [
      {
        body: {
          model: CLAUDE_MODEL,
          max_tokens: 30,
          system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
          messages: user([
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
            { type: 'text', text: 'What is this?' },
          ]),
          stop_sequences: ['END'],
          thinking: null,
        },
      },
    ],
    invalid: [
      { body: { model: CLAUDE_MODEL, messages: user('hi') }, field: 'max_tokens' },
      { body: { model: CLAUDE_MODEL, max_tokens: 0, messages: user('hi') }, field: 'max_tokens' },
      { body: { model: CLAUDE_MODEL, max_tokens: 5, messages: [{ role: 'tool', content: 'hi' }] }, field: 'messages' },
      {
        body: {
          model: CLAUDE_MODEL,
          max_tokens: 5,
          messages: user([{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'not base64!' } }]),
        },
        field: 'messages',
      },
      {
        body: { model: CLAUDE_MODEL, max_tokens: 5, messages: user([{ type: 'image', source: { type: 'url', url: 'ftp://example.com/a.png' } }]) },
        field: 'messages',
      },
      { body: { model: CLAUDE_MODEL, max_tokens: 5, messages: user([{ type: 'image' }]) }, field: 'messages' },
    ],
  },
  'messages-count-tokens': {
    path: '/v1/messages/count_tokens',
    anthropic: true,
    valid: [
      { body: { model: CLAUDE_MODEL, system: 'Be brief.', messages: user([{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }]) } },
    ],
    invalid: [
      { body: { model: CLAUDE_MODEL }, field: 'messages' },
      { body: { model: CLAUDE_MODEL, system: 5, messages: user('hi') }, field: 'system' },
      {
        body: { model: CLAUDE_MODEL, messages: user([{ type: 'image', source: { type: 'base64', media_type: 'image/bmp', data: 'AAAA' } }]) },
        field: 'messages',
      },
    ],
  },
  responses: {
    path: '/v1/responses',
    anthropic: false,
    valid: [
      {
        body: {
          model: CHAT_MODEL,
          input: [{ role: 'user', content: [{ type: 'input_text', text: 'Give me a colour as JSON.' }] }],
          text: { format: { type: 'json_schema', name: 'colour', schema: { type: 'object', properties: { colour: { type: 'string' } } } } },
          metadata: { run: 'shapes' },
          store: false,
        },
      },
    ],
    invalid: [
      { body: { model: CHAT_MODEL }, field: 'input' },
      { body: { model: CHAT_MODEL, input: 5 }, field: 'input' },
      { body: { model: CHAT_MODEL, input: 'hi', text: { format: { type: 'json_schema', name: 'x' } } }, field: 'text' },
      { body: { model: CHAT_MODEL, input: 'hi', metadata: { a: 1 } }, field: 'metadata' },
      { body: { model: CHAT_MODEL, input: 'hi', max_output_tokens: 0 }, field: 'max_output_tokens' },
      { body: { model: CHAT_MODEL, input: 'hi', temperature: -1 }, field: 'temperature' },
    ],
  },
});

/** An ajv of src/ajv.ts with `slicedPattern` checked at once (validate.ts defers long strings; these are short). */
function requestAjv(seenPatterns: Set<string>): Ajv {
  const check = (pattern: string) => {
    if (!isSliceablePattern(pattern)) throw new Error(`slicedPattern: no sliced check for ${pattern}`);
    seenPatterns.add(pattern);
    return (value: string) => matchesNow(pattern, value);
  };
  return createAjv({ strict: false }).addKeyword({ keyword: 'slicedPattern', type: 'string', schemaType: 'string', compile: check });
}

test('the TypeBox request schemas compile with the ajv of src/ajv.ts and slicedPattern; validate.ts compiles the written files', () => {
  const patterns = new Set<string>();
  const ajv = requestAjv(patterns);
  const cases = REQUEST_CASES();
  for (const [name, document] of Object.entries(requestSchemaDocuments())) {
    const v = ajv.compile(document);
    for (const { body } of cases[name]!.valid) assert.ok(v(body), `${name} accepts ${JSON.stringify(body).slice(0, 200)}: ${errorsOf(v)}`);
    for (const { body } of cases[name]!.invalid) assert.not.ok(v(body), `${name} refuses ${JSON.stringify(body).slice(0, 200)}`);
  }
  assert.is(patterns.size, 3, 'every sliced pattern is used');
  warmValidators(Object.keys(requestSchemaDocuments()));
});

test('a body its schema refuses is a 400 in the caller dialect; one it accepts is answered', async () => {
  for (const [name, { path, anthropic, valid, invalid }] of Object.entries(REQUEST_CASES())) {
    for (const { body, field } of invalid) {
      const r = await post(path, body);
      const what = `${name} ${JSON.stringify(body).slice(0, 200)}`;
      assert.is(r.status, 400, `${what}: ${r.text.slice(0, 300)}`);
      if (anthropic) {
        assertShape('messages-error', r.json);
        assert.is(r.json.error.type, 'invalid_request_error');
        assert.ok(r.json.error.message.includes(field!), `${what}: ${r.json.error.message}`);
      } else {
        assertShape('error', r.json);
        assert.ok(String(r.json.error.param).startsWith(field!), `${what}: param ${r.json.error.param}`);
      }
    }
    for (const { body } of valid) {
      const reply = ok(await post(path, body), `${name} ${JSON.stringify(body).slice(0, 200)}`);
      assertShape(name, reply);
    }
  }
});

test.run();
