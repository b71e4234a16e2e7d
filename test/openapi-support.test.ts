import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assertMatches, validateAgainst, validatorFor } from './support/openapi.ts';

type Obj = Record<string, unknown>;
const clone = <T>(v: T): T => structuredClone(v);

function without(value: Obj, key: string): Obj {
  const copy = clone(value);
  delete copy[key];
  return copy;
}

/** Top-level keys of `value` whose removal makes it fail `schemaName` (i.e. the required ones it has). */
function requiredKeys(schemaName: string, value: Obj): string[] {
  return Object.keys(value)
    .filter((k) => !validateAgainst(schemaName, without(value, k)).ok)
    .sort();
}

function passes(schemaName: string, value: unknown): void {
  assertMatches(schemaName, value); // throws with readable errors
}

function fails(schemaName: string, value: unknown, expect?: RegExp): void {
  const r = validateAgainst(schemaName, value);
  assert.is(r.ok, false, `expected ${schemaName} to reject ${JSON.stringify(value).slice(0, 300)}`);
  assert.ok(r.errors.length > 0, 'errors text must be non-empty');
  if (expect) assert.match(r.errors, expect);
}

// ---------------------------------------------------------------- Chat Completions

const chatCompletion = {
  id: 'chatcmpl-123',
  object: 'chat.completion',
  created: 1700000000,
  model: 'gpt-4o-mini',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'Hello!', refusal: null },
      finish_reason: 'stop',
      logprobs: null,
    },
  ],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
};

test('chat completion: minimal object passes', () => {
  passes('CreateChatCompletionResponse', chatCompletion);
  passes('CreateChatCompletionResponse', without(chatCompletion, 'usage'));
  passes('CompletionUsage', chatCompletion.usage);
});

test('chat completion: exact required fields', () => {
  assert.equal(requiredKeys('CreateChatCompletionResponse', chatCompletion), ['choices', 'created', 'id', 'model', 'object']);
  assert.equal(requiredKeys('CompletionUsage', chatCompletion.usage), ['completion_tokens', 'prompt_tokens', 'total_tokens']);

  const choice = chatCompletion.choices[0]!;
  for (const k of ['index', 'message', 'finish_reason', 'logprobs']) {
    const v = clone(chatCompletion);
    delete (v.choices[0] as Obj)[k];
    assert.is(validateAgainst('CreateChatCompletionResponse', v).ok, false, `choices[].${k} should be required`);
  }
  assert.equal(requiredKeys('ChatCompletionResponseMessage', choice.message), ['content', 'refusal', 'role']);
});

test('chat completion: invalid objects fail', () => {
  fails('CreateChatCompletionResponse', without(chatCompletion, 'id'), /must have required property 'id'/);
  fails('CreateChatCompletionResponse', { ...chatCompletion, created: '1700000000' }, /\/created must be integer/);
  fails('CreateChatCompletionResponse', { ...chatCompletion, created: 1.5 }, /\/created must be integer/);
  fails(
    'CreateChatCompletionResponse',
    { ...chatCompletion, object: 'chat.completion.chunk' },
    /\/object must be equal to one of the allowed values \["chat.completion"\]/,
  );
  const badFinish = clone(chatCompletion);
  badFinish.choices[0]!.finish_reason = 'done';
  fails('CreateChatCompletionResponse', badFinish, /finish_reason/);
  const nullFinish = clone(chatCompletion) as Obj;
  (nullFinish.choices as Obj[])[0]!.finish_reason = null;
  fails('CreateChatCompletionResponse', nullFinish, /finish_reason must be string/);
  const badRole = clone(chatCompletion) as Obj;
  ((badRole.choices as Obj[])[0]!.message as Obj).role = 'user';
  fails('CreateChatCompletionResponse', badRole, /role/);
  fails('CreateChatCompletionResponse', { ...chatCompletion, usage: { prompt_tokens: 1, completion_tokens: 1 } }, /total_tokens/);
  fails('CompletionUsage', { prompt_tokens: '1', completion_tokens: 1, total_tokens: 2 }, /prompt_tokens must be integer/);
});

