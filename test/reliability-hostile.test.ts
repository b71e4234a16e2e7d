// Hostile input against a real gateway process: at least 10,000 generated bad requests
// (fast-check, fixed seed printed below) over every metered endpoint: malformed and truncated
// JSON, wrong types, missing fields, bad keys, wrong sizes, n != 1, prompts over 8000 characters,
// broken data URIs, oversized and pixel-bomb images, unsupported multipart parts, deep nesting,
// huge bodies, lying Content-Encoding, wrong methods and paths. Every answer must be a 4xx in the
// endpoint's error shape (Anthropic's on /v1/messages), never a 5xx; the ledger must not move
// (same event head, nothing used or held); the process must stay up, and its memory flat.
// Reproduce a failure with RELIABILITY_SEED=<seed printed in the output>.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import sharp from 'sharp';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';

const SEED = Number(process.env.RELIABILITY_SEED ?? 9_090_909);
const GENERATED = Number(process.env.RELIABILITY_HOSTILE_COUNT ?? 10_000);
const CONCURRENCY = 24;
const WARM_UP = 1500;
const ADMIN = `tg_admin_${randomBytes(16).toString('hex')}`;

let gp: GatewayProcess;
let origin = '';
let key = '';
let revokedKey = '';
/** The gateway's TMPDIR: multipart uploads land here, and must not stay. */
const uploadDir = mkdtempSync(join(tmpdir(), 'tollgate-uploads-'));

interface Req {
  label: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

const modelsConfig = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8')) as { models: Record<string, unknown> };
const KNOWN_MODELS = new Set(Object.keys(modelsConfig.models).flatMap((id) => [id, id.replace(/^cx\//, '')]));
const ENABLED = ['cx/gen-6-luna', 'alpha-haiku-4.5'];
/** A real model the test plan does not enable: a 403, not a charge. */
const NOT_IN_PLAN = 'alpha-opus-5';

async function admin(method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${origin}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.status < 300, `admin ${method} ${path}: ${r.status} ${text}`);
  return r.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text;
}

async function eventHead(): Promise<number> {
  const lines = ((await admin('GET', '/events')) as string).trim().split('\n');
  return JSON.parse(lines[lines.length - 1]).position;
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) / 1024;
}

// ---------- building blocks ----------

const json = (body: unknown) => JSON.stringify(body);
const withKey = (k: string): Record<string, string> => ({ authorization: `Bearer ${k}`, 'content-type': 'application/json' });
const post = (label: string, path: string, body: string | Buffer, headers: Record<string, string> = withKey(key)): Req => ({
  label,
  method: 'POST',
  path,
  headers,
  body,
});

const chatBase = () => ({ model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'Say hi' }] });
const imageBase = () => ({ model: 'alpha-haiku-4.5', prompt: 'a lighthouse at dusk' });
const messagesBase = () => ({ model: 'cx/gen-6-luna', max_tokens: 16, messages: [{ role: 'user', content: 'Say hi' }] });
const responsesBase = () => ({ model: 'cx/gen-6-luna', input: 'Say hi' });

const oddUnicode = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
  fc.constantFrom('\ud800', 'a\udfffb', '\u0000', '\u202etxt.exe', '\ufeff', 'e\u0301\u0301\u0301', '🦀'.repeat(50), '\u2028\u2029', 'ｍｏｄｅｌ'),
);
const nonString = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);
const nonObject = fc.oneof(fc.integer(), fc.boolean(), fc.string({ maxLength: 20 }), fc.constant(null));
const nonArray = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.string({ maxLength: 20 }),
  fc.constant(null),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);
const notIn = (allowed: unknown[]) => fc.oneof(fc.string({ maxLength: 30 }), oddUnicode).filter((s) => !allowed.includes(s));
const badModel = fc.oneof(
  nonString,
  fc.constant(''),
  fc.string({ minLength: 201, maxLength: 400 }),
  fc.constant(NOT_IN_PLAN),
  fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), oddUnicode).filter((s) => !KNOWN_MODELS.has(s)),
);
const badNumber = (min: number, max: number) =>
  fc.oneof(
    fc.double({ min: max + 0.5, max: 1e12, noNaN: true, noDefaultInfinity: true }),
    fc.double({ min: -1e12, max: min - 0.5, noNaN: true, noDefaultInfinity: true }),
    fc.string({ maxLength: 8 }),
    fc.boolean(),
    fc.array(fc.integer(), { maxLength: 2 }),
  );
const badInt = (min: number, max: number) =>
  fc.oneof(
    badNumber(min, max),
    fc.integer({ min: max + 1 }),
    fc.integer({ max: min - 1 }),
    fc.double({ min: min + 0.01, max: Math.min(max, 1e6) - 0.01, noNaN: true }).filter((d) => !Number.isInteger(d)),
  );
/** Code points, not UTF-16 units: the 8000-character limit counts characters. */
const longPrompt = fc.tuple(fc.integer({ min: 8001, max: 12_000 }), fc.constantFrom('p', 'é', '🦀', 'ab ', '\u4e2d')).map(([n, unit]) => {
  const per = [...unit].length;
  return unit.repeat(Math.ceil(n / per));
});

