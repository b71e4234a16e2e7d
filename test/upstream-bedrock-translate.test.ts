// The Bedrock adapter's pure parts: a canonical call as a Converse request (cache points where a
// Messages caller put cache_control), Converse usage as the gateway meters it, replies and stop
// reasons, and how the client's exceptions are classified (and redacted). The wire itself is
// tested against the Bedrock double.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { BedrockRuntimeServiceException, ThrottlingException, ValidationException, type ConverseResponse } from '@aws-sdk/client-bedrock-runtime';
import type { ChatCall } from '../src/upstream/port.ts';
import { chatOutcomeOf, converseInput, finishReasonOf } from '../src/upstream/bedrock/translate.ts';
import { usageOf } from '../src/upstream/bedrock/usage.ts';
import { bedrockFailureOf } from '../src/upstream/bedrock/errors.ts';
import { toCanonicalMessages } from '../src/calls/dialects/anthropic-messages/render.ts';
import { chatRequestBody } from '../src/upstream/openai-chat-wire.ts';

const signal = new AbortController().signal;
const CLAUDE = 'anthropic.claude-sonnet-4-5-20250929-v1:0';

function callOf(overrides: Partial<ChatCall>): ChatCall {
  return { upstreamModel: CLAUDE, messages: [{ role: 'user', content: 'Hi' }], maxTokens: 4000, params: {}, signal, ...overrides };
}

test("a Messages caller's cache_control becomes cache points after the system prompt and the marked turn; no other wire sees the marks", () => {
  const messages = toCanonicalMessages({
    system: [{ type: 'text', text: 'You are a careful assistant.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'A long document', cache_control: { type: 'ephemeral' } }] },
      { role: 'assistant', content: 'Read it.' },
      { role: 'user', content: 'Summarise it' },
    ],
  });
  assert.equal(
    messages.map((m) => m.cacheBreakpoint ?? false),
    [true, true, false, false],
  );
  const input = converseInput(callOf({ messages }));
  assert.equal(input.system, [{ text: 'You are a careful assistant.' }, { cachePoint: { type: 'default' } }]);
  assert.equal(input.messages, [
    { role: 'user', content: [{ text: 'A long document' }, { cachePoint: { type: 'default' } }] },
    { role: 'assistant', content: [{ text: 'Read it.' }] },
    { role: 'user', content: [{ text: 'Summarise it' }] },
  ]);
  const openai = chatRequestBody(callOf({ messages }), false, 'max_tokens').messages as Record<string, unknown>[];
  assert.ok(openai.every((m) => !('cacheBreakpoint' in m)));
});

test('tool calls and their results, tools and tool choice, thinking for Anthropic models, structured output', () => {
  const schema = { type: 'object', properties: { city: { type: 'string' } } };
  const input = converseInput(
    callOf({
      reasoningEffort: 'medium',
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters: schema } }],
      toolChoice: { type: 'function', function: { name: 'get_weather' } },
      params: { temperature: 0.5, stop: ['END'], response_format: { type: 'json_schema', json_schema: { name: 'answer', schema } } },
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'tu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'tu_1', content: '{"temp":3}' },
        { role: 'user', content: 'And now?' },
      ],
    }),
  );
  assert.equal(input.messages![1], { role: 'assistant', content: [{ toolUse: { toolUseId: 'tu_1', name: 'get_weather', input: { city: 'Oslo' } } }] });
  // The tool result and the next user text share one user turn.
  assert.equal(input.messages![2], { role: 'user', content: [{ toolResult: { toolUseId: 'tu_1', content: [{ json: { temp: 3 } }] } }, { text: 'And now?' }] });
  assert.equal(input.toolConfig, {
    tools: [{ toolSpec: { name: 'get_weather', description: 'Weather now', inputSchema: { json: schema } } }],
    toolChoice: { tool: { name: 'get_weather' } },
  });
  assert.equal(input.inferenceConfig, { maxTokens: 4000, temperature: 0.5, stopSequences: ['END'] });
  assert.equal(input.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 2000 } });
  assert.equal(input.outputConfig, { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'answer' } } } });
  // tool_choice none: no tools offered, unless the history holds tool blocks (Converse needs the toolConfig then).
  const weather = [{ type: 'function' as const, function: { name: 'get_weather', parameters: schema } }];
  assert.is(converseInput(callOf({ tools: weather, toolChoice: 'none' })).toolConfig, undefined);
  assert.ok(converseInput(callOf({ tools: weather, toolChoice: 'none', messages: [{ role: 'tool', tool_call_id: 'tu_1', content: 'x' }] })).toolConfig);
  // Other vendors' models on Bedrock get no Anthropic thinking block.
  assert.is(converseInput(callOf({ upstreamModel: 'amazon.nova-pro-v1:0', reasoningEffort: 'high' })).additionalModelRequestFields, undefined);
});

