// The Gemini adapter's pure parts: a canonical call as generateContent's contents and config,
// usageMetadata as the gateway meters it, finish reasons, blocked prompts, and how the client's
// errors are classified (and redacted). The wire itself is tested against the Gemini double.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError, type GenerateContentResponse } from '@google/genai';
import { UpstreamError, type ChatCall } from '../src/upstream/port.ts';
import { answerParts, blockedPrompt, finishReasonOf, fromToolCallId, generateRequest, toolCallOf } from '../src/upstream/gemini/translate.ts';
import { chatRequestBody } from '../src/upstream/openai-chat-wire.ts';
import { converseInput } from '../src/upstream/bedrock/translate.ts';
import { usageOf } from '../src/upstream/gemini/usage.ts';
import { geminiFailureOf } from '../src/upstream/gemini/errors.ts';

const signal = new AbortController().signal;
const WEATHER = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

function callOf(overrides: Partial<ChatCall>): ChatCall {
  return { upstreamModel: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], maxTokens: 500, params: {}, signal, ...overrides };
}

test('system and developer messages become the system instruction; the turns alternate user and model', () => {
  const { contents, config } = generateRequest(
    callOf({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: 'Answer in English.' },
        { role: 'user', content: 'First' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Second' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0K' } },
          ],
        },
        { role: 'assistant', content: 'Answer' },
      ],
    }),
    signal,
  );
  assert.equal(config.systemInstruction, { parts: [{ text: 'Be brief.\n\nAnswer in English.' }] });
  assert.equal(contents, [
    { role: 'user', parts: [{ text: 'First' }, { text: 'Second' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0K' } }] },
    { role: 'model', parts: [{ text: 'Answer' }] },
  ]);
  assert.is(config.maxOutputTokens, 500);
  assert.equal(config.automaticFunctionCalling, { disable: true });
  assert.is(config.automaticContinuation, false);
});

test("an image given by URL is the caller's 400, and the URL is not echoed", () => {
  const url = 'https://signed.example/cat.png?sig=SECRETSIG';
  try {
    generateRequest(callOf({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }] }), signal);
    assert.unreachable('an http image was accepted');
  } catch (error) {
    assert.instance(error, UpstreamError);
    assert.is((error as UpstreamError).kind, 'request');
    assert.not.match((error as Error).message, 'SECRETSIG');
  }
});

