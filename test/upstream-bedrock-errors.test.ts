// AWS Bedrock as a native upstream when things go wrong, end to end through a real gateway and the
// Bedrock double (see upstream-bedrock.test.ts for the calls that work): a signature Bedrock
// refuses (a wrong secret) is a 502 naming no credential, and the next channel is tried; a
// ValidationException (an unknown model id, a parameter Bedrock's range refuses, a scripted 400) is
// the caller's 400 in its dialect, tried once; throttling and 5xx fail over, or are a 502 with no
// other channel; exceptions inside a stream, cut, garbled and silent streams, a stalled first byte;
// a client that leaves mid-stream. Nothing is charged for a failed call, and no key or secret shows in any
// reply or log line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { countTextTokens } from '../src/upstream/tokenizer.ts';
import { call, openAccount } from './support/http.ts';
import {
  FIRST_BYTE_TIMEOUT_MS,
  MODEL,
  SILENCE_TIMEOUT_MS,
  OTHER_REPLY,
  REPLY,
  assertNoSecret,
  ledgerOf,
  leaveChatStream,
  onlyCharge,
  settled,
  startBedrockWorld,
  type BedrockWorld,
} from './support/bedrock-gateway.ts';

let w: BedrockWorld;

test.before(async () => {
  w = await startBedrockWorld();
});

test.after(async () => {
  await w?.stop();
});

test.before.each(() => {
  w.bedrock.setDefault(null);
});

type Data = Record<string, any>;
const nonce = () => randomBytes(4).toString('hex');
const last = <T>(xs: readonly T[]): T => xs[xs.length - 1]!;
const ask = (model: string, extra: Data = {}) => ({ model, messages: [{ role: 'user', content: `Hello ${nonce()}` }], ...extra });
const ANTHROPIC = { 'anthropic-version': '2023-06-01' };

// ---- Refusals ---------------------------------------------------------------------------------

test('a wrong secret: Bedrock refuses the signature; a 502 in every dialect naming no credential, nothing charged', async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  const calls = w.bedrock.calls;
  const chat = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-badsecret') });
  assert.is(chat.status, 502, chat.text);
  assert.is(chat.json.error.code, 'upstream_error');
  const messages = await call(w.gw, '/v1/messages', {
    key: acct.key,
    headers: ANTHROPIC,
    body: { ...ask('test/bedrock-badsecret'), max_tokens: 100, stream: true },
  });
  assert.is(messages.status, 502, messages.text);
  assert.equal([messages.json.type, typeof messages.json.error.message], ['error', 'string']);
  const responses = await call(w.gw, '/v1/responses', { key: acct.key, body: { model: 'test/bedrock-badsecret', input: 'hi' } });
  assert.is(responses.status, 502, responses.text);
  for (const r of [chat, messages, responses]) assertNoSecret(r.text);
  assert.is(w.bedrock.calls, calls + 3, 'each call reached Bedrock once');
  const l = await settled(w.gw, acct.accountId, 3);
  assert.equal([l.charges.length, l.releases.length], [0, 3]);
  assert.equal(
    l.releases.map((r) => r.failovers?.[0]?.error),
    ['http_403', 'http_403', 'http_403'],
  );
});

test('a wrong secret with another channel: the call goes there, the charge names the refused channel', async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  const r = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-fo-cred') });
  assert.is(r.status, 200, r.text);
  assert.is(r.json.choices[0].message.content, OTHER_REPLY);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assert.equal([charge.channel, charge.failovers], ['cred-gpt', [{ channel: 'cred-bedrock', upstreamModel: MODEL, error: 'http_403' }]]);
});

