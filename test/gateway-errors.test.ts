// Every failure of the gateway in OpenAI's error shape, with the status a client expects, and
// none of them leaving a charge or an open hold behind in the ledger.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import sharp from 'sharp';
import type { TestGateway } from './support/gateway.ts';
import { startUpstreamDouble, type UpstreamDouble } from './support/upstream-double.ts';
import { assertMatches } from './support/openapi.ts';
import { call, chat, ledgerView, openAccount, userMessage, startGatewayWithRoutes, type LedgerView, type Reply, type TestAccount } from './support/http.ts';
import { grantExtra, subscribe } from '../src/accounts/index.ts';
import { revokeKey } from '../src/keys/index.ts';

const DOUBLE_MODEL = 'test/double-chat';

let gw: TestGateway;
let double: UpstreamDouble;
let base: string;

test.before(async () => {
  double = await startUpstreamDouble();
  gw = await startGatewayWithRoutes(
    { double: { type: 'openai-compatible', baseURL: double.url, timeoutMs: 5000 } },
    { [DOUBLE_MODEL]: { provider: 'double', upstreamModel: 'double-model', multiplierMilli: 1000 } },
  );
  base = `${gw.url}/v1`;
});

test.after(async () => {
  await gw?.stop();
  await double?.close();
});

/** The OpenAI error shape, exactly: {"error":{"message","type","param","code"}}. */
function assertError(
  r: Reply,
  status: number,
  code: string | null,
  param?: string | null,
): { message: string; type: string; param: string | null; code: string | null } {
  assert.is(r.status, status, `status of ${r.text.slice(0, 300)}`);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assertMatches('ErrorResponse', r.json);
  assert.equal(Object.keys(r.json).sort(), ['error']);
  assert.equal(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type']);
  assert.is(r.json.error.code, code);
  if (param !== undefined) assert.is(r.json.error.param, param);
  assert.ok(r.json.error.message.length > 10, 'a message a person can act on');
  return r.json.error;
}

/** Nothing charged since `before`, every hold resolved, nothing reserved, usage unchanged. */
async function assertNothingCharged(account: TestAccount, before: LedgerView): Promise<LedgerView> {
  const after = await ledgerView(gw, account.accountId);
  assert.is(after.chatCharges.length, before.chatCharges.length, 'no chat charge');
  assert.is(after.imageCharges.length, before.imageCharges.length, 'no image charge');
  assert.is(after.billed, before.billed);
  assert.is(after.row.quota_used, before.row.quota_used);
  assert.is(after.row.extra_used, before.row.extra_used);
  assert.is(after.row.reserved, 0);
  assert.is(after.row.open_holds, 0);
  assert.is(after.openHoldRows, 0);
  assert.is(after.reservations.length, after.chatCharges.length + after.imageCharges.length + after.releases.length, 'every hold settled or released');
  return after;
}

const hi = { model: 'alpha-haiku-4.5', messages: userMessage('Say hello to the toll booth.') };

test('401 invalid_api_key for a missing, malformed, unknown or revoked key', async () => {
  const acct = await openAccount(gw, { quota: 100_000 });
  const before = await ledgerView(gw, acct.accountId);

  const missing = await call(gw, '/v1/chat/completions', { body: hi });
  assert.match(assertError(missing, 401, 'invalid_api_key').message, /Authorization: Bearer/);
  for (const header of [`Bearer ${acct.key.slice('sk_svc_'.length)}`, 'Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789', `Basic ${acct.key}`, 'Bearer ']) {
    const malformed = await call(gw, '/v1/chat/completions', { body: hi, headers: { authorization: header } });
    assert.match(assertError(malformed, 401, 'invalid_api_key').message, /sk_svc_|Bearer/, header);
  }
  const unknown = await chat(gw, 'sk_svc_' + 'Q'.repeat(acct.key.length - 'sk_svc_'.length), hi);
  assertError(unknown, 401, 'invalid_api_key');
  // The read-only endpoints take the same key check.
  for (const path of ['/v1/models', '/v1/subscription', '/v1/usage']) assertError(await call(gw, path), 401, 'invalid_api_key');
  await assertNothingCharged(acct, before);

  // A key in use (so cached) is refused as soon as it is revoked.
  assert.is((await chat(gw, acct.key, hi)).status, 200);
  const used = await ledgerView(gw, acct.accountId);
  assert.is(used.chatCharges.length, 1);
  await revokeKey(gw.ledger, acct.keyId, 'leaked', 'admin:test');
  const revoked = await chat(gw, acct.key, hi);
  assertError(revoked, 401, 'invalid_api_key');
  assertError(await call(gw, '/v1/models', { key: acct.key }), 401, 'invalid_api_key');
  await assertNothingCharged(acct, used);
});

test('403 model_not_found for a model outside the plan or unknown, pointing to GET /v1/models', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, models: ['alpha-haiku-4.5'] });
  const before = await ledgerView(gw, acct.accountId);
  const listed = await call(gw, '/v1/models', { key: acct.key });
  assert.equal(
    listed.json.data.map((m: { id: string }) => m.id),
    ['alpha-haiku-4.5'],
  );

  const messages = [];
  for (const model of ['cx/gen-6-sol', 'gen-6-sol', 'no-such-model']) {
    const e = assertError(await chat(gw, acct.key, { ...hi, model }), 403, 'model_not_found', 'model');
    assert.is(e.type, 'invalid_request_error');
    assert.ok(e.message.includes(`GET ${base}/models`), e.message);
    assert.ok(e.message.includes(model), e.message);
    messages.push(e.message.replace(model, '<model>'));
  }
  // A model that exists but is not in the plan reads exactly like one that does not exist.
  assert.is(new Set(messages).size, 1, messages.join('\n'));
  for (const path of ['/v1/images/generations', '/v1/images/edits']) {
    const e = assertError(
      await call(gw, path, { key: acct.key, body: { model: 'cx/gen-6-sol', prompt: 'a bridge', image: 'https://example.com/a.png' } }),
      403,
      'model_not_found',
      'model',
    );
    assert.ok(e.message.includes(`GET ${base}/models`), e.message);
  }
  const after = await assertNothingCharged(acct, before);
  assert.is(after.reservations.length, 0, 'no hold was even taken');
  assert.is((await chat(gw, acct.key, hi)).status, 200, 'the enabled model works');
});