// ---------------------------------------------------------------- streaming chunks

const chunk = {
  id: 'chatcmpl-123',
  object: 'chat.completion.chunk',
  created: 1700000000,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' }, finish_reason: null }],
};

test('stream chunk: content, final, and usage-only chunks pass', () => {
  passes('CreateChatCompletionStreamResponse', chunk);
  passes('CreateChatCompletionStreamResponse', {
    ...chunk,
    choices: [{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }],
    usage: null,
  });
  passes('CreateChatCompletionStreamResponse', {
    ...chunk,
    choices: [],
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  });
});

test('stream chunk: exact required fields', () => {
  assert.equal(requiredKeys('CreateChatCompletionStreamResponse', chunk), ['choices', 'created', 'id', 'model', 'object']);
  for (const k of ['index', 'delta', 'finish_reason']) {
    const v = clone(chunk) as Obj;
    delete (v.choices as Obj[])[0]![k];
    assert.is(validateAgainst('CreateChatCompletionStreamResponse', v).ok, false, `choices[].${k} should be required`);
  }
  const noLogprobs = clone(chunk); // logprobs is optional in chunks
  passes('CreateChatCompletionStreamResponse', noLogprobs);
});

test('stream chunk: invalid objects fail', () => {
  fails('CreateChatCompletionStreamResponse', { ...chunk, object: 'chat.completion' }, /allowed values \["chat.completion.chunk"\]/);
  fails('CreateChatCompletionStreamResponse', { ...chunk, choices: [{ index: 0, delta: {} }] }, /finish_reason/);
  fails('CreateChatCompletionStreamResponse', { ...chunk, choices: [{ index: 0, delta: { content: 5 }, finish_reason: null }] }, /content/);
  fails('CreateChatCompletionStreamResponse', { ...chunk, choices: [{ index: 0, delta: {}, finish_reason: 'eos' }] }, /finish_reason/);
  fails('CreateChatCompletionStreamResponse', { ...chunk, choices: null });
});

// ---------------------------------------------------------------- models, images, errors

const models = {
  object: 'list',
  data: [{ id: 'gpt-4o-mini', object: 'model', created: 1700000000, owned_by: 'tollgate' }],
};

test('models list passes, including extra fields', () => {
  passes('ListModelsResponse', models);
  passes('ListModelsResponse', { object: 'list', data: [] });
  passes('ListModelsResponse', {
    object: 'list',
    data: [{ ...models.data[0], multiplier: 1.5, context_window: 128000 }],
    has_more: false,
  });
  passes('Model', models.data[0]);
  assert.equal(requiredKeys('ListModelsResponse', models), ['data', 'object']);
  assert.equal(requiredKeys('Model', models.data[0] as Obj), ['created', 'id', 'object', 'owned_by']);
});

test('models list: invalid objects fail', () => {
  fails('ListModelsResponse', { object: 'models', data: [] }, /allowed values \["list"\]/);
  fails('ListModelsResponse', { object: 'list', data: [{ id: 'x', object: 'model', created: 1 }] }, /owned_by/);
  fails('ListModelsResponse', { object: 'list', data: [{ ...models.data[0], created: '2024-01-01' }] }, /created must be integer/);
  fails('Model', { ...models.data[0], object: 'engine' }, /allowed values \["model"\]/);
});

test('images response passes; invalid fails', () => {
  passes('ImagesResponse', { created: 1700000000, data: [{ b64_json: 'iVBORw0KGgo=' }] });
  passes('ImagesResponse', { created: 1700000000, data: [{ url: 'https://example.com/a.png', revised_prompt: 'x' }] });
  passes('ImagesResponse', { created: 1700000000 });
  assert.equal(requiredKeys('ImagesResponse', { created: 1, data: [] }), ['created']);
  fails('ImagesResponse', { data: [{ b64_json: 'x' }] }, /created/);
  fails('ImagesResponse', { created: 1, data: [{ b64_json: 42 }] }, /b64_json must be string/);
  fails('ImagesResponse', { created: 1, data: [{ url: 'not a uri' }] }, /format/);
  fails('ImagesResponse', { created: 1, data: [], output_format: 'gif' }, /output_format/);
});