test("ValidationException is the caller's 400 in its dialect, tried once, nothing charged", async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  const unknown = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-unknown') });
  assert.is(unknown.status, 400, unknown.text);
  assert.is(unknown.json.error.code, 'upstream_rejected_request');
  assert.match(unknown.json.error.message, /The provided model identifier is invalid/);
  assert.equal(last(w.bedrock.seen), { modelId: 'anthropic.claude-imaginary-v9:0', operation: 'Converse' });

  // OpenAI takes a temperature up to 2, Bedrock's models up to 1.
  const hot = await call(w.gw, '/v1/messages', {
    key: acct.key,
    headers: ANTHROPIC,
    body: { ...ask('test/bedrock'), max_tokens: 100, temperature: 1.5 },
  });
  if (hot.status !== 400) assert.unreachable(`temperature 1.5: ${hot.status} ${hot.text}`);
  assert.equal([hot.json.type, hot.json.error.type], ['error', 'invalid_request_error']);

  const calls = [w.bedrock.calls, w.gpt.calls];
  w.bedrock.script({ status: 400 });
  const scripted = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-fo', { stream: true }) });
  assert.is(scripted.status, 400, scripted.text);
  assert.equal([w.bedrock.calls, w.gpt.calls], [calls[0]! + 1, calls[1]], 'no failover for a refused request');
  for (const r of [unknown, hot, scripted]) assertNoSecret(r.text);
  const l = await settled(w.gw, acct.accountId, 3);
  assert.equal([l.charges.length, l.releases.length], [0, 3]);
  assert.ok(
    l.releases.every((r) => r.reason === 'invalid_request'),
    JSON.stringify(l.releases),
  );
});

test('throttling and 5xx on the only channel: a 502 in the caller’s dialect, nothing charged', async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  for (const status of [429, 500, 503]) {
    w.bedrock.script({ status });
    const r = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-err') });
    assert.is(r.status, 502, `${status}: ${r.text}`);
    assertNoSecret(r.text);
  }
  w.bedrock.script({ status: 429 });
  const m = await call(w.gw, '/v1/messages', { key: acct.key, headers: ANTHROPIC, body: { ...ask('test/bedrock-err'), max_tokens: 50, stream: true } });
  assert.is(m.status, 502, m.text);
  assert.is(m.json.type, 'error');
  const l = await settled(w.gw, acct.accountId, 4);
  assert.equal([l.charges.length, l.releases.length], [0, 4]);
  assert.equal(
    l.releases.map((r) => r.failovers?.[0]?.error),
    ['http_429', 'http_500', 'http_503', 'http_429'],
  );
});

// ---- Failover ---------------------------------------------------------------------------------

for (const status of [429, 503]) {
  test(`failover: Bedrock answering ${status} hands the call to the next channel under the same hold`, async () => {
    const acct = await openAccount(w.gw, { quota: 1_000_000 });
    w.bedrock.script({ status });
    const reply = await w.openai(acct).chat.completions.create({ model: 'test/bedrock-fo', messages: [{ role: 'user', content: `Failover ${nonce()}` }] });
    assert.is(reply.choices[0]!.message.content, OTHER_REPLY);
    const charge = await onlyCharge(w.gw, acct.accountId);
    assert.equal([charge.channel, charge.failovers], ['fo-gpt', [{ channel: 'fo-bedrock', upstreamModel: MODEL, error: `http_${status}` }]]);
  });
}