test('402 insufficient_quota when the main plan is used up: extra tokens would help', async () => {
  const acct = await openAccount(gw, { quota: 5 });
  const before = await ledgerView(gw, acct.accountId);
  const e = assertError(await chat(gw, acct.key, hi), 402, 'insufficient_quota', null);
  assert.is(e.type, 'insufficient_quota');
  assert.match(e.message, /extra tokens/);
  assert.match(e.message, /5 are available/);
  const img = assertError(
    await call(gw, '/v1/images/generations', { key: acct.key, body: { model: 'alpha-haiku-4.5', prompt: 'a bridge' } }),
    402,
    'insufficient_quota',
  );
  assert.match(img.message, /45000/);
  await assertNothingCharged(acct, before);
  assert.is((await ledgerView(gw, acct.accountId)).reservations.length, 0);

  // The remedy the message names works.
  await grantExtra(gw.ledger, acct.accountId, 10_000, 'top-up', 'admin:test');
  const ok = await chat(gw, acct.key, hi);
  assert.is(ok.status, 200);
  const after = await ledgerView(gw, acct.accountId);
  assert.is(after.chatCharges.length, 1);
  assert.is(after.row.quota_used + after.row.extra_used, Number(ok.headers.get('x-tollgate-billed-tokens')));
});

test('402 insufficient_quota when the main plan expired: renewing would help', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, validityDays: 30, subscribedAt: new Date(Date.now() - 31 * 86_400_000) });
  const before = await ledgerView(gw, acct.accountId);
  const e = assertError(await chat(gw, acct.key, hi), 402, 'insufficient_quota');
  assert.match(e.message, /expired/);
  assert.match(e.message, /renew/);
  await assertNothingCharged(acct, before);

  await subscribe(gw.ledger, acct.accountId, acct.planId, 'admin:test');
  assert.is((await chat(gw, acct.key, hi)).status, 200);
});

