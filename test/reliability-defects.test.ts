// Regressions for defects the reliability suites found, against a real gateway over real HTTP:
// oversized/malformed requests answered by Node's parser in OpenAI's error shape, a flood of one
// unknown key costing no queries (while a key issued later works at once), no body parsed before
// the key is known, and an empty Responses input refused before anything is charged.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, chat, ledgerView, openAccount, userMessage, type Reply, type TestAccount } from './support/http.ts';
import { hashKey, lastFour } from '../src/keys/secrets.ts';
import { keyCommand, revokeKey } from '../src/keys/index.ts';

let gw: TestGateway;
let acct: TestAccount;

test.before(async () => {
  gw = await startTestGateway();
  acct = await openAccount(gw, { quota: 10_000_000 });
});
test.after(async () => {
  await gw?.stop();
});

const MODEL = 'cx/gen-6-luna';
const hi = { model: MODEL, messages: userMessage('Say hi') };
const alnum = (n: number) =>
  randomBytes(n * 2)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, n);
const unknownKey = () => `sk_svc_${alnum(43)}`;

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  closed: boolean;
}

/**
 * Writes `payload` on a plain TCP connection and reads until the server closes it (or `waitMs`
 * passes, when the server is waiting for more): the bytes of the answer, parsed.
 */
function raw(payload: string | Buffer, waitMs = 5000): Promise<RawReply> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closed = false;
    const finish = () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const head = split < 0 ? text : text.slice(0, split);
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(
        lines.filter(Boolean).map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      let body = split < 0 ? '' : text.slice(split + 4);
      if (headers['content-length']) body = Buffer.from(body).subarray(0, Number(headers['content-length'])).toString('utf8');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body, closed });
      socket.destroy();
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (d) => {
      chunks.push(d);
      // Keep-alive answers do not close: stop once the whole body (by Content-Length) is here.
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, split))?.[1];
      const closing = /\r\nconnection:\s*close/i.test(text.slice(0, split));
      if (split >= 0 && !closing && length !== undefined && Buffer.byteLength(text.slice(split + 4)) >= Number(length)) finish();
    });
    socket.on('end', () => {
      closed = true;
      finish();
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', (e) => (chunks.length ? finish() : reject(e)));
    socket.write(payload);
  });
}

function assertOpenAiError(
  status: number,
  body: string,
  expected: number,
  code?: string,
): { message: string; type: string; param: string | null; code: string | null } {
  assert.is(status, expected, body.slice(0, 300));
  const json = JSON.parse(body);
  assert.equal(Object.keys(json), ['error']);
  assert.equal(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
  assert.ok(typeof json.error.message === 'string' && json.error.message.length > 10);
  assert.is(json.error.type, 'invalid_request_error');
  if (code !== undefined) assert.is(json.error.code, code);
  return json.error;
}

const assertReplyError = (r: Reply, status: number, code?: string) => {
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  return assertOpenAiError(r.status, r.text, status, code);
};

async function eventHead(): Promise<number> {
  await gw.ledger.caughtUp();
  return gw.ledger.events.headPosition();
}

// ---------------------------------------------------------------- 1. Node's parser errors

test('headers over 16 KB: 431 in the OpenAI error shape with Content-Type and Connection: close, the server stays up', async () => {
  const big = 'a'.repeat(20 * 1024);
  const r = await raw(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${acct.key}\r\nX-Big: ${big}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
  );
  assert.match(r.headers['content-type'] ?? '', /^application\/json/);
  assert.is(r.headers.connection, 'close');
  assertOpenAiError(r.status, r.body, 431, 'request_headers_too_large');
  assert.ok(r.closed, 'the connection is closed after the answer');

  // What an HTTP client sees (fetch with a huge cookie-like header).
  const viaFetch = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${acct.key}`, 'x-big': big } });
  assert.is(viaFetch.status, 431);
  assert.match(viaFetch.headers.get('content-type') ?? '', /application\/json/);
  assertOpenAiError(viaFetch.status, await viaFetch.text(), 431);

  // Still serving.
  assert.is((await call(gw, '/healthz')).status, 200);
  assert.is((await chat(gw, acct.key, hi)).status, 200);
});

test('a malformed request is a 400 in the error shape; clients that vanish mid-request crash nothing', async () => {
  const garbage = await raw('THIS IS NOT HTTP\r\n\r\n');
  assert.is(garbage.headers.connection, 'close');
  assertOpenAiError(garbage.status, garbage.body, 400);
  const badHeader = await raw('GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header Name: x\r\n\r\n');
  assertOpenAiError(badHeader.status, badHeader.body, 400);

  // Oversized headers from clients that close (or reset) at once: the socket is gone when the
  // error handler runs.
  const { hostname, port } = new URL(gw.url);
  await Promise.all(
    Array.from(
      { length: 20 },
      (_, i) =>
        new Promise<void>((resolve) => {
          const s = connect(Number(port), hostname, () => {
            s.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(40 * 1024)}\r\n\r\n`);
            if (i % 2) s.resetAndDestroy();
            else s.destroy();
            resolve();
          });
          s.on('error', () => resolve());
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 200));
  assert.is((await call(gw, '/healthz')).status, 200);
  assert.is((await call(gw, '/v1/models', { key: acct.key })).status, 200);
});