const streamFailovers: [string, Data, string][] = [
  ['a 429 before the stream', { status: 429 }, 'http_429'],
  ['a throttlingException frame before any content', { errorEventAfter: 1, exception: 'throttlingException' }, 'upstream_error'],
  ['a modelStreamErrorException frame before any content', { errorEventAfter: 1 }, 'upstream_error'],
];
for (const [what, fault, error] of streamFailovers) {
  test(`failover of a stream: ${what}; the other channel streams it`, async () => {
    const acct = await openAccount(w.gw, { quota: 1_000_000 });
    w.bedrock.script(fault);
    const stream = await w
      .openai(acct)
      .chat.completions.create({ model: 'test/bedrock-fo', stream: true, messages: [{ role: 'user', content: `Fo ${nonce()}` }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.is(text, OTHER_REPLY);
    const charge = await onlyCharge(w.gw, acct.accountId);
    assert.equal([charge.channel, charge.failovers], ['fo-gpt', [{ channel: 'fo-bedrock', upstreamModel: MODEL, error }]]);
  });
}

test('a stream that goes silent before any content fails over (timeout); silent after content, it ends with an error', async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  w.bedrock.script({ stallAfter: 1 });
  const before = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-fo-slow', { stream: true }) });
  assert.is([...before.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join(''), OTHER_REPLY);
  const charge = await onlyCharge(w.gw, acct.accountId);
  assert.equal(charge.failovers, [{ channel: 'slow-bedrock', upstreamModel: MODEL, error: 'timeout' }]);

  const next = await openAccount(w.gw, { quota: 1_000_000 });
  const abandoned = w.bedrock.abandoned;
  w.bedrock.script({ stallAfter: 4 });
  const started = Date.now();
  const after = await call(w.gw, '/v1/chat/completions', { key: next.key, body: ask('test/bedrock-fo-slow', { stream: true }) });
  assert.ok(Date.now() - started < SILENCE_TIMEOUT_MS + 10_000, 'the silence was not waited out for long');
  assert.match(after.text, /"content":"Bedrock /);
  assert.match(after.text, /"error"/);
  const l = await settled(w.gw, next.accountId);
  assert.equal([l.charges.length, l.releases.length], [0, 1]);
  assert.ok(w.bedrock.abandoned > abandoned, 'the silent upstream stream was closed');
});

const faultFailovers: [string, Data, string, boolean][] = [
  ['no first byte in time', { firstByteDelayMs: FIRST_BYTE_TIMEOUT_MS * 3 }, 'timeout', false],
  ['a body that does not parse', { garbage: true }, 'malformed_reply', false],
  ['a stream frame with a bad checksum', { garbage: true }, 'malformed_reply', true],
  ['a stream cut before any content', { cutAfterEvents: 1 }, 'econnreset', true],
];
for (const [what, fault, error, stream] of faultFailovers) {
  test(`failover: Bedrock with ${what} is retriable; the next channel answers, the charge names the failure`, async () => {
    const acct = await openAccount(w.gw, { quota: 1_000_000 });
    w.bedrock.script(fault);
    const started = Date.now();
    const r = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-fo-fast', { stream }) });
    assert.is(r.status, 200, r.text);
    const text = stream ? [...r.text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('') : r.json.choices[0].message.content;
    assert.is(text, OTHER_REPLY);
    const charge = await onlyCharge(w.gw, acct.accountId);
    assert.equal([charge.channel, charge.failovers], ['fast-gpt', [{ channel: 'fast-bedrock', upstreamModel: MODEL, error }]]);
    assert.ok(Date.now() - started < FIRST_BYTE_TIMEOUT_MS * 3 + 4000, 'failed over promptly');
  });
}

// ---- Mid-stream -------------------------------------------------------------------------------

for (const [what, fault] of [
  ['an exception frame', { errorEventAfter: 4, exception: 'throttlingException' }],
  ['a cut', { cutAfterEvents: 4 }],
] as const) {
  test(`${what} after content: the stream ends with an error, nothing charged`, async () => {
    const acct = await openAccount(w.gw, { quota: 1_000_000 });
    const calls = w.gpt.calls;
    w.bedrock.script(fault);
    const r = await call(w.gw, '/v1/chat/completions', { key: acct.key, body: ask('test/bedrock-fo', { stream: true }) });
    assert.is(r.status, 200);
    assert.match(r.text, /"content":"Bedrock /, 'content had been streamed');
    assert.match(r.text, /"error"/);
    assertNoSecret(r.text);
    assert.is(w.gpt.calls, calls, 'no failover once content was sent');
    const l = await settled(w.gw, acct.accountId);
    assert.equal([l.charges.length, l.releases.length], [0, 1]);
  });
}

test('a client that leaves mid-stream pays the prompt and what was streamed (aborted); the Bedrock stream is dropped', async () => {
  const acct = await openAccount(w.gw, { quota: 1_000_000 });
  const abandoned = w.bedrock.abandoned;
  w.bedrock.script({ chunkDelayMs: 40 });
  const seen = await leaveChatStream(
    w.gw,
    acct.key,
    { model: 'test/bedrock', stream: true, messages: [{ role: 'user', content: `Long story ${nonce()}` }] },
    3,
  );
  const charge = await onlyCharge(w.gw, acct.accountId);
  assert.equal([charge.aborted, charge.streamed, charge.channel], [true, true, `bedrock/${MODEL}`]);
  const all = countTextTokens(REPLY);
  assert.ok(charge.completionTokens >= countTextTokens(seen) && charge.completionTokens < all, `charged ${charge.completionTokens} of ${all}; saw ${seen}`);
  assert.ok(charge.promptTokens > 0);
  for (let i = 0; i < 200 && w.bedrock.abandoned === abandoned; i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(w.bedrock.abandoned > abandoned, 'the upstream stream was closed');
  const l = await ledgerOf(w.gw, acct.accountId);
  assert.is(l.releases.length, 0);
});

// ---- Last: no credential in the logs ----------------------------------------------------------

test('no access key id, secret or session token in any log line of the whole run', () => {
  assert.ok(w.logLines.length > 0, 'the gateway logged');
  for (const line of w.logLines) assertNoSecret(line);
});

test.run();
