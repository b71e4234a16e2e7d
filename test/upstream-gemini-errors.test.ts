// Gemini as a native upstream, what goes wrong (the rest is upstream-gemini.test.ts): each kind of
// error in the caller's dialect with nothing charged (a wrong key, a blocked prompt, Google's 400
// INVALID_ARGUMENT, 429 and 5xx), failover from the Gemini channel to another one (429, 503, no
// first byte in time, a reply that does not parse, a stream cut before any content), an error
// event mid-stream, a client that leaves mid-stream; the key in no error body and no log line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { countTextTokens } from '../src/upstream/tokenizer.ts';
import { call, eventually, openAccount, type TestAccount } from './support/http.ts';
import { GEMINI_BLOCKED_WORD, startGeminiDouble, type GeminiDouble } from './support/gemini-double.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { ledgerOf, leaveChatStream, onlyCharge, settled, startLoggedGateway, type LoggedGateway } from './support/upstream-gateway.ts';

const KEY = 'AIzaSy-gemini-SECRET-key-0123456789abcdef';
const WRONG_KEY = 'AIzaSy-gemini-WRONG-key-NEVERshown-98765';
const REPLY = 'Gemini answers from the double with a short and predictable reply that streams word by word.';
const OTHER = 'The other channel answers.';
const FLASH = 'gemini-2.5-flash';
const MILLI = 1300;
const FIRST_BYTE_TIMEOUT_MS = 500;

let gemini: GeminiDouble;
let gpt: OpenAIDouble;
let g: LoggedGateway;