test('429 rate_limit_exceeded with Retry-After and x-ratelimit-* headers; the refused call is free', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000, requestsPerMinute: 3 });
  const remaining: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await chat(gw, acct.key, hi);
    assert.is(r.status, 200);
    assert.is(r.headers.get('x-ratelimit-limit-requests'), '3');
    remaining.push(r.headers.get('x-ratelimit-remaining-requests')!);
    assert.match(r.headers.get('x-ratelimit-reset-requests')!, /^\d+(\.\d+)?s$/);
  }
  assert.equal(remaining, ['2', '1', '0']);
  const before = await ledgerView(gw, acct.accountId);
  const r = await chat(gw, acct.key, hi);
  const e = assertError(r, 429, 'rate_limit_exceeded', null);
  assert.match(e.message, /3 requests per minute/);
  const retry = Number(r.headers.get('retry-after'));
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${r.headers.get('retry-after')}`);
  assert.is(r.headers.get('x-ratelimit-limit-requests'), '3');
  assert.is(r.headers.get('x-ratelimit-remaining-requests'), '0');
  const reset = /^(\d+(?:\.\d+)?)s$/.exec(r.headers.get('x-ratelimit-reset-requests') ?? '');
  assert.ok(reset && Number(reset[1]) > 0 && Number(reset[1]) <= 60, `reset ${r.headers.get('x-ratelimit-reset-requests')}`);
  const after = await assertNothingCharged(acct, before);
  assert.is(after.chatCharges.length, 3);
});

test('404 for a wrong path names {base_url} and {base_url}/chat/completions', async () => {
  const acct = await openAccount(gw, { quota: 100_000 });
  const before = await ledgerView(gw, acct.accountId);
  for (const [method, path] of [
    ['POST', '/chat/completions'],
    ['POST', '/v1/chat/completion'],
    ['GET', '/v2/models'],
    ['POST', '/v1/v1/chat/completions'],
    ['GET', '/api/v1/models'],
  ]) {
    for (const key of [acct.key, null]) {
      const r = await call(gw, path, { method, key, body: method === 'POST' ? hi : undefined });
      const e = assertError(r, 404, 'unknown_url', null);
      assert.ok(e.message.includes(`${base};`) || e.message.includes(`${base} `), e.message);
      assert.ok(e.message.includes(`${base}/chat/completions`), e.message);
    }
  }
  await assertNothingCharged(acct, before);
});

test('405 for a known path with the wrong method, 415 for a body that is not JSON, 413 for a huge body', async () => {
  const acct = await openAccount(gw, { quota: 100_000 });
  const before = await ledgerView(gw, acct.accountId);
  for (const [method, path] of [
    ['GET', '/v1/chat/completions'],
    ['PUT', '/v1/chat/completions'],
    ['POST', '/v1/models'],
    ['DELETE', '/v1/subscription'],
    ['GET', '/v1/images/generations'],
  ]) {
    assertError(await call(gw, path, { method, key: acct.key }), 405, 'method_not_allowed');
  }
  const text = await call(gw, '/v1/chat/completions', { key: acct.key, raw: JSON.stringify(hi), headers: { 'content-type': 'text/plain' } });
  assert.match(assertError(text, 415, 'unsupported_media_type').message, /application\/json/);
  const form = new FormData();
  form.set('model', 'alpha-haiku-4.5');
  form.set('prompt', 'a bridge');
  const multipart = await fetch(`${base}/images/generations`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}` }, body: form });
  assertError({ status: multipart.status, headers: multipart.headers, text: '', json: await multipart.json() }, 415, 'unsupported_media_type');
  const form2 = new URLSearchParams({ model: 'alpha-haiku-4.5' });
  const urlencoded = await fetch(`${base}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}` }, body: form2 });
  assertError({ status: urlencoded.status, headers: urlencoded.headers, text: '', json: await urlencoded.json() }, 415, 'unsupported_media_type');

  const huge = JSON.stringify({ ...hi, messages: [{ role: 'user', content: 'x'.repeat(26 * 1024 * 1024) }] });
  assertError(await call(gw, '/v1/chat/completions', { key: acct.key, raw: huge, headers: { 'content-type': 'application/json' } }), 413, 'request_too_large');
  await assertNothingCharged(acct, before);
});