const brokenBase64 = fc.oneof(
  fc.string({ minLength: 1, maxLength: 40 }).map((s) => `data:image/png;base64,${s}!*`),
  fc.constantFrom(
    'data:image/png;base64,',
    'data:text/plain;base64,aGVsbG8=',
    'data:image/png,rawbytes',
    'data:;base64,AAAA',
    'data:image/png;base64,@@@@',
    'data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=',
    'data:image/png;base64,====',
  ),
);
let pixelBomb = '';
let truncatedPng = '';
let validPng = '';
/** Broken for the images endpoints: also well-formed base64 that is no image, or too many pixels. */
const brokenImage = () =>
  fc.oneof(
    brokenBase64,
    fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => `data:image/png;base64,${Buffer.from(b).toString('base64')}`),
    fc.constant(truncatedPng),
    fc.constant(pixelBomb),
    fc.constantFrom(
      'http://example.com/a.png',
      'ftp://example.com/a.png',
      'https://127.0.0.1/a.png',
      'https://169.254.169.254/latest/meta-data/',
      'https://[::ffff:7f00:1]/a.png',
      'https://10.0.0.1/a.png',
      'https://localhost/a.png',
      'not a url',
      'javascript:alert(1)',
      'file:///etc/passwd',
    ),
  );

/** One field of a valid body replaced by a bad value, or a required field removed. */
function mutated(
  label: string,
  path: string,
  base: () => Record<string, unknown>,
  bad: Record<string, fc.Arbitrary<unknown>>,
  required: string[],
): fc.Arbitrary<Req> {
  const replace = fc.constantFrom(...Object.keys(bad)).chain((field) =>
    bad[field].map((value) => {
      const body = base();
      body[field] = value;
      return post(`${label}: bad ${field}`, path, json(body));
    }),
  );
  const remove = fc.constantFrom(...required).map((field) => {
    const body = base();
    delete body[field];
    return post(`${label}: missing ${field}`, path, json(body));
  });
  return fc.oneof({ arbitrary: replace, weight: 5 }, { arbitrary: remove, weight: 1 });
}

const chatMutations = () =>
  mutated(
    'chat',
    '/v1/chat/completions',
    chatBase,
    {
      model: badModel,
      messages: fc.oneof(
        nonArray,
        fc.constant([]),
        fc.array(nonObject, { minLength: 1, maxLength: 3 }),
        notIn(['system', 'developer', 'user', 'assistant', 'tool']).map((role) => [{ role, content: 'hi' }]),
        fc.constant([{ content: 'no role' }]),
        fc
          .oneof(fc.integer(), fc.boolean(), fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 2 }))
          .map((content) => [{ role: 'user', content }]),
        fc
          .constantFrom([{ type: 'text' }], [{ type: 'image_url' }], [{ type: 'video', url: 'x' }], [{ type: 'text', text: 5 }], [{ text: 'no type' }])
          .map((content) => [{ role: 'user', content }]),
        brokenBase64.map((url) => [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }]),
      ),
      reasoning_effort: fc.oneof(notIn(['low', 'medium', 'high', 'xhigh', 'max']), fc.integer()),
      max_tokens: badInt(1, 1_000_000),
      max_completion_tokens: badInt(1, 1_000_000),
      temperature: badNumber(0, 2),
      top_p: badNumber(0, 1),
      n: fc.oneof(fc.integer({ min: 2, max: 1000 }), fc.integer({ min: -5, max: 0 }), fc.string({ maxLength: 3 })),
      stream: fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 1 })),
      stream_options: fc.oneof(fc.string({ maxLength: 4 }), fc.constant({ include_usage: 'yes' })),
      stop: fc.oneof(fc.integer(), fc.array(fc.string({ maxLength: 3 }), { minLength: 5, maxLength: 8 })),
      tools: fc.oneof(
        fc.string({ maxLength: 5 }),
        fc.constantFrom(
          [{}],
          [{ type: 'function' }],
          [{ type: 'function', function: { name: '' } }],
          [{ type: 'function', function: { name: 'x'.repeat(65) } }],
          [{ type: 'code', function: { name: 'f' } }],
          [{ type: 'function', function: { name: 'f', parameters: 'schema' } }],
        ),
      ),
      tool_choice: notIn(['none', 'auto', 'required']),
      user: fc.oneof(fc.string({ minLength: 257, maxLength: 300 }), fc.integer()),
      seed: fc.double({ min: 0.1, max: 1e6, noNaN: true }).filter((d) => !Number.isInteger(d)),
    },
    ['model', 'messages'],
  );

const imageBad = () => ({
  model: badModel,
  prompt: fc.oneof(nonString, fc.constant(''), longPrompt),
  size: fc.oneof(notIn(['1024x1024', '1024x1536', '1536x1024']), fc.constantFrom('512x512', '1792x1024', '1024X1024', '1024x1024 ', '0x0', '-1x-1')),
  n: fc.oneof(fc.integer({ min: 2, max: 100 }), fc.integer({ min: -10, max: 0 }), fc.constantFrom('1', 1.5, null, true)),
  response_format: fc.oneof(notIn(['b64_json']), fc.constant('url')),
  image: fc.oneof(
    nonString.filter((v) => v !== null),
    fc.constant(''),
    brokenImage(),
  ),
  user: fc.string({ minLength: 257, maxLength: 300 }),
  quality: fc.integer(),
});
const generationMutations = () => mutated('generations', '/v1/images/generations', imageBase, imageBad(), ['model', 'prompt']);
const editMutations = () => mutated('edits (json)', '/v1/images/edits', () => ({ ...imageBase(), image: validPng }), imageBad(), ['model', 'prompt', 'image']);