// ---------------------------------------------------------------- 2. unknown keys

test('the same unknown key many times costs no key query after the first; a key issued later works at once', async () => {
  const db = gw.db as { query: (...args: any[]) => Promise<unknown[]> };
  const original = db.query;
  let keyQueries = 0;
  db.query = function (this: unknown, ...args: any[]) {
    if (/\.keys WHERE hash/i.test(String(args[0]))) keyQueries++;
    return original.apply(this, args);
  } as typeof db.query;
  try {
    const secret = unknownKey();
    // Sequential and concurrent calls with one unknown key.
    for (let i = 0; i < 30; i++) assertReplyError(await chat(gw, secret, hi), 401, 'invalid_api_key');
    const replies = await Promise.all(Array.from({ length: 30 }, () => call(gw, '/v1/models', { key: secret })));
    for (const r of replies) assertReplyError(r, 401, 'invalid_api_key');
    // One miss resolves it (read model, then the store, then the read model again): at most 2.
    assert.ok(keyQueries <= 2, `60 calls with one unknown key cost ${keyQueries} key queries`);

    // Concurrent first use of another unknown key: the lookups are shared.
    const before = keyQueries;
    const other = unknownKey();
    await Promise.all(Array.from({ length: 20 }, () => call(gw, '/v1/models', { key: other })));
    assert.ok(keyQueries - before <= 2, `20 concurrent calls with a new unknown key cost ${keyQueries - before} key queries`);

    // The remembered-unknown key is now issued (exactly as the ledger's issueKey does, with a
    // secret chosen here): it must work on the very next call, not after the cache expires.
    const keyId = `key_${randomBytes(8).toString('hex')}`;
    await keyCommand(
      gw.ledger,
      keyId,
      { type: 'Issue', keyId, accountId: acct.accountId, name: 'late key', hash: hashKey(secret), last4: lastFour(secret) },
      { correlationId: `test-${keyId}`, causationId: null, actor: 'admin:test' },
    );
    const ok = await call(gw, '/v1/models', { key: secret });
    assert.is(ok.status, 200, ok.text);
    assert.is((await chat(gw, secret, hi)).status, 200);

    // Revoking it is still heard at once (no stale negative or positive entry).
    await revokeKey(gw.ledger, keyId, 'test', 'admin:test');
    assertReplyError(await call(gw, '/v1/models', { key: secret }), 401, 'invalid_api_key');
  } finally {
    db.query = original;
  }
});

test('the negative cache is bounded: thousands of distinct unknown keys do not grow it without limit', async () => {
  const keys = gw.deps.keys as unknown as { negativeCacheSize: number; lookup(s: string): Promise<unknown> };
  // Straight through the directory (the HTTP path is the test above): 5,000 distinct misses.
  for (let i = 0; i < 5000; i += 250) await Promise.all(Array.from({ length: 250 }, () => keys.lookup(unknownKey())));
  assert.ok(keys.negativeCacheSize > 0 && keys.negativeCacheSize <= 4096, `negative cache holds ${keys.negativeCacheSize}`);
});

// ---------------------------------------------------------------- 3. authentication before the body

