// Security, issue #30 item 1: nothing is read before the caller is known, and every parsed body is
// bounded. Against a real gateway over HTTP:
// - without credentials, an admin request's body is never decompressed nor parsed (broken JSON and
//   a gzip bomb of millions of empty objects both get the 401, not a 400 that means "parsed");
// - the public routes that take no body (/, /healthz, /readyz, static pages) refuse one unread;
// - with a valid admin token or any /v1 key (even one with zero quota) a body past a limit is
//   refused by the limit that names it: decompressed size (413), nesting depth, items per array,
//   keys per object (400), and the ledger does not move.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { request } from 'node:http';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { openAccount, type TestAccount } from './support/http.ts';
import { ADMIN_LIMITS, modelCallLimits } from '../src/http/body.ts';
import { chatWithInlineImage } from './support/inline-image.ts';

const ADMIN = `tg_admin_${randomBytes(24).toString('base64url')}`;
const MODEL_CALL_LIMITS = modelCallLimits();
let gw: TestGateway;
let broke: TestAccount;

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  broke = await openAccount(gw, { quota: 0, requestsPerMinute: 5 });
});
test.after(async () => {
  await gw?.stop();
});

/** Over node:http, which (unlike fetch) sends a body with any method. */
function send(path: string, body: Buffer | string, headers: Record<string, string>, method = 'POST') {
  return new Promise<{ status: number; text: string; json: { error: { code: string | null; message: string } } }>((resolve, reject) => {
    const req = request(
      gw.url + path,
      { method, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, text, json: JSON.parse(text) });
        });
      },
    );
    // The server may answer and close before the whole body is sent.
    req.on('error', (err) =>
      (err as NodeJS.ErrnoException).code === 'EPIPE' || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err),
    );
    req.end(body);
  });
}

/** 8 million empty objects in an array: about 23 KB gzipped, 24 MB inflated. */
const emptyObjectsBomb = () => gzipSync(Buffer.from(`[${'{},'.repeat(8_000_000)}{}]`), { level: 9 });
const lastPosition = async () => (await gw.ledger.events.readAll(0, 1_000_000)).at(-1)?.position ?? 0;

test('without the admin token, an admin body is neither decompressed nor parsed: the 401 comes first', async () => {
  const broken = await send('/admin/v1/plans', '{"plan_id": ', {});
  assert.is(broken.status, 401, broken.text);
  assert.is(broken.json.error.code, 'invalid_admin_token');
  const bomb = emptyObjectsBomb();
  assert.ok(bomb.length < 40_000, `the bomb is small on the wire (${bomb.length} bytes)`);
  const bombed = await send('/admin/v1/plans', bomb, { 'content-encoding': 'gzip' });
  assert.is(bombed.status, 401, bombed.text);
  const wrong = await send('/admin/v1/plans', bomb, { 'content-encoding': 'gzip', authorization: 'Bearer tg_admin_wrong' });
  assert.is(wrong.status, 401, wrong.text);
});

test('with the admin token, the bomb is refused by the items-per-array limit, and so are deep and wide bodies', async () => {
  const auth = { authorization: `Bearer ${ADMIN}` };
  const before = await lastPosition();
  const bombed = await send('/admin/v1/plans', emptyObjectsBomb(), { ...auth, 'content-encoding': 'gzip' });
  assert.is(bombed.status, 400, bombed.text);
  assert.match(bombed.json.error.message, `more than ${ADMIN_LIMITS.arrayItems} items`);
  const deep = await send('/admin/v1/plans', `${'{"a":'.repeat(ADMIN_LIMITS.depth + 1)}1${'}'.repeat(ADMIN_LIMITS.depth + 1)}`, auth);
  assert.is(deep.status, 400, deep.text);
  assert.match(deep.json.error.message, 'nested too deeply');
  const wide = JSON.stringify(Object.fromEntries(Array.from({ length: ADMIN_LIMITS.objectKeys + 1 }, (_, i) => [`k${i}`, i])));
  const widened = await send('/admin/v1/plans', wide, auth);
  assert.is(widened.status, 400, widened.text);
  assert.match(widened.json.error.message, `more than ${ADMIN_LIMITS.objectKeys} keys`);
  const big = await send('/admin/v1/plans', gzipSync(JSON.stringify({ name: 'x'.repeat(ADMIN_LIMITS.bytes) })), { ...auth, 'content-encoding': 'gzip' });
  assert.is(big.status, 413, big.text);
  assert.is(big.json.error.code, 'request_too_large');
  assert.is(await lastPosition(), before, 'nothing was appended');
});