const messagesMutations = () =>
  mutated(
    'messages',
    '/v1/messages',
    messagesBase,
    {
      model: badModel,
      max_tokens: badInt(1, 1_000_000),
      messages: fc.oneof(
        nonArray,
        fc.constant([]),
        fc.array(nonObject, { minLength: 1, maxLength: 3 }),
        notIn(['user', 'assistant', 'system']).map((role) => [{ role, content: 'hi' }]),
        fc.constant([{ role: 'user' }]),
        fc.oneof(fc.integer(), fc.boolean(), fc.constant(null)).map((content) => [{ role: 'user', content }]),
        fc.constantFrom([{ text: 'no type' }], [{ type: 5 }], [{ type: 'image' }]).map((content) => [{ role: 'user', content }]),
        fc
          .oneof(
            brokenBase64.map((uri) => ({ type: 'base64', media_type: 'image/png', data: uri.split(',')[1] + '!' })),
            notIn(['image/jpeg', 'image/png', 'image/gif', 'image/webp']).map((media_type) => ({ type: 'base64', media_type, data: 'AAAA' })),
            fc.constantFrom(
              { type: 'base64', media_type: 'image/png' },
              { type: 'base64', data: 'AAAA' },
              { type: 'url' },
              { type: 'url', url: 'ftp://x/y.png' },
              { type: 'url', url: 5 },
            ),
          )
          .map((source) => [{ role: 'user', content: [{ type: 'image', source }] }]),
      ),
      system: fc.oneof(
        fc.integer(),
        fc.boolean(),
        fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
        fc.constant([{ text: 'no type' }]),
      ),
      tools: fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.oneof(fc.integer(), fc.string({ maxLength: 3 })), { minLength: 1, maxLength: 2 })),
      stream: fc.oneof(fc.string({ maxLength: 5 }), fc.integer()),
      temperature: badNumber(0, 2),
      top_k: fc.integer({ max: -1 }),
      stop_sequences: fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.integer(), { minLength: 1, maxLength: 2 })),
      tool_choice: fc.oneof(fc.string({ maxLength: 5 }), fc.constant({})),
    },
    ['model', 'messages', 'max_tokens'],
  );

const responsesMutations = () =>
  mutated(
    'responses',
    '/v1/responses',
    responsesBase,
    {
      model: badModel,
      input: fc.oneof(
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
        fc.array(fc.oneof(fc.integer(), fc.string({ maxLength: 3 })), { minLength: 1, maxLength: 3 }),
      ),
      instructions: fc.oneof(fc.integer(), fc.boolean(), fc.constant({})),
      tools: fc.oneof(fc.string({ maxLength: 5 }), fc.constantFrom([{}], [{ name: 'f' }], [5])),
      max_output_tokens: badInt(1, 1_000_000),
      temperature: badNumber(0, 2),
      top_p: badNumber(0, 1),
      metadata: fc.constantFrom({ a: 1 }, { a: { b: 'c' } }, 'meta', 5),
      stream: fc.oneof(fc.string({ maxLength: 5 }), fc.integer()),
    },
    ['model', 'input'],
  );

/** A valid body text, cut short or damaged: never valid JSON. */
const bodies: [string, () => unknown][] = [
  ['/v1/chat/completions', chatBase],
  ['/v1/images/generations', imageBase],
  ['/v1/images/edits', () => ({ ...imageBase(), image: validPng })],
  ['/v1/messages', messagesBase],
  ['/v1/responses', responsesBase],
  ['/v1/messages/count_tokens', messagesBase],
];
const malformedJson = () =>
  fc.constantFrom(...bodies).chain(([path, base]) => {
    const text = json(base());
    return fc.oneof(
      fc.integer({ min: 1, max: text.length - 1 }).map((cut) => post(`truncated json ${path}`, path, text.slice(0, cut))),
      // A raw control character is invalid anywhere in JSON text, inside strings as well as between tokens.
      fc
        .tuple(
          fc.integer({ min: 0, max: text.length - 1 }),
          fc.integer({ min: 0, max: 31 }).filter((c) => ![9, 10, 13].includes(c)),
        )
        .map(([at, c]) => post(`damaged json ${path}`, path, text.slice(0, at) + String.fromCharCode(c) + text.slice(at))),
      fc
        .oneof(fc.string({ maxLength: 60 }), oddUnicode)
        .filter((s) => {
          try {
            const v = JSON.parse(s);
            return v === null || typeof v !== 'object' || Array.isArray(v);
          } catch {
            return true;
          }
        })
        .map((s) => post(`garbage body ${path}`, path, s)),
      fc
        .uint8Array({ minLength: 1, maxLength: 80 })
        .map((b) => post(`binary body ${path}`, path, Buffer.concat([Buffer.from('{"model":"'), Buffer.from(b), Buffer.from([0xff, 0xfe])]))),
      fc
        .constantFrom('[]', '[{}]', 'null', '0', 'true', '"x"', '{}', '\ufeff{}', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}')
        .map((s) => post(`non-object json ${path}`, path, s)),
    );
  });

