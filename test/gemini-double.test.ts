// The Gemini double, checked with the official @google/genai client pointed straight at it: if the
// client parses what the double sends, gateway tests built on the double test the real wire format.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import { createAjv } from '../src/ajv.ts';
import { jsonPieces, jsonTokens, wordPieces, rejection } from './support/double-http.ts';
import {
  GEMINI_CACHE_MIN_TOKENS,
  GEMINI_DEFAULT_REPLY,
  GEMINI_EMBEDDING_DIMENSIONS,
  GEMINI_MEDIA_TOKENS,
  GEMINI_THOUGHT_SUMMARY,
  GEMINI_THOUGHT_TOKENS,
  geminiPromptTokens,
  startGeminiDouble,
  type GeminiDouble,
} from './support/gemini-double.ts';

const KEY = 'gemini-test-key-0123456789';
const MODEL = 'gemini-2.5-flash';
const words = (text: string) => wordPieces(text).length;
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
type Data = Record<string, any>;

let gemini: GeminiDouble;
let ai: GoogleGenAI;

test.before(async () => {
  gemini = await startGeminiDouble({ apiKey: KEY });
  ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gemini.url } });
});

test.after(async () => {
  await gemini?.close();
});

test.before.each(() => {
  gemini.setDefault(null);
});

const weather = {
  name: 'get_weather',
  description: 'Current weather for a city',
  parametersJsonSchema: {
    type: 'object',
    properties: { city: { type: 'string', minLength: 2 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
  },
};

test('generateContent: the path, the key header, the text, and usage exact to the token', async () => {
  const reply = await ai.models.generateContent({ model: MODEL, contents: 'Hello there', config: { systemInstruction: 'Be brief.' } });
  const request = last(gemini.requests);
  assert.is(request.path, `/v1beta/models/${MODEL}:generateContent`);
  assert.is(request.headers['x-goog-api-key'], KEY);
  assert.is(request.headers.authorization, undefined);
  assert.equal(last(gemini.seen), { model: MODEL, method: 'generateContent', apiVersion: 'v1beta', alt: null });
  assert.equal(request.body, {
    contents: [{ role: 'user', parts: [{ text: 'Hello there' }] }],
    systemInstruction: { role: 'user', parts: [{ text: 'Be brief.' }] },
    generationConfig: {},
  });
  assert.is(reply.text, GEMINI_DEFAULT_REPLY);
  const candidate = reply.candidates![0]!;
  assert.equal([candidate.finishReason, candidate.index, candidate.content?.role], ['STOP', 0, 'model']);
  assert.is(reply.modelVersion, MODEL);
  assert.match(reply.responseId ?? '', /^\w{22}$/);
  // By hand: each segment costs ceil(JSON length / 4).
  const prompt = jsonTokens({ role: 'user', parts: [{ text: 'Be brief.' }] }) + jsonTokens({ role: 'user', parts: [{ text: 'Hello there' }] });
  assert.is(geminiPromptTokens(request.body), prompt);
  const usage = { ...reply.usageMetadata };
  assert.equal(usage, {
    promptTokenCount: prompt,
    candidatesTokenCount: words(GEMINI_DEFAULT_REPLY),
    totalTokenCount: prompt + words(GEMINI_DEFAULT_REPLY),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
  });
  assert.equal(last(gemini.usages), usage);
});

test('maxOutputTokens cuts the reply (MAX_TOKENS) and stopSequences end it early (STOP)', async () => {
  const cut = await ai.models.generateContent({ model: MODEL, contents: 'Hi', config: { maxOutputTokens: 4 } });
  assert.is(cut.text, wordPieces(GEMINI_DEFAULT_REPLY).slice(0, 4).join(''));
  assert.equal([cut.candidates![0]!.finishReason, cut.usageMetadata?.candidatesTokenCount], ['MAX_TOKENS', 4]);
  const two = await ai.models.generateContent({ model: MODEL, contents: 'Hi', config: { candidateCount: 2 } });
  assert.equal(
    two.candidates!.map((c) => [c.index, c.content?.parts?.[0]?.text]),
    [
      [0, GEMINI_DEFAULT_REPLY],
      [1, GEMINI_DEFAULT_REPLY],
    ],
  );
  assert.is(two.usageMetadata?.candidatesTokenCount, 2 * words(GEMINI_DEFAULT_REPLY));
  const stopped = await ai.models.generateContent({ model: MODEL, contents: 'Hi', config: { stopSequences: ['double'] } });
  assert.is(stopped.text, 'Hello from the Gemini ');
  assert.equal([stopped.candidates![0]!.finishReason, stopped.usageMetadata?.candidatesTokenCount], ['STOP', 4]);
});

test('generateContentStream: SSE framed as Google does, text joined is the reply, running usage on every chunk', async () => {
  const chunks = [];
  for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: 'Stream to me' })) chunks.push(chunk);
  assert.equal(last(gemini.seen), { model: MODEL, method: 'streamGenerateContent', apiVersion: 'v1beta', alt: 'sse' });
  assert.is(chunks.length, words(GEMINI_DEFAULT_REPLY));
  assert.is(chunks.map((c) => c.text).join(''), GEMINI_DEFAULT_REPLY);
  const prompt = geminiPromptTokens(last(gemini.requests).body);
  chunks.forEach((c, i) => {
    assert.is(c.usageMetadata?.promptTokenCount, prompt);
    assert.is(c.usageMetadata?.candidatesTokenCount, i + 1, 'cumulative, not a delta');
    assert.is(c.candidates![0]!.finishReason, i === chunks.length - 1 ? 'STOP' : undefined);
  });
  assert.equal({ ...last(chunks).usageMetadata }, last(gemini.usages));
  assert.is(last(gemini.usages).totalTokenCount, prompt + words(GEMINI_DEFAULT_REPLY));

  const raw = await fetch(`${gemini.url}/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`, {
    method: 'POST',
    headers: { 'x-goog-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'raw' }] }] }),
  });
  const text = await raw.text();
  assert.match(raw.headers.get('content-type') ?? '', /^text\/event-stream/);
  assert.ok(text.startsWith('data: {"candidates":') && text.endsWith('}\r\n\r\n'), text.slice(0, 80));
  assert.is(text.split('\r\n\r\n').length - 1, words(GEMINI_DEFAULT_REPLY));
  // Without alt=sse (and with the key as ?key=): one JSON array of responses.
  const array = await fetch(`${gemini.url}/v1beta/models/${MODEL}:streamGenerateContent?key=${KEY}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'raw' }] }] }),
  });
  const responses = (await array.json()) as Data[];
  assert.equal([array.status, Array.isArray(responses), responses[0]?.candidates?.[0]?.content?.parts?.[0]?.text], [200, true, GEMINI_DEFAULT_REPLY]);
});

test('function calling: one whole functionCall part, args an instance of the declared schema, STOP; NONE and a function response answer text', async () => {
  const tools = [{ functionDeclarations: [weather] }];
  const reply = await ai.models.generateContent({ model: MODEL, contents: 'Weather in Oslo?', config: { tools } });
  const [call] = reply.functionCalls ?? [];
  assert.is(call?.name, 'get_weather');
  assert.ok(createAjv().validate(weather.parametersJsonSchema, call?.args), JSON.stringify(call?.args));
  assert.equal([reply.candidates![0]!.finishReason, reply.candidates![0]!.content!.parts!.length], ['STOP', 1]);
  assert.is(reply.usageMetadata?.candidatesTokenCount, jsonPieces(JSON.stringify(call!.args)).length);
  assert.equal(last(gemini.requests).body.tools, tools);

  const none = await ai.models.generateContent({
    model: MODEL,
    contents: 'Weather in Oslo?',
    config: { tools, toolConfig: { functionCallingConfig: { mode: 'NONE' as any } } },
  });
  assert.equal([none.functionCalls, none.text], [undefined, GEMINI_DEFAULT_REPLY]);

  const followUp = await ai.models.generateContent({
    model: MODEL,
    config: { tools },
    contents: [
      { role: 'user', parts: [{ text: 'Weather in Oslo?' }] },
      { role: 'model', parts: [{ functionCall: call! }] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temperature: 4 } } }] },
    ],
  });
  assert.equal([followUp.functionCalls, followUp.text], [undefined, GEMINI_DEFAULT_REPLY]);

  // Gemini's own Schema (upper-case types) and mode ANY restricted to one function, streamed: the call comes whole in one chunk.
  const chunks = [];
  const stream = await ai.models.generateContentStream({
    model: MODEL,
    contents: 'Time in Oslo?',
    config: {
      tools: [
        {
          functionDeclarations: [
            weather,
            { name: 'get_time', parameters: { type: Type.OBJECT, properties: { zone: { type: Type.STRING } }, required: ['zone'] } },
          ],
        },
      ],
      toolConfig: { functionCallingConfig: { mode: 'ANY' as any, allowedFunctionNames: ['get_time'] } },
    },
  });
  for await (const chunk of stream) chunks.push(chunk);
  assert.is(chunks.length, 1);
  assert.is(chunks[0]!.functionCalls?.[0]?.name, 'get_time');
  assert.type(chunks[0]!.functionCalls?.[0]?.args?.zone, 'string');
  assert.is(chunks[0]!.candidates![0]!.finishReason, 'STOP');
});

test('function calling: turn rules Gemini enforces are 400 INVALID_ARGUMENT', async () => {
  const tools = [{ functionDeclarations: [weather] }];
  const call = { name: 'get_weather', args: { city: 'Oslo', unit: 'celsius' } };
  const twoResponses = await rejection(
    ai.models.generateContent({
      model: MODEL,
      config: { tools },
      contents: [
        { role: 'user', parts: [{ text: 'Weather?' }] },
        { role: 'model', parts: [{ functionCall: call }] },
        { role: 'user', parts: [1, 2].map((n) => ({ functionResponse: { name: 'get_weather', response: { n } } })) },
      ],
    }),
  );
  assert.ok(twoResponses instanceof ApiError && twoResponses.status === 400, String(twoResponses));
  assert.match(twoResponses.message, /number of function response parts is equal to the number of function call parts/);
  // Gemini 3 wants the thought signature it gave back on the current turn's function call.
  const model = 'gemini-3-pro-preview';
  const first = await ai.models.generateContent({ model, contents: 'Weather?', config: { tools } });
  const part = first.candidates![0]!.content!.parts![0]!;
  assert.ok(part.functionCall && part.thoughtSignature, JSON.stringify(part));
  const history = (p: Data) => [
    { role: 'user', parts: [{ text: 'Weather?' }] },
    { role: 'model', parts: [p] },
    { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { t: 4 } } }] },
  ];
  const unsigned = await rejection(ai.models.generateContent({ model, config: { tools }, contents: history({ functionCall: part.functionCall }) }));
  assert.is(unsigned.status, 400);
  assert.match(unsigned.message, /missing a thought_signature/);
  const signed = await ai.models.generateContent({ model, config: { tools }, contents: history(part) });
  assert.is(signed.text, GEMINI_DEFAULT_REPLY);
});

test('structured output: JSON that parses and matches responseJsonSchema, and Gemini Schema in responseSchema', async () => {
  const ajv = createAjv();
  const schema = { type: 'object', properties: { berth: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['berth'], additionalProperties: false };
  const reply = await ai.models.generateContent({
    model: MODEL,
    contents: 'Which berth?',
    config: { responseMimeType: 'application/json', responseJsonSchema: schema },
  });
  const answer = JSON.parse(reply.text ?? '');
  assert.ok(ajv.validate(schema, answer), reply.text);
  assert.is(reply.usageMetadata?.candidatesTokenCount, jsonPieces(reply.text!).length);
  const legacy = await ai.models.generateContent({
    model: MODEL,
    contents: 'Which ship?',
    config: { responseMimeType: 'application/json', responseSchema: { type: Type.OBJECT, properties: { name: { type: Type.STRING } }, required: ['name'] } },
  });
  assert.type(JSON.parse(legacy.text ?? '').name, 'string');
  const noMime = await rejection(ai.models.generateContent({ model: MODEL, contents: 'x', config: { responseJsonSchema: schema } }));
  assert.equal([noMime.status, /response_mime_type/.test(noMime.message)], [400, true]);
});

test('thinking: thoughtsTokenCount apart from candidates, thought parts flagged and left out of .text, spent from maxOutputTokens', async () => {
  const thinking = await ai.models.generateContent({
    model: 'gemini-2.0-flash-thinking-exp',
    contents: 'Think',
    config: { thinkingConfig: { includeThoughts: true } },
  });
  const parts = thinking.candidates![0]!.content!.parts!;
  assert.equal(parts[0], { text: GEMINI_THOUGHT_SUMMARY, thought: true });
  assert.is(thinking.text, GEMINI_DEFAULT_REPLY, 'the thought is no answer text');
  const usage = thinking.usageMetadata!;
  assert.equal([usage.thoughtsTokenCount, usage.candidatesTokenCount], [GEMINI_THOUGHT_TOKENS, words(GEMINI_DEFAULT_REPLY)]);
  assert.is(usage.totalTokenCount, usage.promptTokenCount! + usage.candidatesTokenCount! + GEMINI_THOUGHT_TOKENS);

  const budget = await ai.models.generateContent({ model: MODEL, contents: 'Think a little', config: { thinkingConfig: { thinkingBudget: 10 } } });
  assert.is(budget.usageMetadata?.thoughtsTokenCount, 10);
  assert.is(budget.candidates![0]!.content!.parts!.length, 1, 'no thought part without includeThoughts');
  const off = await ai.models.generateContent({ model: 'gemini-2.5-flash-thinking', contents: 'Quick', config: { thinkingConfig: { thinkingBudget: 0 } } });
  assert.is(off.usageMetadata?.thoughtsTokenCount, undefined);

  const spent = await ai.models.generateContent({ model: MODEL, contents: 'Think', config: { maxOutputTokens: 8, thinkingConfig: { thinkingBudget: 20 } } });
  assert.equal([spent.candidates![0]!.finishReason, spent.candidates![0]!.content, spent.text], ['MAX_TOKENS', { role: 'model' }, undefined]);
  assert.equal([spent.usageMetadata?.thoughtsTokenCount, spent.usageMetadata?.candidatesTokenCount], [8, undefined]);

  // alwaysThoughts (a double-only switch): the thought part comes unasked, for gateway tests.
  const loud = await startGeminiDouble({ apiKey: KEY, alwaysThoughts: true });
  const unasked = await new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: loud.url } }).models.generateContent({
    model: 'gemini-2.5-flash-thinking',
    contents: 'Hi',
  });
  await loud.close();
  assert.equal(unasked.candidates![0]!.content!.parts![0], { text: GEMINI_THOUGHT_SUMMARY, thought: true });

  const chunks = [];
  const stream = await ai.models.generateContentStream({
    model: MODEL,
    contents: 'Think',
    config: { thinkingConfig: { thinkingBudget: 16, includeThoughts: true } },
  });
  for await (const chunk of stream) chunks.push(chunk);
  assert.is(chunks[0]!.candidates![0]!.content!.parts![0]!.thought, true);
  assert.is(chunks.map((c) => c.text ?? '').join(''), GEMINI_DEFAULT_REPLY);
  assert.is(last(chunks).usageMetadata?.thoughtsTokenCount, 16);
});

test('implicit caching: an identical long prompt reports cachedContentTokenCount inside promptTokenCount; short prompts never', async () => {
  const model = 'gemini-2.5-flash-lite';
  const manual = 'Harbour rules: berths are assigned in order of arrival and ships wait outside. '.repeat(60);
  const config = { systemInstruction: manual };
  const first = await ai.models.generateContent({ model, contents: 'Which berth?', config });
  const prompt = first.usageMetadata!.promptTokenCount!;
  assert.ok(prompt >= GEMINI_CACHE_MIN_TOKENS, String(prompt));
  assert.is(first.usageMetadata!.cachedContentTokenCount, undefined);
  const second = await ai.models.generateContent({ model, contents: 'Which berth?', config });
  assert.equal([second.usageMetadata!.cachedContentTokenCount, second.usageMetadata!.promptTokenCount], [prompt, prompt]);
  assert.equal(second.usageMetadata!.cacheTokensDetails, [{ modality: 'TEXT', tokenCount: prompt }]);
  const next = await ai.models.generateContent({ model, contents: 'And tomorrow?', config });
  const shared = jsonTokens({ role: 'user', parts: [{ text: manual }] });
  assert.is(next.usageMetadata!.cachedContentTokenCount, shared, 'the shared system instruction only');
  assert.ok(shared < next.usageMetadata!.promptTokenCount!);
  gemini.clearCache();
  const cleared = await ai.models.generateContent({ model, contents: 'Which berth?', config });
  assert.is(cleared.usageMetadata!.cachedContentTokenCount, undefined);
  for (let i = 0; i < 2; i++) {
    const short = await ai.models.generateContent({ model, contents: 'Short and repeated' });
    assert.is(short.usageMetadata!.cachedContentTokenCount, undefined);
  }
});

test('inline images count GEMINI_MEDIA_TOKENS each, under IMAGE; countTokens agrees with promptTokenCount', async () => {
  const contents = [
    { role: 'user', parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data: Buffer.alloc(3000).toString('base64') } }] },
  ];
  const reply = await ai.models.generateContent({ model: MODEL, contents });
  const text = jsonTokens({ role: 'user', parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data: '' } }] });
  assert.equal(reply.usageMetadata?.promptTokensDetails, [
    { modality: 'TEXT', tokenCount: text },
    { modality: 'IMAGE', tokenCount: GEMINI_MEDIA_TOKENS },
  ]);
  assert.is(reply.usageMetadata?.promptTokenCount, text + GEMINI_MEDIA_TOKENS);
  const counted = await ai.models.countTokens({ model: MODEL, contents });
  assert.is(counted.totalTokens, text + GEMINI_MEDIA_TOKENS);
});

test('embedContent: batchEmbedContents, deterministic unit vectors of outputDimensionality values, no usage', async () => {
  const model = 'gemini-embedding-001';
  const reply = await ai.models.embedContent({ model, contents: ['first text', 'second text', 'first text'], config: { outputDimensionality: 16 } });
  const request = last(gemini.requests);
  assert.is(request.path, `/v1beta/models/${model}:batchEmbedContents`);
  assert.equal(
    (request.body.requests as Data[]).map((r) => [r.model, r.outputDimensionality]),
    [
      [`models/${model}`, 16],
      [`models/${model}`, 16],
      [`models/${model}`, 16],
    ],
  );
  const vectors = reply.embeddings!.map((e) => e.values!);
  assert.equal(
    vectors.map((v) => v.length),
    [16, 16, 16],
  );
  for (const v of vectors) assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-9, 'a unit vector');
  assert.equal(vectors[0], vectors[2]);
  assert.not.equal(vectors[0], vectors[1]);
  assert.is(reply.metadata, undefined);
  const plain = await ai.models.embedContent({ model, contents: 'one' });
  assert.is(plain.embeddings![0]!.values!.length, GEMINI_EMBEDDING_DIMENSIONS);
  const wrongModel = await rejection(ai.models.embedContent({ model: MODEL, contents: 'one' }));
  assert.is(wrongModel.status, 404);
});

test.run();