const errorBody = { error: { message: 'Insufficient balance', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } };

test('error response passes; invalid fails', () => {
  passes('ErrorResponse', errorBody);
  passes('ErrorResponse', { error: { ...errorBody.error, code: null } });
  assert.equal(requiredKeys('ErrorResponse', errorBody), ['error']);
  assert.equal(requiredKeys('Error', errorBody.error), ['code', 'message', 'param', 'type']);
  fails('ErrorResponse', { error: { message: 'x', type: 'y', code: null } }, /param/);
  fails('ErrorResponse', { error: { message: 'x', type: 'y', param: null, code: 402 } }, /code/);
  fails('ErrorResponse', { message: 'x' }, /error/);
});

// ---------------------------------------------------------------- Responses API

const outputText = { type: 'output_text', text: 'Hello!', annotations: [], logprobs: [] };
const messageItem = { id: 'msg_1', type: 'message', role: 'assistant', status: 'completed', content: [outputText] };

const response = {
  id: 'resp_1',
  object: 'response',
  created_at: 1700000000,
  status: 'completed',
  model: 'gpt-4o-mini',
  output: [messageItem],
  error: null,
  incomplete_details: null,
  instructions: null,
  tools: [],
  tool_choice: 'auto',
  parallel_tool_calls: true,
  metadata: {},
  temperature: 1,
  top_p: 1,
  usage: {
    input_tokens: 5,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: 2,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 7,
  },
};

const RESPONSE_REQUIRED = [
  'created_at',
  'error',
  'id',
  'incomplete_details',
  'instructions',
  'metadata',
  'model',
  'object',
  'output',
  'parallel_tool_calls',
  'temperature',
  'tool_choice',
  'tools',
  'top_p',
];

test('Response: minimal object passes and exact required fields', () => {
  passes('Response', response);
  passes('Response', { ...without(response, 'usage'), metadata: null, temperature: null, top_p: null, status: 'in_progress', output: [] });
  assert.equal(requiredKeys('Response', response), RESPONSE_REQUIRED);
  assert.equal(requiredKeys('OutputMessage', messageItem), ['content', 'id', 'role', 'status', 'type']);
  assert.equal(requiredKeys('OutputTextContent', outputText), ['annotations', 'logprobs', 'text', 'type']);
  assert.equal(requiredKeys('ResponseUsage', response.usage), [
    'input_tokens',
    'input_tokens_details',
    'output_tokens',
    'output_tokens_details',
    'total_tokens',
  ]);
});