/** A valid request whose key is wrong: missing, malformed, unknown, revoked. */
const badAuth = () =>
  fc.constantFrom(...bodies.filter(([p]) => p !== '/v1/images/edits')).chain(([path, base]) => {
    const ascii = fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 120 }).filter((s) => /^[\x21-\x7e]+$/.test(s));
    const alnum = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'), minLength: 20, maxLength: 128 });
    const header = fc.oneof(
      fc.constant<Record<string, string>>({}),
      fc
        .constantFrom('Bearer', 'Bearer ', 'bearer', 'Basic dXNlcjpwYXNz', 'Token abc', 'Bearer  ', `Bearer ${'sk_svc_'}`, 'Bearer sk_svc_short')
        .map((v) => ({ authorization: v })),
      ascii.map((s) => ({ authorization: `Bearer ${s}` })),
      alnum.map((s) => ({ authorization: `Bearer sk_svc_${s}` })),
      alnum.map((s) => ({ authorization: `Bearer ${key.slice(0, -4)}${s.slice(0, 4)}` })).filter((h) => h.authorization !== `Bearer ${key}`),
      fc.constant({ authorization: `Bearer ${revokedKey}` }),
      fc.constant({ authorization: `Bearer ${key}x` }),
      fc.constant({ authorization: `Bearer ${key} ${key}` }),
      fc.constant({ authorization: `Basic ${key}` }),
      alnum.map((s) => ({ 'x-api-key': `sk_svc_${s}` })),
      fc.constant({ 'x-api-key': revokedKey }),
      fc.constant({ authorization: 'Bearer sk_svc_' + 'A'.repeat(4000) }),
    );
    return header.map((h) => post(`bad auth ${path} ${Object.keys(h).join(',') || 'none'}`, path, json(base()), { 'content-type': 'application/json', ...h }));
  });

const badAuthGets = () =>
  fc
    .constantFrom('/v1/models', '/v1/subscription', '/v1/usage?daily=true&range=30d')
    .chain((path) =>
      fc
        .constantFrom<Record<string, string>>(
          {},
          { authorization: 'Bearer nope' },
          { authorization: `Bearer ${revokedKey}` },
          { authorization: 'Bearer sk_svc_AAAAAAAAAAAAAAAAAAAAAAAAAAAA' },
        )
        .map((headers): Req => ({ label: `bad auth GET ${path}`, method: 'GET', path, headers })),
    );

const badQueries = () =>
  fc
    .oneof(fc.string({ maxLength: 10 }), fc.constantFrom('0d', '366d', '-1d', '30', 'd', '1e3d', '30D', '9999999999999999d'))
    .filter((r) => !/^([1-9]|[1-9]\d|[12]\d\d|3[0-5]\d|36[0-5])d$/.test(r))
    .map((range): Req => ({ label: 'bad usage range', method: 'GET', path: `/v1/usage?daily=true&range=${encodeURIComponent(range)}`, headers: withKey(key) }));

const wrongMethodOrPath = () =>
  fc.oneof(
    fc
      .constantFrom('/v1/chat/completions', '/v1/images/generations', '/v1/images/edits', '/v1/messages', '/v1/responses')
      .chain((path) =>
        fc
          .constantFrom('GET', 'PUT', 'DELETE', 'PATCH')
          .map((method): Req => ({ label: `${method} ${path}`, method, path, headers: withKey(key), body: method === 'GET' ? undefined : json(chatBase()) })),
      ),
    fc
      .string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-_/%'), minLength: 1, maxLength: 30 })
      .filter(
        (p) =>
          !/^(chat\/completions|images\/(generations|edits)|messages(\/count_tokens)?|responses|models|subscription|usage)\/?$/.test(p) && !p.includes('%'),
      )
      .map((p): Req => post(`unknown path /v1/${p}`, `/v1/${p}`, json(chatBase()))),
    fc
      .constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x', 'application/jsonx', 'image/png')
      .map((type): Req =>
        post(`content-type ${type}`, type.startsWith('multipart') ? '/v1/chat/completions' : '/v1/responses', json(responsesBase()), {
          authorization: `Bearer ${key}`,
          'content-type': type,
        }),
      ),
    fc
      .constantFrom('gzip', 'deflate', 'br', 'compress', 'identity, gzip', 'x-custom')
      .map((enc): Req => post(`content-encoding ${enc} (not encoded)`, '/v1/chat/completions', json(chatBase()), { ...withKey(key), 'content-encoding': enc })),
    fc.constantFrom(...bodies).map(([path, base]): Req => {
      const bad = { ...(base() as Record<string, unknown>), model: 7 };
      return post(`gzip-encoded bad body ${path}`, path, gzipSync(json(bad)), { ...withKey(key), 'content-encoding': 'gzip' });
    }),
    fc.tuple(fc.constantFrom(...bodies), fc.integer({ min: 65, max: 20_000 })).map(([[path, base], depth]): Req => {
      const text = json(base());
      return post(`nested ${depth} levels ${path}`, path, `${text.slice(0, -1)},"metadata":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`, {
        ...withKey(key),
        'idempotency-key': `deep-${depth}-${Math.random()}`,
      });
    }),
    fc
      .string({ minLength: 256, maxLength: 400 })
      .map((k) =>
        post('idempotency key too long', '/v1/chat/completions', json({ ...chatBase(), n: 2 }), { ...withKey(key), 'idempotency-key': 'k'.repeat(k.length) }),
      ),
  );