test('Converse usage: inputTokens is only the uncached part, the cache reads and writes are added to the prompt', () => {
  assert.equal(usageOf({ inputTokens: 12, outputTokens: 40, totalTokens: 2100, cacheReadInputTokens: 1024, cacheWriteInputTokens: 1024 }, 'chat'), {
    prompt_tokens: 2060,
    completion_tokens: 40,
    cached_tokens: 1024,
    cache_write_tokens: 1024,
  });
  assert.equal(usageOf({ inputTokens: 5, outputTokens: 1, totalTokens: 6 }, 'chat'), {
    prompt_tokens: 5,
    completion_tokens: 1,
    cached_tokens: 0,
    cache_write_tokens: 0,
  });
  assert.throws(() => usageOf(undefined, 'chat'), /no usage/);
});

test('a reply: text joined, reasoning left out, tool uses as tool calls; stop reasons', () => {
  const outcome = chatOutcomeOf(
    {
      output: {
        message: {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'hmm', signature: 's' } } },
            { text: 'Hello' },
            { toolUse: { toolUseId: 'tu_9', name: 'f', input: { a: 1 } } },
          ],
        },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 3, outputTokens: 9, totalTokens: 12 },
      metrics: { latencyMs: 1 },
      $metadata: {},
    } as ConverseResponse,
    'chat',
  );
  assert.is(outcome.content, 'Hello');
  assert.equal(outcome.toolCalls, [{ id: 'tu_9', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }]);
  assert.is(outcome.finishReason, 'tool_calls');
  assert.is(finishReasonOf('max_tokens', false), 'length');
  assert.is(finishReasonOf('end_turn', false), 'stop');
  assert.is(finishReasonOf('guardrail_intervened', false), 'stop');
});

test("exceptions: validation is the caller's, credentials the operator's, throttling and capacity fail over; no secret in the detail", () => {
  const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY';
  const meta = (status: number) => ({ $metadata: { httpStatusCode: status }, $fault: 'client' as const });
  const invalid = bedrockFailureOf(new ValidationException({ message: 'The provided model identifier is invalid.', ...meta(400) }), 'chat', [])!;
  assert.is(invalid.kind, 'request');
  assert.is(invalid.status, 400);
  assert.is(bedrockFailureOf(new ThrottlingException({ message: 'Too many requests', ...meta(429) }), 'chat', [])!.kind, 'retriable');
  const unrecognized = new BedrockRuntimeServiceException({
    name: 'UnrecognizedClientException',
    message: `The security token ${SECRET} is invalid.`,
    ...meta(403),
  });
  const refused = bedrockFailureOf(unrecognized, 'chat', [SECRET])!;
  assert.is(refused.kind, 'config');
  assert.not.match(refused.message, SECRET);
  assert.match(refused.message, 'UnrecognizedClientException');
  assert.is(
    bedrockFailureOf(
      new BedrockRuntimeServiceException({ name: 'ServiceUnavailableException', message: 'busy', $metadata: { httpStatusCode: 503 }, $fault: 'server' }),
      'chat',
      [],
    )!.kind,
    'retriable',
  );
  assert.is(bedrockFailureOf(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'chat', []), undefined);
});

test.run();