test('the public routes that take no body refuse one without reading it', async () => {
  for (const path of ['/', '/healthz', '/readyz', '/app/chat', '/admin', '/setup/setup.sh']) {
    const r = await send(path, '{"a":1}', {}, 'GET');
    assert.is(r.status, 413, `${path}: ${r.text}`);
    assert.is(r.json.error.code, 'request_too_large', path);
    const plain = await fetch(gw.url + path);
    await plain.arrayBuffer();
    assert.ok(plain.status < 400, `${path} without a body: ${plain.status}`);
  }
});

test('a zero-quota key buys no parsing: a huge metadata array, a deep body, a wide object and a bomb are refused by their limits', async () => {
  const auth = { authorization: `Bearer ${broke.key}` };
  const before = await lastPosition();
  const base = { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'hi' }] };
  const metadata = `${JSON.stringify(base).slice(0, -1)},"metadata":[${'0,'.repeat(MODEL_CALL_LIMITS.arrayItems)}0]}`;
  for (const path of ['/v1/chat/completions', '/v1/messages', '/v1/responses', '/v1/images/edits']) {
    const r = await send(path, metadata, auth);
    assert.is(r.status, 400, `${path}: ${r.text}`);
    assert.match(r.text, `more than ${MODEL_CALL_LIMITS.arrayItems} items`);
  }
  const bombed = await send('/v1/chat/completions', emptyObjectsBomb(), { ...auth, 'content-encoding': 'gzip' });
  assert.is(bombed.status, 400, bombed.text);
  const wide = JSON.stringify({ ...base, metadata: Object.fromEntries(Array.from({ length: MODEL_CALL_LIMITS.objectKeys + 1 }, (_, i) => [`k${i}`, 'v'])) });
  const widened = await send('/v1/chat/completions', wide, auth);
  assert.is(widened.status, 400, widened.text);
  assert.match(widened.json.error.message, `more than ${MODEL_CALL_LIMITS.objectKeys} keys`);
  // A number or a run of blanks longer than any real body holds: each would be one long parse.
  const longNumber = await send('/v1/chat/completions', `${JSON.stringify(base).slice(0, -1)},"metadata":[${'9'.repeat(1_000_001)}]}`, auth);
  assert.is(longNumber.status, 400, longNumber.text);
  assert.match(longNumber.json.error.message, 'longer than 1000 characters');
  const blanks = await send('/v1/chat/completions', `${JSON.stringify(base).slice(0, -1)},"metadata":${' '.repeat(1_000_000)}{}}`, auth);
  assert.is(blanks.status, 400, blanks.text);
  assert.match(blanks.json.error.message, 'blank characters in a row');
  const inflated = gzipSync(Buffer.from(`{"metadata":"${'x'.repeat(MODEL_CALL_LIMITS.bytes + 1024)}"}`));
  const big = await send('/v1/chat/completions', inflated, { ...auth, 'content-encoding': 'gzip' });
  assert.is(big.status, 413, big.text);
  assert.match(big.json.error.message, 'once decompressed');
  assert.is(await lastPosition(), before, 'nothing was appended');
});

test('each route takes the body size it needs and no more: 10 MB for a model call (an inline image fits), 1 MB for a redemption', async () => {
  const rich = await openAccount(gw, { quota: 100_000_000 });
  const auth = { authorization: `Bearer ${rich.key}` };
  const MB = 1024 * 1024;
  const withImage = chatWithInlineImage;
  const fits = await send('/v1/chat/completions', withImage(MODEL_CALL_LIMITS.bytes - 1024), auth);
  assert.is(fits.status, 200, fits.text.slice(0, 300));
  const over = await send('/v1/chat/completions', withImage(MODEL_CALL_LIMITS.bytes + MB), auth);
  assert.is(over.status, 413, over.text.slice(0, 300));
  assert.match(over.json.error.message, `at most ${MODEL_CALL_LIMITS.bytes / MB} MB`);
  const code = await send('/v1/redemptions', JSON.stringify({ code: 'x'.repeat(ADMIN_LIMITS.bytes) }), auth);
  assert.is(code.status, 413, code.text.slice(0, 300));
  assert.match(code.json.error.message, `at most ${ADMIN_LIMITS.bytes / MB} MB`);
});

test.run();