// ---------- multipart ----------

interface Part {
  name: string;
  value: string | Buffer;
  filename?: string;
  type?: string;
}
function multipart(parts: Part[], boundary: string): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`),
      Buffer.from(p.value),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}
let pngBytes = Buffer.alloc(0);
const formBase = (): Part[] => [
  { name: 'model', value: 'alpha-haiku-4.5' },
  { name: 'prompt', value: 'make it warmer' },
  { name: 'image', value: pngBytes, filename: 'a.png', type: 'image/png' },
];
const multipartCases = () => {
  const boundary = 'tollgateFuzz7MA4YWxkTrZu0gW';
  const send = (label: string, parts: Part[], path = '/v1/images/edits', cut?: number): Req => {
    const body = multipart(parts, boundary);
    return post(`multipart ${label}`, path, cut === undefined ? body : body.subarray(0, cut), {
      authorization: `Bearer ${key}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
    });
  };
  const replaced = (name: string, value: string) => formBase().map((p) => (p.name === name ? { name, value } : p));
  return fc.oneof(
    fc
      .constantFrom('mask', 'file', 'image2', 'images', 'photo')
      .map((name) => send(`file field ${name}`, [...formBase(), { name, value: pngBytes, filename: 'm.png', type: 'image/png' }])),
    fc.constant(send('two images', [...formBase(), { name: 'image', value: pngBytes, filename: 'b.png', type: 'image/png' }])),
    fc.constant(send('image[] and image', [...formBase(), { name: 'image[]', value: pngBytes, filename: 'b.png', type: 'image/png' }])),
    fc.uint8Array({ minLength: 1, maxLength: 500 }).map((b) =>
      send(
        'non-image file',
        formBase().map((p) => (p.name === 'image' ? { ...p, value: Buffer.from(b) } : p)),
      ),
    ),
    fc.constant(
      send(
        'truncated png file',
        formBase().map((p) => (p.name === 'image' ? { ...p, value: pngBytes.subarray(0, 40) } : p)),
      ),
    ),
    fc.constant(
      send(
        'empty file',
        formBase().map((p) => (p.name === 'image' ? { ...p, value: Buffer.alloc(0) } : p)),
      ),
    ),
    fc.constant(
      send(
        'no image',
        formBase().filter((p) => p.name !== 'image'),
      ),
    ),
    fc.constant(send('file and image field', [...formBase(), { name: 'image', value: validPng }])),
    fc.constantFrom('model', 'prompt').map((name) =>
      send(
        `missing ${name}`,
        formBase().filter((p) => p.name !== name),
      ),
    ),
    fc
      .oneof(fc.integer({ min: 2, max: 50 }).map(String), fc.constantFrom('0', '-1', 'one', '1.0', ''))
      .map((n) => send(`n=${n}`, [...formBase(), { name: 'n', value: n }])),
    notIn(['1024x1024', '1024x1536', '1536x1024']).map((size) => send('bad size', [...formBase(), { name: 'size', value: size }])),
    fc.constantFrom('url', 'b64', '').map((f) => send('bad response_format', [...formBase(), { name: 'response_format', value: f }])),
    longPrompt.map((p) => send('long prompt', replaced('prompt', p))),
    fc
      .oneof(
        fc.constant(NOT_IN_PLAN),
        fc.string({ minLength: 1, maxLength: 30 }).filter((s) => !KNOWN_MODELS.has(s)),
      )
      .map((m) => send('bad model', replaced('model', m))),
    fc.integer({ min: 51, max: 80 }).map((n) => send(`${n} fields`, [...formBase(), ...Array.from({ length: n }, (_, i) => ({ name: `f${i}`, value: 'v' }))])),
    fc.constant(send('1.1 MB field', [...formBase(), { name: 'note', value: 'x'.repeat(1_100_000) }])),
    fc
      .integer({ min: 5, max: 8 })
      .map((n) =>
        send(`${n} files`, [
          ...formBase(),
          ...Array.from({ length: n }, (_, i) => ({ name: 'image', value: pngBytes, filename: `${i}.png`, type: 'image/png' })),
        ]),
      ),
    fc.integer({ min: 10, max: 200 }).map((cut) => send('truncated body', formBase(), '/v1/images/edits', cut)),
    fc.constant(send('to generations', formBase(), '/v1/images/generations')),
    fc.constant(post('multipart without boundary', '/v1/images/edits', 'garbage', { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data' })),
    fc.constant(
      post('multipart with another boundary', '/v1/images/edits', multipart(formBase(), 'other'), {
        authorization: `Bearer ${key}`,
        'content-type': 'multipart/form-data; boundary=mismatch',
      }),
    ),
    fc.constant(
      post('multipart gzip lie', '/v1/images/edits', multipart(formBase(), boundary), {
        authorization: `Bearer ${key}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-encoding': 'gzip',
      }),
    ),
  );
};

const generated = () =>
  fc.oneof(
    { arbitrary: chatMutations(), weight: 14 },
    { arbitrary: generationMutations(), weight: 8 },
    { arbitrary: editMutations(), weight: 8 },
    { arbitrary: messagesMutations(), weight: 10 },
    { arbitrary: responsesMutations(), weight: 8 },
    { arbitrary: malformedJson(), weight: 14 },
    { arbitrary: badAuth(), weight: 14 },
    { arbitrary: badAuthGets(), weight: 2 },
    { arbitrary: badQueries(), weight: 2 },
    { arbitrary: wrongMethodOrPath(), weight: 8 },
    { arbitrary: multipartCases(), weight: 12 },
  );

/** Heavy cases, sent a few times each rather than thousands: bodies over the limits. */
function heavyCases(): Req[] {
  const over = 'x'.repeat(26 * 1024 * 1024);
  const bigImage = `data:image/png;base64,${Buffer.alloc(21 * 1024 * 1024, 1).toString('base64')}`;
  const manyMessages = Array.from({ length: 10_001 }, () => ({ role: 'user', content: 'hi' }));
  return [
    post('26 MB JSON body', '/v1/chat/completions', `{"model":"cx/gen-6-luna","messages":[{"role":"user","content":"${over}"}]}`),
    post('21 MB image data URI', '/v1/images/edits', json({ ...imageBase(), image: bigImage })),
    post('10,001 messages', '/v1/chat/completions', json({ ...chatBase(), messages: manyMessages })),
    post('10,001 messages (Anthropic)', '/v1/messages', json({ ...messagesBase(), messages: manyMessages })),
    post('5 MB prompt', '/v1/images/generations', json({ ...imageBase(), prompt: 'p'.repeat(5_000_000) })),
    post('5 MB content, n=3', '/v1/chat/completions', json({ ...chatBase(), messages: [{ role: 'user', content: 'c'.repeat(5_000_000) }], n: 3 })),
    post(
      'nested 100,000 levels',
      '/v1/chat/completions',
      `{"model":"cx/gen-6-luna","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}}]}`,
    ),
    post('gzip bomb (40 MB of zeros)', '/v1/chat/completions', gzipSync(Buffer.alloc(40 * 1024 * 1024)), { ...withKey(key), 'content-encoding': 'gzip' }),
    post(
      '21 MB upload',
      '/v1/images/edits',
      multipart(
        [...formBase().filter((p) => p.name !== 'image'), { name: 'image', value: Buffer.alloc(21 * 1024 * 1024, 3), filename: 'big.png', type: 'image/png' }],
        'heavyBoundary',
      ),
      { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=heavyBoundary' },
    ),
  ];
}

// ---------- sending and checking ----------

interface Outcome {
  req: Req;
  status: number;
  text: string;
  headers: Headers;
}

async function send(req: Req): Promise<Outcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(origin + req.path, { method: req.method, headers: req.headers, body: req.body as BodyInit | undefined });
      return { req, status: res.status, text: await res.text(), headers: res.headers };
    } catch (err) {
      // A server may answer a too-large upload and close before the client finished sending it.
      if (attempt < 2 && req.body && req.body.length > 1_000_000) continue;
      throw new Error(`${req.label}: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`, { cause: err });
    }
  }
}

function problemWith(o: Outcome): string | null {
  if (o.status < 400 || o.status > 499) return `status ${o.status}`;
  if (o.status === 429) return 'rate limited: the test plan should allow every call';
  const billed = o.headers.get('x-tollgate-billed-tokens');
  if (billed !== null && billed !== '0') return `billed ${billed}`;
  let body: any;
  try {
    body = JSON.parse(o.text);
  } catch {
    return `body is not JSON: ${o.text.slice(0, 80)}`;
  }
  if (o.req.path.split('?')[0].startsWith('/v1/messages') && /^\/v1\/messages(\/count_tokens)?$/.test(o.req.path)) {
    const ok = body?.type === 'error' && typeof body.error?.type === 'string' && typeof body.error?.message === 'string' && body.error.message.length > 0;
    return ok ? null : `not Anthropic's error shape: ${o.text.slice(0, 160)}`;
  }
  const e = body?.error;
  const ok =
    e &&
    Object.keys(body).length === 1 &&
    typeof e.message === 'string' &&
    e.message.length > 0 &&
    typeof e.type === 'string' &&
    (e.param === null || typeof e.param === 'string') &&
    (e.code === null || typeof e.code === 'string');
  return ok ? null : `not OpenAI's error shape: ${o.text.slice(0, 160)}`;
}

async function runAll(reqs: Req[], onProblem: (o: Outcome, problem: string) => void): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < reqs.length) {
        const o = await send(reqs[next++]);
        statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
        const problem = problemWith(o);
        if (problem) onProblem(o, problem);
      }
    }),
  );
  return statuses;
}