test('400 for chat bodies that fail the schema, naming the param', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = await ledgerView(gw, acct.accountId);
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ messages: hi.messages }, 'model', /Missing required parameter: 'model'/],
    [{ model: hi.model }, 'messages', /Missing required parameter: 'messages'/],
    [{ ...hi, messages: [] }, 'messages', /messages/],
    [{ ...hi, messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role', /messages\[0\]\.role/],
    [{ ...hi, reasoning_effort: 'extreme' }, 'reasoning_effort', /low.*medium.*high.*xhigh.*max/],
    [{ ...hi, reasoning_effort: 'minimal' }, 'reasoning_effort', /reasoning_effort/],
    [{ ...hi, reasoning_effort: 3 }, 'reasoning_effort', /reasoning_effort/],
    [{ ...hi, max_tokens: 0 }, 'max_tokens', /max_tokens/],
    [{ ...hi, temperature: 7 }, 'temperature', /temperature/],
    [{ ...hi, n: 2 }, 'n', /\bn\b/],
    [{ ...hi, stream: 'yes' }, 'stream', /stream/],
  ];
  for (const [body, param, message] of cases) {
    const e = assertError(await chat(gw, acct.key, body), 400, 'invalid_value', param);
    assert.is(e.type, 'invalid_request_error');
    assert.match(e.message, message);
  }
  for (const raw of ['{"model": "alpha-haiku-4.5", ', '[1,2]', 'null']) {
    const r = await call(gw, '/v1/chat/completions', { key: acct.key, raw, headers: { 'content-type': 'application/json' } });
    assertError(r, 400, 'invalid_json', null);
  }
  await assertNothingCharged(acct, before);

  // Every listed effort is accepted and none of them changes the price.
  const billed = new Set<string>();
  for (const effort of ['low', 'medium', 'high', 'xhigh', 'max']) {
    const r = await chat(gw, acct.key, { ...hi, reasoning_effort: effort, max_tokens: 5 });
    assert.is(r.status, 200, `${effort}: ${r.text}`);
    billed.add(r.headers.get('x-tollgate-billed-tokens')!);
  }
  assert.is(billed.size, 1);
});

test('400 for image requests outside the limits, each saying so; no charge', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const before = await ledgerView(gw, acct.accountId);
  const ok = { model: 'alpha-haiku-4.5', prompt: 'a lighthouse at dusk' };
  const cases: [string, Record<string, unknown>, string, RegExp, string][] = [
    ['generations', { ...ok, n: 2 }, 'n', /only 1/, 'invalid_value'],
    ['generations', { ...ok, n: 0 }, 'n', /only 1/, 'invalid_value'],
    ['generations', { ...ok, response_format: 'url' }, 'response_format', /b64_json/, 'invalid_value'],
    ['generations', { ...ok, size: '512x512' }, 'size', /1024x1024.*1024x1536.*1536x1024/, 'invalid_value'],
    ['generations', { ...ok, size: '1792x1024' }, 'size', /1536x1024/, 'invalid_value'],
    ['generations', { ...ok, prompt: 'p'.repeat(8001) }, 'prompt', /too long: at most 8000 characters/, 'invalid_value'],
    ['generations', { ...ok, prompt: '' }, 'prompt', /prompt/, 'invalid_value'],
    ['generations', { model: ok.model }, 'prompt', /Missing required parameter: 'prompt'/, 'invalid_value'],
    ['generations', { ...ok, image: 'data:image/png;base64,@@not base64@@' }, 'image', /data:image\/<type>;base64,<data>/, 'invalid_image'],
    ['edits', { ...ok, image: 'data:text/plain;base64,aGVsbG8=' }, 'image', /data:image\/<type>;base64,<data>/, 'invalid_image'],
    ['edits', { ...ok, image: 'data:image/png;base64,' }, 'image', /image/, 'invalid_image'],
    ['edits', { ...ok, image: 'not a url' }, 'image', /image/, 'invalid_image_url'],
    ['edits', { ...ok, image: 'http://example.com/cat.png' }, 'image', /https/, 'invalid_image_url'],
    ['edits', ok, 'image', /Missing required parameter: 'image'/, 'invalid_value'],
  ];
  for (const [endpoint, body, param, message, code] of cases) {
    const e = assertError(await call(gw, `/v1/images/${endpoint}`, { key: acct.key, body }), 400, code, param);
    assert.match(e.message, message, `${endpoint} ${JSON.stringify(body).slice(0, 80)}: ${e.message}`);
  }
  const none = await assertNothingCharged(acct, before);
  assert.is(none.reservations.length, 0, 'refused before any hold');

  // A data URI that is well formed but holds no image: the hold taken for it is released.
  const notAnImage = assertError(
    await call(gw, '/v1/images/edits', {
      key: acct.key,
      body: { ...ok, image: `data:image/png;base64,${Buffer.from('this is not a picture at all').toString('base64')}` },
    }),
    400,
    'invalid_image',
    'image',
  );
  assert.match(notAnImage.message, /image/i);
  await assertNothingCharged(acct, before);

  // The limits themselves are allowed: a prompt of exactly 8000 characters, each size.
  const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 200, g: 40, b: 40 } } })
    .png()
    .toBuffer();
  const edge = await call(gw, '/v1/images/edits', {
    key: acct.key,
    body: { ...ok, prompt: 'p'.repeat(8000), size: '1024x1536', n: 1, response_format: 'b64_json', image: `data:image/png;base64,${png.toString('base64')}` },
  });
  assert.is(edge.status, 200, edge.text.slice(0, 300));
  assert.is(edge.json.data.length, 1);
  const after = await ledgerView(gw, acct.accountId);
  assert.is(after.imageCharges.length, 1);
  assert.is(after.billed, 45_000);
});