const streamEvents: Array<[string, string, Obj, string[]]> = [
  [
    'ResponseCreatedEvent',
    'response.created',
    { type: 'response.created', sequence_number: 0, response: { ...without(response, 'usage'), status: 'in_progress', output: [] } },
    ['response', 'sequence_number', 'type'],
  ],
  [
    'ResponseInProgressEvent',
    'response.in_progress',
    { type: 'response.in_progress', sequence_number: 1, response: { ...response, status: 'in_progress', output: [] } },
    ['response', 'sequence_number', 'type'],
  ],
  [
    'ResponseOutputItemAddedEvent',
    'response.output_item.added',
    { type: 'response.output_item.added', sequence_number: 2, output_index: 0, item: { ...messageItem, status: 'in_progress', content: [] } },
    ['item', 'output_index', 'sequence_number', 'type'],
  ],
  [
    'ResponseContentPartAddedEvent',
    'response.content_part.added',
    { type: 'response.content_part.added', sequence_number: 3, item_id: 'msg_1', output_index: 0, content_index: 0, part: { ...outputText, text: '' } },
    ['content_index', 'item_id', 'output_index', 'part', 'sequence_number', 'type'],
  ],
  [
    'ResponseTextDeltaEvent',
    'response.output_text.delta',
    { type: 'response.output_text.delta', sequence_number: 4, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hello!', logprobs: [] },
    ['content_index', 'delta', 'item_id', 'logprobs', 'output_index', 'sequence_number', 'type'],
  ],
  [
    'ResponseTextDoneEvent',
    'response.output_text.done',
    { type: 'response.output_text.done', sequence_number: 5, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'Hello!', logprobs: [] },
    ['content_index', 'item_id', 'logprobs', 'output_index', 'sequence_number', 'text', 'type'],
  ],
  [
    'ResponseContentPartDoneEvent',
    'response.content_part.done',
    { type: 'response.content_part.done', sequence_number: 6, item_id: 'msg_1', output_index: 0, content_index: 0, part: outputText },
    ['content_index', 'item_id', 'output_index', 'part', 'sequence_number', 'type'],
  ],
  [
    'ResponseOutputItemDoneEvent',
    'response.output_item.done',
    { type: 'response.output_item.done', sequence_number: 7, output_index: 0, item: messageItem },
    ['item', 'output_index', 'sequence_number', 'type'],
  ],
  ['ResponseCompletedEvent', 'response.completed', { type: 'response.completed', sequence_number: 8, response }, ['response', 'sequence_number', 'type']],
];

for (const [schema, type, event, required] of streamEvents) {
  test(`Responses stream event ${type}: passes, required = ${required.join(',')}`, () => {
    passes(schema, event);
    passes('ResponseStreamEvent', event);
    assert.equal(requiredKeys(schema, event), required);
    fails(schema, { ...event, type: 'response.bogus' }, /allowed values/);
    fails(schema, { ...event, sequence_number: '1' }, /sequence_number must be integer/);
  });
}

test('Responses: invalid objects fail', () => {
  fails('ResponseCompletedEvent', { type: 'response.completed', sequence_number: 1, response: without(response, 'tools') }, /tools/);
  fails('ResponseCompletedEvent', { type: 'response.completed', sequence_number: 1, response: { ...response, object: 'chat.completion' } }, /object/);
  fails('Response', { ...response, status: 'done' }, /status/);
  // The schema types `usage` as an object (not nullable): omit it rather than sending null.
  fails('Response', { ...response, usage: null }, /\/usage must be object/);
  fails('Response', { ...response, created_at: '2024' }, /created_at/);
  fails('Response', { ...response, usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } }, /input_tokens_details/);
  fails('Response', { ...response, output: [{ ...messageItem, content: [{ type: 'output_text', text: 'x' }] }] });
  fails(
    'ResponseTextDeltaEvent',
    { type: 'response.output_text.delta', sequence_number: 1, item_id: 'm', output_index: 0, content_index: 0, delta: 'x' },
    /logprobs/,
  );
  fails('ResponseStreamEvent', { type: 'response.output_text.delta', sequence_number: 1 });
  fails('ResponseStreamEvent', { type: 'nonsense' });
});

// ---------------------------------------------------------------- module behaviour

test('unknown schema name throws; validators are cached', () => {
  assert.throws(() => validateAgainst('NoSuchSchema', {}), /Unknown OpenAPI schema "NoSuchSchema"/);
  assert.ok(validateAgainst('CreateChatCompletionResponse', chatCompletion).ok);
  assert.is(validatorFor('CreateChatCompletionResponse'), validatorFor('CreateChatCompletionResponse'), 'compiled once, then cached');
});

test('assertMatches throws a readable error', () => {
  try {
    assertMatches('CreateChatCompletionResponse', { ...chatCompletion, object: 'nope', created: 'x' });
    assert.unreachable('should have thrown');
  } catch (e) {
    const msg = (e as Error).message;
    assert.match(msg, /does not match OpenAPI schema CreateChatCompletionResponse/);
    assert.match(msg, /\/object must be equal to one of the allowed values \["chat.completion"\]/);
    assert.match(msg, /\/created must be integer/);
  }
});

test.run();