// uvu reports a failing hook without its error: print it.
test.before(() =>
  setup().catch((e) => {
    console.error('setup failed:', e);
    throw e;
  }),
);

async function setup(): Promise<void> {
  // warn: no line per request, but a 5xx (logged as an error) would still show.
  // Each hostile request must get its own answer, so the per-key limit on refused requests (which
  // test/security-free-requests.test.ts checks) is lifted here.
  gp = await spawnGateway({ TOLLGATE_ADMIN_TOKEN: ADMIN, LOG_LEVEL: 'warn', TMPDIR: uploadDir, TOLLGATE_INVALID_REQUESTS_PER_MINUTE: '1000000' });
  origin = gp.baseUrl.replace(/\/v1$/, '');
  await admin('POST', '/plans', { plan_id: 'fuzz', name: 'Fuzz', quota: 1_000_000_000, validity_days: 30, requests_per_minute: 1_000_000, models: ENABLED });
  await admin('POST', '/accounts', { account_id: 'fuzz', name: 'Fuzz' });
  await admin('POST', '/accounts/fuzz/subscription', { plan_id: 'fuzz' });
  key = (await admin('POST', '/accounts/fuzz/keys', { name: 'fuzz' })).key;
  const revoked = await admin('POST', '/accounts/fuzz/keys', { name: 'revoked' });
  revokedKey = revoked.key;
  await admin('POST', `/keys/${revoked.key_id}/revoke`, { reason: 'test' });
  pngBytes = await sharp({ create: { width: 32, height: 32, channels: 3, background: { r: 200, g: 30, b: 30 } } })
    .png()
    .toBuffer();
  validPng = `data:image/png;base64,${pngBytes.toString('base64')}`;
  truncatedPng = `data:image/png;base64,${pngBytes.subarray(0, Math.floor(pngBytes.length / 2)).toString('base64')}`;
  // 8000 x 6000 = 48 M pixels, over the 40 M decode limit, yet a small file.
  pixelBomb = `data:image/png;base64,${(
    await sharp({ create: { width: 8000, height: 6000, channels: 3, background: { r: 0, g: 0, b: 0 } } })
      .png({ compressionLevel: 9 })
      .toBuffer()
  ).toString('base64')}`;
}