test('an upstream failure is a 502 and its hold is released, for chat and for images', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = await ledgerView(gw, acct.accountId);
  const calls = double.requests.length;
  double.failNext(500);
  const e = assertError(await chat(gw, acct.key, { ...hi, model: DOUBLE_MODEL }), 502, 'upstream_error');
  assert.is(e.type, 'upstream_error');
  assert.match(e.message, /nothing was charged/);
  assert.is(double.requests.length, calls + 1, 'the upstream was called');
  double.failNext(503, 'not json at all');
  assertError(await call(gw, '/v1/images/generations', { key: acct.key, body: { model: DOUBLE_MODEL, prompt: 'a bridge' } }), 502, 'upstream_error');
  const after = await assertNothingCharged(acct, before);
  assert.is(after.reservations.length, 2);
  assert.equal(
    after.releases.map((r) => r.data.reason),
    ['upstream_error', 'upstream_error'],
  );
  assert.equal(after.releases.map((r) => r.data.holdId).sort(), after.reservations.map((r) => r.data.holdId).sort());
  const sub = await call(gw, '/v1/subscription', { key: acct.key });
  assert.is(sub.json.remaining_tokens, 1_000_000);

  // The same upstream, working again, is charged normally.
  const ok = await chat(gw, acct.key, { ...hi, model: DOUBLE_MODEL });
  assert.is(ok.status, 200);
  assert.is((await ledgerView(gw, acct.accountId)).chatCharges.length, 1);
});

test('a stream whose upstream fails before its first byte is a 502 and releases the hold', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const before = await ledgerView(gw, acct.accountId);
  double.failNext(500);
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...hi, model: DOUBLE_MODEL, stream: true }),
  });
  assert.is(res.status, 502);
  const failure = await res.json();
  assertMatches('ErrorResponse', failure);
  assert.is((failure as { error: { code: string } }).error.code, 'upstream_error');
  const after = await assertNothingCharged(acct, before);
  assert.equal(
    after.releases.map((r) => r.data.reason),
    ['upstream_error'],
  );
});

test('concurrent client errors on one account charge neither it nor another account', async () => {
  // A bad key never reaches any account; a bad body for one account does not touch another.
  const a = await openAccount(gw, { quota: 100_000 });
  const b = await openAccount(gw, { quota: 100_000 });
  const beforeB = await ledgerView(gw, b.accountId);
  const beforeA = await ledgerView(gw, a.accountId);
  await Promise.all([
    chat(gw, a.key, { ...hi, reasoning_effort: 'huge' }),
    chat(gw, a.key, { ...hi, model: 'nope' }),
    call(gw, '/v1/images/generations', { key: a.key, body: { model: hi.model, prompt: 'x', n: 3 } }),
    chat(gw, 'sk_svc_unknown', hi),
  ]);
  await assertNothingCharged(a, beforeA);
  await assertNothingCharged(b, beforeB);
});

test.run();