test("tool calls go out as the model's functionCall parts and results as functionResponse parts named after their call", () => {
  const { contents, config } = generateRequest(
    callOf({
      tools: [WEATHER],
      toolChoice: { type: 'function', function: { name: 'get_weather' } },
      messages: [
        { role: 'user', content: 'Weather in Oslo and Rome?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: 'not json' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: '{"temp":3}' },
        { role: 'tool', tool_call_id: 'call_b', content: 'sunny' },
      ],
    }),
    signal,
  );
  assert.equal(contents[1], {
    role: 'model',
    parts: [{ functionCall: { id: 'call_a', name: 'get_weather', args: { city: 'Oslo' } } }, { functionCall: { id: 'call_b', name: 'get_weather', args: {} } }],
  });
  assert.equal(contents[2], {
    role: 'user',
    parts: [
      { functionResponse: { id: 'call_a', name: 'get_weather', response: { temp: 3 } } },
      { functionResponse: { id: 'call_b', name: 'get_weather', response: { result: 'sunny' } } },
    ],
  });
  assert.equal(config.tools, [
    { functionDeclarations: [{ name: 'get_weather', description: 'Weather now', parametersJsonSchema: WEATHER.function.parameters }] },
  ]);
  assert.equal(config.toolConfig, { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
  for (const [choice, mode] of [
    ['auto', 'AUTO'],
    ['none', 'NONE'],
    ['required', 'ANY'],
  ] as const) {
    assert.equal(generateRequest(callOf({ tools: [WEATHER], toolChoice: choice }), signal).config.toolConfig, { functionCallingConfig: { mode } });
  }
});

test('parameters, structured output and reasoning effort map onto the generation config', () => {
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
  const { config } = generateRequest(
    callOf({
      maxTokens: 2000,
      reasoningEffort: 'high',
      params: {
        temperature: 0.2,
        top_p: 0.9,
        stop: 'END',
        seed: 7,
        presence_penalty: 0.1,
        response_format: { type: 'json_schema', json_schema: { name: 'a', schema } },
      },
    }),
    signal,
  );
  assert.is(config.temperature, 0.2);
  assert.is(config.topP, 0.9);
  assert.equal(config.stopSequences, ['END']);
  assert.is(config.seed, 7);
  assert.is(config.presencePenalty, 0.1);
  assert.is(config.responseMimeType, 'application/json');
  assert.equal(config.responseJsonSchema, schema);
  // The budget never passes the output cap the hold covers.
  assert.equal(config.thinkingConfig, { thinkingBudget: 2000 });
  assert.equal(generateRequest(callOf({ reasoningEffort: 'low' }), signal).config.thinkingConfig, { thinkingBudget: 500 });
  assert.is(generateRequest(callOf({}), signal).config.thinkingConfig, undefined);
  const jsonObject = generateRequest(callOf({ params: { response_format: { type: 'json_object' } } }), signal).config;
  assert.is(jsonObject.responseMimeType, 'application/json');
  assert.is(jsonObject.responseJsonSchema, undefined);
});

test('usageMetadata: cached tokens are within the prompt, thinking is billed as output beside the candidates', () => {
  assert.equal(
    usageOf({ promptTokenCount: 1200, cachedContentTokenCount: 1024, candidatesTokenCount: 40, thoughtsTokenCount: 300, totalTokenCount: 1540 }, 'chat'),
    {
      prompt_tokens: 1200,
      completion_tokens: 340,
      cached_tokens: 1024,
      reasoning_tokens: 300,
    },
  );
  // Gemini's own tools' prompts are input too; a reply cut before any candidate has no candidates count.
  assert.equal(usageOf({ promptTokenCount: 10, toolUsePromptTokenCount: 5 }, 'chat'), { prompt_tokens: 15, completion_tokens: 0 });
  assert.throws(() => usageOf(undefined, 'chat'), /no usage/);
  assert.throws(() => usageOf({ candidatesTokenCount: 3 }, 'chat'), /no usage/);
});

test('thought parts are never the answer; function calls become tool calls; finish reasons', () => {
  const response = {
    candidates: [
      {
        content: {
          role: 'model',
          parts: [{ text: 'thinking hard', thought: true }, { text: 'Hello' }, { functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }],
        },
        finishReason: 'STOP',
      },
    ],
  } as unknown as GenerateContentResponse;
  const parts = answerParts(response);
  assert.equal(
    parts.map((p) => p.text ?? null),
    ['Hello', null],
  );
  const toolCall = toolCallOf(parts[1]!)!;
  assert.is(toolCall.function.name, 'get_weather');
  assert.is(toolCall.function.arguments, '{"city":"Oslo"}');
  assert.match(toolCall.id, /^call_\w{24}$/);
  assert.is(finishReasonOf('STOP', true), 'tool_calls');
  assert.is(finishReasonOf('STOP', false), 'stop');
  assert.is(finishReasonOf('MAX_TOKENS', false), 'length');
  assert.is(finishReasonOf('SAFETY', false), 'stop');
});

test("a blocked prompt is the caller's 400; a reply with candidates is not blocked", () => {
  const blocked = blockedPrompt({ promptFeedback: { blockReason: 'SAFETY' } } as unknown as GenerateContentResponse, 'chat')!;
  assert.is(blocked.kind, 'request');
  assert.is(blocked.status, 400);
  assert.match(blocked.message, 'SAFETY');
  assert.is(
    blockedPrompt({ candidates: [{ content: { parts: [] } }], promptFeedback: { blockReason: 'SAFETY' } } as unknown as GenerateContentResponse, 'chat'),
    undefined,
  );
});

test("client errors: an invalid key is the operator's, 429 and 5xx fail over, other 400s are the caller's; no secret in the detail", () => {
  const KEY = 'AIzaSy-SECRET-KEY-0123456789';
  const apiError = (status: number, error: Record<string, unknown>) => new ApiError({ status, message: JSON.stringify({ error: { code: status, ...error } }) });
  const badKey = geminiFailureOf(
    apiError(400, {
      status: 'INVALID_ARGUMENT',
      message: `API key not valid: ${KEY}`,
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }],
    }),
    'chat',
    [KEY],
  )!;
  assert.is(badKey.kind, 'config');
  assert.not.match(badKey.message, KEY);
  assert.match(badKey.message, 'INVALID_ARGUMENT');
  assert.is(geminiFailureOf(apiError(400, { status: 'INVALID_ARGUMENT', message: 'bad schema' }), 'chat', [])!.kind, 'request');
  assert.is(geminiFailureOf(apiError(403, { status: 'PERMISSION_DENIED', message: 'no' }), 'chat', [])!.kind, 'config');
  assert.is(geminiFailureOf(apiError(429, { status: 'RESOURCE_EXHAUSTED', message: 'quota' }), 'chat', [])!.kind, 'retriable');
  assert.is(geminiFailureOf(apiError(503, { status: 'UNAVAILABLE', message: 'overloaded' }), 'chat', [])!.kind, 'retriable');
  // A stream's error chunk: the client's message has a prefix before the JSON.
  const inStream = geminiFailureOf(
    new ApiError({ status: 500, message: 'got status: INTERNAL. {"error":{"code":500,"status":"INTERNAL","message":"boom"}}' }),
    'chat stream',
    [],
  )!;
  assert.is(inStream.kind, 'retriable');
  assert.match(inStream.message, 'boom');
  assert.is(geminiFailureOf(new Error('Incomplete JSON segment at the end'), 'chat stream', [])!.kind, 'retriable');
  assert.is(geminiFailureOf(new TypeError('fetch failed'), 'chat', []), undefined);
});

test("Gemini 3's thought signature rides in the tool call id and goes back exactly; a call begun elsewhere gets Google's stand-in; short-id wires get a digest", () => {
  const signature = Buffer.from('a signature with / and + in its base64 ~~~').toString('base64');
  const toolCall = toolCallOf({ functionCall: { name: 'get_weather', args: { city: 'Oslo' } }, thoughtSignature: signature })!;
  assert.match(toolCall.id, /^[\w-]+$/);
  assert.equal(fromToolCallId(toolCall.id).signature, signature);
  const history = (id: string): ChatCall['messages'] => [
    { role: 'user', content: 'Weather?' },
    { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool', tool_call_id: id, content: 'Snow' },
  ];
  const sent = generateRequest(callOf({ upstreamModel: 'gemini-3-pro-preview', messages: history(toolCall.id) }), signal).contents;
  const part = sent[1]!.parts![0]!;
  assert.is(part.thoughtSignature, signature);
  assert.is(part.functionCall!.id, fromToolCallId(toolCall.id).id);
  assert.is(sent[2]!.parts![0]!.functionResponse!.id, fromToolCallId(toolCall.id).id);
  const elsewhere = generateRequest(callOf({ upstreamModel: 'gemini-3-pro-preview', messages: history('call_from_openai') }), signal).contents;
  assert.is(elsewhere[1]!.parts![0]!.thoughtSignature, 'skip_thought_signature_validator');
  // Gemini 2.5 takes no stand-in.
  assert.is(generateRequest(callOf({ messages: history('call_from_openai') }), signal).contents[1]!.parts![0]!.thoughtSignature, undefined);
  // OpenAI takes ids of 40 characters at most, Bedrock 64: the call and its result get the same digest.
  const openai = chatRequestBody(callOf({ messages: history(toolCall.id) }), false, 'max_tokens').messages as Record<string, any>[];
  assert.ok(openai[1]!.tool_calls[0].id.length <= 40);
  assert.is(openai[2]!.tool_call_id, openai[1]!.tool_calls[0].id);
  const bedrock = converseInput(callOf({ messages: history(toolCall.id) })).messages!;
  const toolUseId = bedrock[1]!.content![0]!.toolUse!.toolUseId!;
  assert.ok(toolUseId.length <= 64 && /^[\w-]+$/.test(toolUseId));
  assert.is(bedrock[2]!.content![0]!.toolResult!.toolUseId, toolUseId);
});

test.run();