test.after(async () => {
  await gp?.stop();
  rmSync(uploadDir, { recursive: true, force: true });
});

/** Regular files left in the upload directory (tsx keeps its compile cache in a tsx-* folder there). */
function leftoverUploads(): string[] {
  return readdirSync(uploadDir, { withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => d.name);
}

test(`${GENERATED.toLocaleString('en')}+ hostile requests: all 4xx in shape, nothing charged, the process up and its memory flat`, async () => {
  const started = Date.now();
  console.log(`  hostile input: seed ${SEED} (RELIABILITY_SEED=${SEED} to reproduce), ${GENERATED} generated requests, concurrency ${CONCURRENCY}`);
  const reqs = fc.sample(generated(), { seed: SEED, numRuns: GENERATED });
  console.log(`  generated in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const heavy = heavyCases();
  // Heavy cases go in both phases, so the memory comparison sees them after the warm-up too.
  reqs.splice(WARM_UP / 2, 0, ...heavy);
  reqs.push(...heavy);
  const headBefore = await eventHead();
  const accountBefore = await admin('GET', '/accounts/fuzz');

  const problems: string[] = [];
  const onProblem = (o: Outcome, problem: string) => {
    if (problems.length < 20) problems.push(`${problem} <- ${o.req.label}: ${o.req.method} ${o.req.path} ${String(o.req.body ?? '').slice(0, 160)}`);
    else if (problems.length === 20) problems.push('...');
  };
  const warm = await runAll(reqs.slice(0, WARM_UP), onProblem);
  await new Promise((r) => setTimeout(r, 500));
  const rssWarm = rssMb(gp.child.pid!);
  const rest = await runAll(reqs.slice(WARM_UP), onProblem);
  await new Promise((r) => setTimeout(r, 500));
  const rssAfter = rssMb(gp.child.pid!);
  const statuses = new Map(warm);
  for (const [s, n] of rest) statuses.set(s, (statuses.get(s) ?? 0) + n);
  const total = [...statuses.values()].reduce((a, b) => a + b, 0);
  console.log(
    `  sent ${total} requests in ${((Date.now() - started) / 1000).toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`,
  );
  console.log(`  gateway RSS after warm-up (${WARM_UP} requests) ${rssWarm.toFixed(0)} MB, after all ${rssAfter.toFixed(0)} MB`);
  assert.equal(problems, [], `seed ${SEED}: ${problems.length} bad answers`);
  assert.ok(total >= 10_000, `sent ${total}`);

  // Nothing reached the ledger: no hold, no charge, not one event.
  assert.is(await eventHead(), headBefore, 'the event log did not move');
  const accountAfter = await admin('GET', '/accounts/fuzz');
  assert.equal([accountAfter.quota_used, accountAfter.reserved, accountAfter.open_holds], [accountBefore.quota_used, 0, 0]);
  // Nothing failed inside: no 5xx was logged.
  assert.not.match(gp.output(), /"level":50|request failed/, 'no server error in the log');

  // Every uploaded file was removed, whatever the answer was.
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(leftoverUploads(), [], 'temporary upload files left behind');

  // Still up and still working, and memory did not grow with the hostile traffic.
  assert.is((await fetch(`${origin}/healthz`)).status, 200);
  const ok = await fetch(`${gp.baseUrl}/chat/completions`, { method: 'POST', headers: withKey(key), body: json(chatBase()) });
  assert.is(ok.status, 200, await ok.text());
  // Generous: the heap breathes (a sawtooth of ~200 MB was seen over 40,000 requests, back to the
  // warm-up level after each major GC); a leak of 40 KB per request (340 MB over the ~8,500 after
  // the warm-up) would fail it.
  assert.ok(rssAfter < rssWarm + Math.max(256, rssWarm * 0.4), `RSS grew from ${rssWarm.toFixed(0)} MB to ${rssAfter.toFixed(0)} MB`);
});

test('the admin API with its token: hostile values are a 4xx in the error shape, never a 5xx, and append nothing', async () => {
  const plan = { plan_id: 'hostile-plan', name: 'H', quota: 1000, validity_days: 30, requests_per_minute: 60, models: ['*'] };
  const ident = fc.oneof(fc.constant(''), fc.string({ minLength: 201, maxLength: 260 }), fc.constantFrom('../x', 'a b', 'x\u0000y', '-lead', 5, null, true));
  const cases = fc.oneof(
    // Each field of a plan out of the bounds its event can hold (a 500 before the fix for rpm and validity).
    fc
      .oneof(
        fc.record({ field: fc.constant('requests_per_minute'), value: fc.oneof(fc.integer({ min: 1_000_001 }), fc.integer({ max: 0 }), fc.constant(1.5)) }),
        fc.record({ field: fc.constant('validity_days'), value: fc.oneof(fc.integer({ min: 3651 }), fc.integer({ max: 0 })) }),
        fc.record({ field: fc.constant('quota'), value: fc.oneof(fc.integer({ max: -1 }), fc.constant(2 ** 60), fc.constant('5')) }),
        fc.record({
          field: fc.constant('models'),
          value: fc.oneof(
            fc.constant([]),
            fc.constant(['a', 'a']),
            fc.constant(['m'.repeat(101)]),
            fc.constant(Array.from({ length: 501 }, (_, i) => `m${i}`)),
            fc.constant([5]),
          ),
        }),
        fc.record({ field: fc.constant('plan_id'), value: ident }),
        fc.record({ field: fc.constant('name'), value: fc.oneof(fc.constant(''), fc.string({ minLength: 201, maxLength: 220 }), fc.integer()) }),
      )
      .chain(({ field, value }) =>
        fc
          .constantFrom('POST', 'PUT')
          .map((method) => ({ method, path: method === 'POST' ? '/plans' : '/plans/hostile-plan', body: { ...plan, [field]: value } as unknown })),
      ),
    ident.map((id) => ({ method: 'POST', path: '/accounts', body: { account_id: id, name: 'N' } as unknown })),
    fc
      .oneof(fc.integer({ max: 0 }), fc.constant(2 ** 60), fc.constant(1.5), fc.constant('5'))
      .map((amount) => ({ method: 'POST', path: '/accounts/nope/extra-tokens', body: { amount } as unknown })),
    fc
      .oneof(
        fc.record({ alias: fc.oneof(fc.string({ minLength: 101, maxLength: 150 }), fc.constant(''), fc.integer()) }),
        fc.record({ multiplier: fc.oneof(fc.constant(-1), fc.constant(0), fc.constant(0.0001), fc.constant('x'), fc.constant(1e20)) }),
        fc.record({ status: fc.string({ maxLength: 8 }) }),
      )
      .chain((body) =>
        fc.constantFrom('/models/cx/gen-6-luna', `/models/${'q'.repeat(150)}`).map((path) => ({ method: 'PATCH', path, body: body as unknown })),
      ),
    fc.constantFrom('-271821-04-20T00:00:00Z', '+275760-09-13T00:00:00Z', '1969-12-31T23:59:59Z', 'yesterday', '').chain((when) =>
      fc.oneof(
        fc.constant({
          method: 'POST',
          path: '/corrections',
          body: { model: 'cx/gen-6-luna', from: when, to: '2021-01-01T00:00:00Z', multiplier: 1, dry_run: true } as unknown,
        }),
        fc.constant({ method: 'GET', path: `/accounts/fuzz/statement?from=${encodeURIComponent(when)}&to=2021-01-01T00:00:00Z`, body: undefined as unknown }),
      ),
    ),
    fc
      .constantFrom('abc', '-5', '1e400', '99999999999999999999', '1.5')
      .map((after) => ({ method: 'GET', path: `/events?after=${after}`, body: undefined as unknown })),
    fc
      .constantFrom('x%00y', 'x'.repeat(300), '%0A')
      .chain((id) =>
        fc
          .constantFrom(`/accounts/${id}`, `/accounts/${id}/keys`, `/keys/${id}/revoke`)
          .map((path) => ({ method: path.endsWith('revoke') ? 'POST' : 'GET', path, body: (path.endsWith('revoke') ? {} : undefined) as unknown })),
      ),
    fc.constantFrom('{"a":', '[1]', 'null').map((raw) => ({ method: 'POST', path: '/plans', body: raw as unknown })),
  );
  const reqs = fc.sample(cases, { seed: SEED, numRuns: 400 });
  const head = await eventHead();
  const problems: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < reqs.length) {
        const { method, path, body } = reqs[next++];
        const r = await fetch(`${origin}/admin/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        });
        const text = await r.text();
        let shaped = false;
        try {
          const e = JSON.parse(text).error;
          shaped = typeof e.message === 'string' && typeof e.type === 'string';
        } catch {
          /* not JSON */
        }
        if (r.status < 400 || r.status > 499 || !shaped)
          problems.push(`${r.status} ${method} ${path.slice(0, 80)} ${JSON.stringify(body ?? '').slice(0, 120)}: ${text.slice(0, 120)}`);
      }
    }),
  );
  console.log(`  admin API: ${reqs.length} hostile requests with the admin token, seed ${SEED}`);
  assert.equal(problems.slice(0, 10), []);
  assert.is(await eventHead(), head, 'nothing appended');
});

test.run();
