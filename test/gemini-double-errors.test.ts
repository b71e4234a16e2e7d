// The Gemini double's errors, faults and safety verdicts, checked with the official @google/genai
// client pointed straight at it (the answers themselves: gemini-double.test.ts): the client must
// see Google's error bodies as its ApiError with the status, a mid-stream error event and a cut
// as the failures they are, and a blocked prompt as promptFeedback.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError, GoogleGenAI } from '@google/genai';
import { wordPieces, rejection } from './support/double-http.ts';
import {
  GEMINI_BLOCKED_WORD,
  GEMINI_DEFAULT_REPLY,
  GEMINI_UNSAFE_REPLY_WORD,
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

test('errors: a wrong key is 400 API_KEY_INVALID, no key 403, an unknown model 404, a malformed request 400, an unknown path an HTML 404', async () => {
  const wrong = await rejection(
    new GoogleGenAI({ apiKey: 'nope', httpOptions: { baseUrl: gemini.url } }).models.generateContent({ model: MODEL, contents: 'x' }),
  );
  assert.ok(wrong instanceof ApiError);
  assert.is(wrong.status, 400);
  const body = JSON.parse(wrong.message);
  assert.equal([body.error.status, body.error.details[0].reason, body.error.details[0].domain], ['INVALID_ARGUMENT', 'API_KEY_INVALID', 'googleapis.com']);
  const post = (path: string, json: unknown, headers: Record<string, string> = { 'x-goog-api-key': KEY }) =>
    fetch(`${gemini.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(json) });
  const ok = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
  const noKey = await post(`/v1beta/models/${MODEL}:generateContent`, ok, {});
  assert.equal([noKey.status, ((await noKey.json()) as Data).error.status], [403, 'PERMISSION_DENIED']);
  const unknown = await rejection(ai.models.generateContent({ model: 'no-such-model', contents: 'x' }));
  assert.equal([unknown.status, JSON.parse(unknown.message).error.status], [404, 'NOT_FOUND']);
  const openaiShaped = await post(`/v1beta/models/${MODEL}:generateContent`, { messages: [{ role: 'user', content: 'hi' }] });
  const refused = (await openaiShaped.json()) as Data;
  assert.equal([openaiShaped.status, refused.error.status], [400, 'INVALID_ARGUMENT']);
  assert.match(refused.error.message, /Unknown name "messages"/);
  const badRole = await post(`/v1beta/models/${MODEL}:generateContent`, { contents: [{ role: 'assistant', parts: [{ text: 'hi' }] }] });
  assert.is(badRole.status, 400);
  const thinking = (model: string, thinkingConfig: Data) => post(`/v1beta/models/${model}:generateContent`, { ...ok, generationConfig: { thinkingConfig } });
  const refusals = [
    await thinking('gemini-2.5-pro', { thinkingBudget: 0 }),
    await thinking(MODEL, { thinkingBudget: 30000 }),
    await thinking(MODEL, { thinkingLevel: 'low' }),
  ];
  assert.equal(
    refusals.map((r) => r.status),
    [400, 400, 400],
  );
  assert.match(((await refusals[0]!.json()) as Data).error.message, /only works in thinking mode/);
  assert.is((await thinking('gemini-2.5-pro', { thinkingBudget: 128 })).status, 200);
  const v1 = await post(`/v1/models/${MODEL}:generateContent`, ok);
  assert.is(v1.status, 200);
  const v2 = await post(`/v2/models/${MODEL}:generateContent`, ok);
  assert.equal([v2.status, v2.headers.get('content-type')], [404, 'text/html; charset=UTF-8']);
});

test('faults: 429, 500 and 503 in Google’s shape reach the client as ApiError with the status; mid-stream error and cut', async () => {
  for (const [status, name] of [
    [429, 'RESOURCE_EXHAUSTED'],
    [500, 'INTERNAL'],
    [503, 'UNAVAILABLE'],
  ] as const) {
    gemini.script({ status });
    const error = await rejection(ai.models.generateContent({ model: MODEL, contents: 'x' }));
    assert.ok(error instanceof ApiError, String(error));
    assert.equal([error.status, JSON.parse(error.message).error.status], [status, name]);
  }
  gemini.script({ status: 429 });
  const streamed = await rejection(ai.models.generateContentStream({ model: MODEL, contents: 'x' }));
  assert.is(streamed.status, 429);

  gemini.script({ errorEventAfter: 3 });
  const texts: string[] = [];
  const midStream = await rejection(
    (async () => {
      for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: 'x' })) texts.push(chunk.text ?? '');
    })(),
  );
  assert.equal([midStream.status, texts.length], [500, 3]);

  gemini.script({ cutAfterEvents: 2 });
  const seen: string[] = [];
  const cut = await rejection(
    (async () => {
      for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: 'x' })) seen.push(chunk.text ?? '');
    })(),
  );
  assert.not.ok(cut instanceof ApiError);
  assert.is(seen.length, 2);
  const usages = gemini.usages.length;
  const stall = new AbortController();
  gemini.script({ chunkDelayMs: 50 });
  const abandoned = gemini.abandoned;
  const stream = await ai.models.generateContentStream({ model: MODEL, contents: 'x', config: { abortSignal: stall.signal } });
  await rejection(
    (async () => {
      for await (const _ of stream) stall.abort();
    })(),
  );
  const deadline = Date.now() + 5000;
  while (gemini.abandoned === abandoned && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.is(gemini.abandoned, abandoned + 1, 'the double saw the client leave');
  assert.is(gemini.usages.length, usages, 'no completed reply recorded for the cut or abandoned streams');
});

test('safety: a blocked prompt is 200 with promptFeedback and no candidates; an unsafe reply stops with SAFETY', async () => {
  const blocked = await ai.models.generateContent({ model: MODEL, contents: `Tell me ${GEMINI_BLOCKED_WORD}` });
  assert.is(blocked.promptFeedback?.blockReason, 'SAFETY');
  assert.equal([blocked.candidates, blocked.text], [undefined, undefined]);
  const prompt = geminiPromptTokens(last(gemini.requests).body);
  assert.equal(
    { ...blocked.usageMetadata },
    { promptTokenCount: prompt, totalTokenCount: prompt, promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }] },
  );
  const chunks = [];
  for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: `Tell me ${GEMINI_BLOCKED_WORD}` })) chunks.push(chunk);
  assert.equal([chunks.length, chunks[0]!.promptFeedback?.blockReason], [1, 'SAFETY']);

  const unsafe = await ai.models.generateContent({ model: MODEL, contents: `Say ${GEMINI_UNSAFE_REPLY_WORD}` });
  assert.equal([unsafe.candidates![0]!.finishReason, unsafe.candidates![0]!.content, unsafe.text], ['SAFETY', undefined, undefined]);
  const half = Math.ceil(words(GEMINI_DEFAULT_REPLY) / 2);
  assert.is(unsafe.usageMetadata?.candidatesTokenCount, half);
  const parts: string[] = [];
  let finish: string | undefined;
  for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: `Say ${GEMINI_UNSAFE_REPLY_WORD}` })) {
    parts.push(chunk.text ?? '');
    finish = chunk.candidates?.[0]?.finishReason ?? finish;
  }
  assert.equal([parts.join(''), finish], [wordPieces(GEMINI_DEFAULT_REPLY).slice(0, half).join(''), 'SAFETY']);
});

test.run();