test('without a valid key the body is never parsed: 401 first, even for broken or huge bodies', async () => {
  const broken = '{"model": "cx/gen-6-luna", "messages": [';
  const json = { 'content-type': 'application/json' };
  for (const path of ['/v1/chat/completions', '/v1/responses', '/v1/images/generations', '/v1/images/edits']) {
    assertReplyError(await call(gw, path, { raw: broken, headers: json }), 401, 'invalid_api_key');
    assertReplyError(await call(gw, path, { raw: broken, headers: { ...json, authorization: 'Bearer nope' } }), 401, 'invalid_api_key');
    assertReplyError(await call(gw, path, { raw: broken, key: unknownKey(), headers: json }), 401, 'invalid_api_key');
  }
  // Multipart from an unknown client: refused before formidable sees it.
  const form = new FormData();
  form.set('model', 'alpha-haiku-4.5');
  form.set('prompt', 'x');
  form.set('image', new Blob([randomBytes(64 * 1024)], { type: 'image/png' }), 'a.png');
  const multipart = await fetch(`${gw.url}/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${unknownKey()}` }, body: form });
  assertOpenAiError(multipart.status, await multipart.text(), 401, 'invalid_api_key');

  // With a valid key the body is checked as before: broken JSON is a 400, a huge one a 413.
  assertReplyError(await call(gw, '/v1/chat/completions', { raw: broken, key: acct.key, headers: json }), 400, 'invalid_json');
  // Over the 25 MB limit without a key: a 401, not a 413 (that would mean the body was read).
  const huge = JSON.stringify({ ...hi, messages: userMessage('x'.repeat(26 * 1024 * 1024)) });
  assertReplyError(await call(gw, '/v1/chat/completions', { raw: huge, headers: json }), 401, 'invalid_api_key');
  assertReplyError(await call(gw, '/v1/chat/completions', { raw: huge, key: acct.key, headers: json }), 413, 'request_too_large');

  // The proof that nothing waits for the body: announce 10 MB, send 1 KB, and the 401 comes anyway.
  const started = Date.now();
  const partial = await raw(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${unknownKey()}\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n{"model":"cx/gen-6-luna","messages":[${' '.repeat(1024)}`,
    3000,
  );
  assertOpenAiError(partial.status, partial.body, 401, 'invalid_api_key');
  assert.ok(Date.now() - started < 2500, 'answered without waiting for the rest of the body');
  // The same with a valid key waits for the body (it is needed): no answer yet.
  const waiting = await raw(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${acct.key}\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n{"model":`,
    500,
  );
  assert.is(waiting.status, 0, 'a valid key waits for its body');

  // Still working afterwards, keep-alive included.
  assert.is((await chat(gw, acct.key, hi)).status, 200);
});

test('Anthropic Messages: x-api-key works, a bad one is a 401 in Anthropic shape before the body is read', async () => {
  const body = { model: MODEL, max_tokens: 16, messages: userMessage('Say hi') };
  for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
    const good = await call(gw, path, { body, headers: { 'x-api-key': acct.key, 'anthropic-version': '2023-06-01' } });
    assert.is(good.status, 200, good.text);
    for (const headers of [{ 'x-api-key': unknownKey() }, { 'x-api-key': 'nope' }, {}] as Record<string, string>[]) {
      const bad = await call(gw, path, { raw: '{"model": [', headers: { ...headers, 'content-type': 'application/json' } });
      assert.is(bad.status, 401, bad.text);
      assert.is(bad.json.type, 'error');
      assert.is(bad.json.error.type, 'authentication_error');
    }
    // A valid key with a broken body: the body's 400, in Anthropic shape.
    const broken = await call(gw, path, { raw: '{"model": [', headers: { 'x-api-key': acct.key, 'content-type': 'application/json' } });
    assert.is(broken.status, 400, broken.text);
    assert.is(broken.json.type, 'error');
    assert.is(broken.json.error.type, 'invalid_request_error');
  }
});

// ---------------------------------------------------------------- 4. empty inputs

test('/v1/responses with an empty input is a 400 on param input; nothing reserved, charged or appended', async () => {
  const before = await ledgerView(gw, acct.accountId);
  const head = await eventHead();
  const cases: [unknown, Record<string, unknown>][] = [
    [[], {}],
    [[], { stream: true }],
    [[], { instructions: 'Be brief.' }],
    ['', {}],
    [[{ type: 'reasoning', summary: [] }], {}],
    [[{ type: 'message', role: 'user', content: [] }], {}],
  ];
  for (const [input, extra] of cases) {
    const r = await call(gw, '/v1/responses', { key: acct.key, body: { model: MODEL, input, ...extra } });
    const e = assertReplyError(r, 400);
    assert.is(e.param, 'input', JSON.stringify(input));
    assert.match(e.message, /input/);
    assert.is(r.headers.get('x-tollgate-billed-tokens') ?? '0', '0');
  }
  // Chat completions: an empty messages list is refused the same way.
  const emptyChat = await chat(gw, acct.key, { model: MODEL, messages: [] });
  assert.is(assertReplyError(emptyChat, 400).param, 'messages');
  const emptyStream = await chat(gw, acct.key, { model: MODEL, messages: [], stream: true });
  assert.is(assertReplyError(emptyStream, 400).param, 'messages');

  assert.is(await eventHead(), head, 'no event appended');
  const after = await ledgerView(gw, acct.accountId);
  assert.is(after.billed, before.billed);
  assert.is(after.chatCharges.length, before.chatCharges.length);
  assert.is(after.reservations.length, before.reservations.length);
  assert.is(after.row.reserved, 0);

  // A real input is still answered and charged.
  const ok = await call(gw, '/v1/responses', { key: acct.key, body: { model: MODEL, input: 'Say hi' } });
  assert.is(ok.status, 200, ok.text);
  assert.ok(Number(ok.headers.get('x-tollgate-billed-tokens')) > 0);
});

test.run();