test.before(async () => {
  gemini = await startGeminiDouble({ apiKey: KEY, reply: REPLY });
  gpt = await startOpenAIDouble({ reply: OTHER });
  const provider = { type: 'gemini', apiKeyEnv: 'TG_GEMINI_KEY', baseURL: gemini.url, timeoutMs: 5000 };
  const providers = {
    gemini: provider,
    geminiFast: { ...provider, firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS },
    geminiBadKey: { ...provider, apiKeyEnv: 'TG_GEMINI_WRONG_KEY' },
    gpt: { type: 'openai', baseURL: `${gpt.url}/v1`, apiKeyEnv: 'TG_GPT_KEY', timeoutMs: 5000 },
  };
  const models = {
    'test/gemini': { provider: 'gemini', upstreamModel: FLASH },
    'test/gemini-badkey': { provider: 'geminiBadKey', upstreamModel: FLASH },
    'test/gemini-err': { channels: [{ provider: 'gemini', upstreamModel: FLASH, id: 'gemini-err' }] },
    'test/gemini-fo': {
      channels: [
        { provider: 'gemini', upstreamModel: FLASH, id: 'fo-gemini' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fo-gpt' },
      ],
    },
    'test/gemini-fo-fast': {
      channels: [
        { provider: 'geminiFast', upstreamModel: FLASH, id: 'fast-gemini' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fast-gpt' },
      ],
    },
  };
  const env = { TG_GEMINI_KEY: KEY, TG_GEMINI_WRONG_KEY: WRONG_KEY, TG_GPT_KEY: 'test-openai-key' };
  g = await startLoggedGateway(providers, models, env, MILLI);
});

test.after(async () => {
  await g?.stop();
  for (const d of [gemini, gpt]) await d?.close();
});

test.before.each(() => {
  gemini.setDefault(null);
});

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const openaiFor = (acct: TestAccount) => new OpenAI({ apiKey: acct.key, baseURL: g.gw.baseUrl, maxRetries: 0 });
const account = () => openAccount(g.gw, { quota: 1_000_000 });
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
const chatBody = (model: string, content: string, extra: Data = {}) => ({ model, messages: [{ role: 'user', content }], ...extra });
const messages = (key: string, body: Data) => call(g.gw, '/v1/messages', { key, headers: { 'anthropic-version': '2023-06-01' }, body });

function assertNoKey(text: string): void {
  assert.not.ok(text.includes(KEY), 'the key leaked');
  assert.not.ok(text.includes(WRONG_KEY), 'the wrong key leaked');
}

test('a wrong key (Google’s 400 API_KEY_INVALID): 502 in the caller’s dialect naming no key, nothing charged', async () => {
  const acct = await account();
  const r = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-badkey', `hello ${nonce()}`) });
  assert.is(r.status, 502, r.text);
  assert.is(r.json.error.code, 'upstream_error');
  assert.is(last(gemini.requests).headers['x-goog-api-key'], WRONG_KEY, 'the double refused the wrong key');
  assertNoKey(r.text);
  const m = await messages(acct.key, { model: 'test/gemini-badkey', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
  assert.is(m.status, 502, m.text);
  assert.is(m.json.type, 'error');
  assertNoKey(m.text);
  const l = await settled(g.gw, acct.accountId, 2);
  assert.equal([l.charges.length, l.releases.length], [0, 2]);
});

test('a blocked prompt (200, promptFeedback.blockReason): the caller’s 400, tried once, no failover, nothing charged', async () => {
  const acct = await account();
  const [geminiCalls, gptCalls] = [gemini.calls, gpt.calls];
  const chat = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-fo', `Tell me about ${GEMINI_BLOCKED_WORD}`) });
  assert.is(chat.status, 400, chat.text);
  assert.is(chat.json.error.code, 'upstream_rejected_request');
  assert.match(chat.json.error.message, /blocked/i);
  assert.equal([gemini.calls, gpt.calls], [geminiCalls + 1, gptCalls], 'not retried, not failed over');
  assertNoKey(chat.text);
  const streamed = await messages(acct.key, {
    model: 'test/gemini',
    max_tokens: 100,
    stream: true,
    messages: [{ role: 'user', content: `About ${GEMINI_BLOCKED_WORD}` }],
  });
  assert.is(streamed.status, 400, streamed.text);
  assert.equal([streamed.json.type, streamed.json.error.type], ['error', 'invalid_request_error']);
  const l = await settled(g.gw, acct.accountId, 2);
  assert.equal([l.charges.length, l.releases.length], [0, 2]);
  assert.ok(
    l.releases.every((r) => r.reason === 'invalid_request'),
    JSON.stringify(l.releases),
  );
});

test('Google’s 400 INVALID_ARGUMENT: the caller’s 400, no failover, nothing charged', async () => {
  const acct = await account();
  const gptCalls = gpt.calls;
  gemini.script({ status: 400 });
  const scripted = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-fo', `Hi ${nonce()}`) });
  assert.is(scripted.status, 400, scripted.text);
  assertNoKey(scripted.text);
  // A tool name OpenAI takes and Gemini does not (it must start with a letter or an underscore).
  const calls = gemini.calls;
  const tool = { type: 'function', function: { name: '1st_tool', parameters: { type: 'object', properties: {} } } };
  const natural = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-fo', `Hi ${nonce()}`, { tools: [tool] }) });
  assert.is(natural.status, 400, natural.text);
  assert.is(gemini.calls, calls + 1, 'Gemini refused it');
  assert.is(gpt.calls, gptCalls, 'no failover for the caller’s mistake');
  const l = await settled(g.gw, acct.accountId, 2);
  assert.equal([l.charges.length, l.releases.length], [0, 2]);
});

test('429 and 5xx on the only channel: 502 in the caller’s dialect (OpenAI and Anthropic), nothing charged', async () => {
  const acct = await account();
  for (const status of [429, 500, 503]) {
    gemini.script({ status });
    const r = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-err', 'hi') });
    assert.is(r.status, 502, `${status}: ${r.text}`);
    assertNoKey(r.text);
  }
  gemini.script({ status: 503 });
  const m = await messages(acct.key, { model: 'test/gemini-err', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
  assert.is(m.status, 502, m.text);
  assert.is(m.json.type, 'error');
  const l = await settled(g.gw, acct.accountId, 4);
  assert.equal([l.charges.length, l.releases.length], [0, 4]);
  assert.equal(
    l.releases.map((r) => r.failovers?.[0]?.error),
    ['http_429', 'http_500', 'http_503', 'http_503'],
  );
});

for (const status of [429, 503]) {
  test(`failover: Gemini answering ${status} hands the call to the next channel under the same hold; one charge names both`, async () => {
    const acct = await account();
    gemini.script({ status });
    const reply = await openaiFor(acct).chat.completions.create({ model: 'test/gemini-fo', messages: [{ role: 'user', content: `Failover ${nonce()}` }] });
    assert.is(reply.choices[0]!.message.content, OTHER);
    const charge = await onlyCharge(g.gw, acct.accountId);
    assert.is(charge.channel, 'fo-gpt');
    assert.equal(charge.failovers, [{ channel: 'fo-gemini', upstreamModel: FLASH, error: `http_${status}` }]);
  });
}

test('failover of a stream: Gemini refusing with 429 before any content, the other channel streams it', async () => {
  const acct = await account();
  gemini.script({ status: 429 });
  const stream = await openaiFor(acct).chat.completions.create({
    model: 'test/gemini-fo',
    stream: true,
    messages: [{ role: 'user', content: `Stream fo ${nonce()}` }],
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.is(text, OTHER);
  const charge = await onlyCharge(g.gw, acct.accountId);
  assert.equal([charge.channel, charge.failovers?.[0]?.error], ['fo-gpt', 'http_429']);
});

const failoverCases: [string, Data, string][] = [
  ['no first byte in time', { firstByteDelayMs: FIRST_BYTE_TIMEOUT_MS * 3 }, 'timeout'],
  ['a body that does not parse', { garbage: true }, 'malformed_reply'],
  ['a stream cut before any content', { cutAfterEvents: 0 }, 'und_err_socket'],
];
for (const [what, fault, error] of failoverCases) {
  test(`failover: Gemini with ${what} is retriable; the call goes to the next channel, the charge names the failure`, async () => {
    const acct = await account();
    gemini.script(fault);
    const started = Date.now();
    const stream = 'cutAfterEvents' in fault;
    const r = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-fo-fast', `Fault ${nonce()}`, { stream }) });
    assert.is(r.status, 200, r.text);
    const streamed = [...r.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('');
    assert.is(stream ? streamed : r.json.choices[0].message.content, OTHER);
    const charge = await onlyCharge(g.gw, acct.accountId);
    assert.is(charge.channel, 'fast-gpt');
    assert.equal(charge.failovers, [{ channel: 'fast-gemini', upstreamModel: FLASH, error }]);
    assert.ok(Date.now() - started < FIRST_BYTE_TIMEOUT_MS * 3 + 4000, 'failed over promptly');
  });
}

test('an error event mid-stream after content: the stream ends with an error, nothing charged', async () => {
  const acct = await account();
  gemini.script({ errorEventAfter: 4 });
  const r = await call(g.gw, '/v1/chat/completions', { key: acct.key, body: chatBody('test/gemini-err', 'hi', { stream: true }) });
  assert.is(r.status, 200);
  assert.match(r.text, /"content":"Gemini /, 'content came first');
  assert.match(r.text, /"error"/);
  assertNoKey(r.text);
  const l = await settled(g.gw, acct.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 1]);
});

test('a client that leaves mid-stream pays the prompt and what was streamed (aborted); the Gemini stream is dropped', async () => {
  const acct = await account();
  const abandoned = gemini.abandoned;
  gemini.script({ chunkDelayMs: 40 });
  const seen = await leaveChatStream(g.gw, acct.key, chatBody('test/gemini', `Long story ${nonce()}`, { stream: true }), 3);
  const charge = await onlyCharge(g.gw, acct.accountId);
  assert.equal([charge.aborted, charge.streamed, charge.channel], [true, true, `gemini/${FLASH}`]);
  const all = countTextTokens(REPLY);
  assert.ok(charge.completionTokens >= countTextTokens(seen) && charge.completionTokens < all, `charged ${charge.completionTokens} of ${all}; saw ${seen}`);
  assert.ok(charge.promptTokens > 0);
  await eventually(
    async () => gemini.abandoned,
    (n) => n > abandoned,
  );
  assert.ok(gemini.abandoned > abandoned, 'the upstream stream was closed');
  const l = await ledgerOf(g.gw, acct.accountId);
  assert.is(l.releases.length, 0);
});

test('the key appears in no log line of the whole run', () => {
  assert.ok(g.logLines.length > 0, 'the gateway logged');
  assert.ok(
    g.logLines.some((line) => line.includes('gemini')),
    'the Gemini calls were logged',
  );
  for (const line of g.logLines) assertNoKey(line);
});

test.run();
