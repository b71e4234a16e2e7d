// Secrets and the edges of the HTTP surface, against a real gateway process:
// - no API key is stored or logged in clear: after issuing keys (the demo key and account keys
//   via the admin API) and calling every endpoint with them, no row of any table in the ledger's
//   schemas (events with their data and metadata, read models, idempotency records) and no log
//   line holds a full key or its secret part; nor is any prompt logged, nor the admin token.
// - key checks do not leak timing: secrets are looked up by SHA-256 hash only, and the admin
//   token is compared with crypto.timingSafeEqual over fixed-length digests.
// - the admin API refuses everything without its token: every /admin/v1 route, enumerated from the
//   router itself, answers 401 in the error shape to no token, a wrong token and a customer key,
//   and nothing is appended.
// - CORS and security headers: /v1 answers browsers of any origin (keys travel in a header, never
//   a cookie; no credentials are allowed), /app and /admin grant no other origin; the pages carry a
//   strict CSP, nosniff, a referrer policy and frame-ancestors 'none'; API answers are not cached.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { spawnGateway, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { writeModelsConfig } from './support/http.ts';
import { openPglite, openPostgres, type Database } from '../src/eventstore/db.ts';
import { createKeyDirectory } from '../src/keys/key-directory.ts';
import { adminTokenMatches } from '../src/http/admin-token.ts';
import { adminRouter } from '../src/wiring/admin-router.ts';
import { hashKey } from '../src/keys/secrets.ts';
import type { GatewayDeps } from '../src/wiring/deps.ts';
import type { EventStore } from '../src/eventstore/port.ts';

const url = process.env.DATABASE_URL;
const ADMIN = `tg_admin_${randomBytes(24).toString('base64url')}`;
const schema = uniqueSchema('sec');
const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-secrets-'));
const CANARY = `canary${randomBytes(6).toString('hex')}`;
const FAILING_MODEL = 'test/down-upstream';

let gp: GatewayProcess;
let origin = '';
let stopped = false;
const keys: { label: string; key: string }[] = [];
const prompts: string[] = [];

async function admin(method: string, path: string, body?: unknown, token = ADMIN): Promise<any> {
  const r = await fetch(`${origin}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${text}`);
  return r.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text;
}

async function eventHead(): Promise<number> {
  const lines = ((await admin('GET', '/events')) as string).trim().split('\n');
  return JSON.parse(lines[lines.length - 1]).position;
}

const prompt = (where: string) => {
  const p = `${CANARY} ${where} secret plans for the lighthouse`;
  prompts.push(p);
  return p;
};

const v1 = (path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${origin}/v1${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, headers: r.headers, text: await r.text() }));

// The upstream of FAILING_MODEL refuses connections: a 502 path whose logging is checked too.
const modelsConfig = (() => {
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.down = { type: 'openai-compatible', baseURL: 'http://127.0.0.1:9/v1', timeoutMs: 2000 };
  config.models[FAILING_MODEL] = { provider: 'down', upstreamModel: 'nothing' };
  return writeModelsConfig(config);
})();

test.before(async () => {
  gp = await spawnGateway({
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    // Every admin route is tried with several wrong tokens below: more than the default limit a minute.
    TOLLGATE_ADMIN_AUTH_FAILURES_PER_MINUTE: '10000',
    TOLLGATE_SCHEMA: schema,
    TOLLGATE_DATA_DIR: dataDir,
    TOLLGATE_MODELS_CONFIG: modelsConfig,
    LOG_LEVEL: 'trace',
  });
  origin = gp.baseUrl.replace(/\/v1$/, '');
  keys.push({ label: 'demo key', key: gp.key });
  await admin('PATCH', `/models/${FAILING_MODEL}`, { multiplier: 1, status: 'ACTIVE' });
  await admin('POST', '/plans', { plan_id: 'sec', name: 'Sec', quota: 100_000_000, validity_days: 30, requests_per_minute: 100_000, models: ['*'] });
  for (const id of ['sec-a', 'sec-b']) {
    await admin('POST', '/accounts', { account_id: id, name: id });
    await admin('POST', `/accounts/${id}/subscription`, { plan_id: 'sec' });
    for (const n of [1, 2]) keys.push({ label: `${id} key ${n}`, key: (await admin('POST', `/accounts/${id}/keys`, { name: `k${n}` })).key });
  }
});

test.after(async () => {
  if (!stopped) await gp?.stop();
  if (url) await dropSchemas(url, schema);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(dirname(modelsConfig), { recursive: true, force: true });
});

test('keys are never stored nor logged in clear, prompts and the admin token never logged', async () => {
  // Use every key on every endpoint, with successes, refusals and an upstream failure.
  for (const { key } of keys) {
    const calls = [
      v1(
        '/chat/completions',
        key,
        { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: prompt('chat') }] },
        { 'idempotency-key': `idem-${randomBytes(4).toString('hex')}` },
      ),
      v1('/chat/completions', key, {
        model: 'cx/gen-6-luna',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: prompt('stream') }],
      }),
      v1('/chat/completions', key, { model: 'cx/gen-6-luna', n: 3, messages: [{ role: 'user', content: prompt('refused') }] }),
      v1('/chat/completions', key, { model: FAILING_MODEL, messages: [{ role: 'user', content: prompt('upstream down') }] }),
      v1('/messages', key, { model: 'alpha-sonnet-5', max_tokens: 32, system: prompt('system'), messages: [{ role: 'user', content: prompt('messages') }] }),
      v1('/messages/count_tokens', key, { model: 'alpha-sonnet-5', messages: [{ role: 'user', content: prompt('count') }] }),
      v1('/responses', key, { model: 'cx/gen-6-sol', instructions: prompt('instructions'), input: prompt('responses') }),
      v1('/images/generations', key, { model: 'alpha-haiku-4.5', prompt: prompt('image') }),
      v1('/images/generations', key, { model: 'alpha-haiku-4.5', prompt: prompt('bad size'), size: '1x1' }),
      v1('/models', key),
      v1('/subscription', key),
      v1('/usage?daily=true&range=7d', key),
    ];
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    assert.equal(statuses, [200, 200, 400, 502, 200, 200, 200, 200, 400, 200, 200, 200]);
  }
  // Keys that fail: unknown, revoked, mangled; and a wrong admin token.
  const unknown = `sk_svc_${randomBytes(32).toString('base64url').replace(/[-_]/g, 'y')}`;
  keys.push({ label: 'unknown key', key: unknown });
  assert.is((await v1('/chat/completions', unknown, { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: prompt('unknown key') }] })).status, 401);
  const revoked = await admin('POST', '/accounts/sec-a/keys', { name: 'to revoke' });
  keys.push({ label: 'revoked key', key: revoked.key });
  await admin('POST', `/keys/${revoked.key_id}/revoke`, { reason: 'test' });
  assert.is((await v1('/models', revoked.key)).status, 401);
  assert.is((await v1('/models', `${keys[1].key}zz`)).status, 401);
  assert.is((await fetch(`${origin}/admin/v1/plans`, { headers: { authorization: `Bearer ${ADMIN}x` } })).status, 401);
  assert.is(
    (await admin('GET', '/accounts/sec-a/keys')).data.every((k: { masked: string }) => /^sk_svc_…[A-Za-z0-9]{4}$/.test(k.masked)),
    true,
  );

  const needles = keys.flatMap(({ label, key }) => [
    { label: `${label} (full)`, text: key },
    { label: `${label} (secret part)`, text: key.slice('sk_svc_'.length) },
    { label: `${label} (secret without its last 4)`, text: key.slice('sk_svc_'.length, -4) },
  ]);

  // The logs: every JSON line the process wrote, at trace level.
  const output = gp.output();
  const logLines = output.split('\n').filter((l) => l.startsWith('{'));
  assert.ok(logLines.length >= 5 * 12, `${logLines.length} log lines`);
  for (const n of needles)
    assert.not.ok(
      logLines.some((l) => l.includes(n.text)),
      `${n.label} is in the log`,
    );
  assert.not.ok(output.includes(CANARY), 'a prompt is in the output');
  assert.not.ok(output.includes(ADMIN), 'the admin token is in the output');
  // The demo key is printed once, on purpose, in the start-up banner, and the account keys never.
  const banner = output
    .split('\n')
    .filter((l) => !l.startsWith('{'))
    .join('\n');
  for (const { label, key } of keys.slice(1)) assert.not.ok(banner.includes(key), `${label} printed`);

  // The database: every row of every table in the ledger's schemas, as text.
  await new Promise((r) => setTimeout(r, 500));
  let db: Database;
  if (url) db = openPostgres(url, 2);
  else {
    await gp.stop();
    stopped = true;
    db = await openPglite(join(dataDir, 'pglite'));
  }
  try {
    const tables = await db.query<{ table_schema: string; table_name: string }>(
      `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN ($1, $2) ORDER BY 1, 2`,
      [schema, `${schema}_rm`],
    );
    const names = tables.map((t) => `${t.table_schema}.${t.table_name}`);
    assert.ok(names.includes(`${schema}.events`) && names.includes(`${schema}.idempotency`) && names.includes(`${schema}_rm.keys`), names.join(', '));
    let rows = 0;
    let hashes = 0;
    for (const t of tables) {
      const dump = await db.query<{ row: string }>(`SELECT t::text AS row FROM "${t.table_schema}"."${t.table_name}" t`);
      rows += dump.length;
      for (const { row } of dump) {
        for (const n of needles) assert.not.ok(row.includes(n.text), `${n.label} stored in ${t.table_schema}.${t.table_name}`);
        if (keys.some(({ key }) => row.includes(hashKey(key)))) hashes++;
      }
    }
    console.log(`  searched ${rows} rows in ${tables.length} tables and ${logLines.length} log lines for ${keys.length} keys: no key in clear`);
    assert.ok(hashes > 0, 'keys are stored, as SHA-256 hashes');
  } finally {
    await db.close();
  }
  // Embedded: the database files themselves (heap, WAL) hold no key either.
  if (!url) {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const f of readdirSync(dir)) {
        const p = join(dir, f);
        if (statSync(p).isDirectory()) walk(p);
        else files.push(p);
      }
    };
    walk(dataDir);
    for (const f of files) {
      const bytes = readFileSync(f);
      for (const n of needles.filter((x) => x.label.endsWith('(full)'))) assert.is(bytes.indexOf(n.text), -1, `${n.label} in ${f}`);
    }
  }
});

test('key lookups use the SHA-256 hash only; the admin token compare is constant-time', async () => {
  // The key directory never hands a secret to the database: only its hash.
  const params: unknown[] = [];
  const fakeDb = {
    query: async (_sql: string, p: unknown[] = []) => {
      params.push(...p);
      return [];
    },
    exec: async () => undefined,
  } as unknown as Database;
  const fakeStore = {
    headPosition: async () => 0,
    readableHead: async () => 0,
    subscribe: () => ({ caughtUp: async () => undefined, expect: () => undefined, close: async () => undefined }),
  } as unknown as EventStore;
  const directory = await createKeyDirectory({ db: fakeDb, store: fakeStore, rmSchema: 'rm', waitForProjections: async () => undefined });
  const secret = `sk_svc_${'Q'.repeat(43)}`;
  assert.is(await directory.lookup(secret), null);
  await directory.close();
  assert.ok(params.length > 0);
  for (const p of params) assert.is(p, createHash('sha256').update(secret).digest('hex'), 'only the hash reaches a query');

  // The admin token: right answers for equal, different, longer, shorter and empty tokens.
  const token = 'tg_admin_abcdefghijklmnopqrstuvwxyz0123456789';
  assert.ok(adminTokenMatches(token, token));
  for (const wrong of ['', 'x', token.slice(0, -1), `${token}x`, token.replace(/a/g, 'b'), token.toUpperCase()])
    assert.not.ok(adminTokenMatches(wrong, token), wrong);
  assert.not.ok(adminTokenMatches('', ''), 'an empty expected token never matches');

  // Structure: each secret comparison in the code goes through timingSafeEqual over digests.
  const source = (f: string) => readFileSync(new URL(`../src/${f}`, import.meta.url), 'utf8');
  assert.match(source('http/admin-token.ts'), /timingSafeEqual\(digest\(presented\), digest\(expected\)\)/);
  assert.match(source('wiring/admin-router.ts'), /adminTokenMatches\(/);
  assert.match(source('keys/key-directory.ts'), /const hash = hashKey\(secret\)/);
  assert.match(source('keys/secrets.ts'), /createHash\('sha256'\)/);
  // No ===/!== between a secret-like name and another value (comparisons with null or a literal aside).
  const SECRET_NAME = String.raw`\b(?:secret|token|adminToken|expected|presented|apiKey|password|hash)\w*`;
  const OPERAND = String.raw`(?!null\b|undefined\b|['"\`\d]|0\b)[A-Za-z_$][\w.$]*`;
  const unsafe = new RegExp(`${SECRET_NAME}\\s*[!=]==?\\s*${OPERAND}|${OPERAND}\\s*[!=]==?\\s*${SECRET_NAME}`);
  const files = ['keys/auth-middleware.ts', 'keys/key-directory.ts', 'http/admin-token.ts', 'wiring/admin-router.ts', 'keys/secrets.ts'];
  for (const f of files) {
    source(f)
      .split('\n')
      .forEach((line, i) => assert.not.ok(unsafe.test(line), `${f}:${i + 1} compares a secret directly: ${line.trim()}`));
  }
});

test('the admin API: every route refuses no token, a wrong token and a customer key (401, error shape, nothing appended)', async () => {
  if (stopped) {
    // Embedded: the first test stopped the process to open its database; start it again on the same data.
    gp = await spawnGateway({
      TOLLGATE_ADMIN_TOKEN: ADMIN,
      // Every admin route is tried with several wrong tokens below: more than the default limit a minute.
      TOLLGATE_ADMIN_AUTH_FAILURES_PER_MINUTE: '10000',
      TOLLGATE_SCHEMA: schema,
      TOLLGATE_DATA_DIR: dataDir,
      TOLLGATE_MODELS_CONFIG: modelsConfig,
      TOLLGATE_BOOTSTRAP: 'off',
    });
    origin = gp.baseUrl.replace(/\/v1$/, '');
    stopped = false;
  }
  // The routes, from the router itself: a route added later is covered without editing this test.
  const router = adminRouter({ ledger: {} } as unknown as GatewayDeps, ADMIN);
  const routes = router.stack
    .filter((l) => l.methods.length > 0)
    .flatMap((l) => l.methods.filter((m) => m !== 'HEAD').map((method) => ({ method, path: String(l.path) })));
  assert.ok(routes.length >= 18, `${routes.length} routes`);
  const customer = keys.find((k) => k.label === 'sec-a key 1')!.key;
  const credentials: [string, Record<string, string>][] = [
    ['no token', {}],
    ['wrong token', { authorization: `Bearer tg_admin_${randomBytes(24).toString('base64url')}` }],
    ['admin token with one more character', { authorization: `Bearer ${ADMIN}A` }],
    ['customer key', { authorization: `Bearer ${customer}` }],
    ['admin token as x-api-key', { 'x-api-key': ADMIN }],
    ['admin token in Basic', { authorization: `Basic ${Buffer.from(`admin:${ADMIN}`).toString('base64')}` }],
  ];
  const before = await eventHead();
  let calls = 0;
  for (const { method, path } of routes) {
    const concrete = path
      .replace('/*id', '/cx/gen-6-luna')
      .replace(/:(\w+)/g, (_m: string, p: string) => (p === 'id' && path.includes('/keys/') ? 'key_x' : 'sec-a'));
    const hasBody = method !== 'GET';
    for (const [label, headers] of credentials) {
      const r = await fetch(
        `${origin}${concrete}${method === 'GET' && concrete.endsWith('/statement') ? '?from=2020-01-01T00:00:00Z&to=2030-01-01T00:00:00Z' : ''}`,
        {
          method,
          headers: { ...headers, ...(hasBody ? { 'content-type': 'application/json' } : {}) },
          body: hasBody
            ? JSON.stringify({
                plan_id: 'evil',
                name: 'evil',
                quota: 1,
                validity_days: 1,
                requests_per_minute: 1,
                models: ['*'],
                amount: 1_000_000,
                account_id: 'evil',
                multiplier: 0.001,
                model: 'cx/gen-6-luna',
                from: '2020-01-01T00:00:00Z',
                to: '2030-01-01T00:00:00Z',
              })
            : undefined,
        },
      );
      const text = await r.text();
      calls++;
      assert.is(r.status, 401, `${method} ${concrete} with ${label}: ${r.status} ${text.slice(0, 200)}`);
      const body = JSON.parse(text);
      assert.equal(Object.keys(body), ['error']);
      assert.equal(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.is(body.error.code, 'invalid_admin_token');
      assert.not.ok(text.includes(ADMIN));
    }
  }
  console.log(`  admin API: ${routes.length} routes x ${credentials.length} credentials = ${calls} calls, all 401`);
  assert.is(await eventHead(), before, 'nothing was appended');
  assert.is(
    (await admin('GET', '/plans')).data.some((p: { plan_id: string }) => p.plan_id === 'evil'),
    false,
  );
});

test('CORS: /v1 serves any origin without credentials, preflight included; /app and /admin grant no origin', async () => {
  const key = keys.find((k) => k.label === 'sec-b key 1')!.key;
  const from = { origin: 'https://tool.example' };
  const preflight = await fetch(`${origin}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: {
      ...from,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type, idempotency-key, x-stainless-lang, anthropic-version',
    },
  });
  assert.is(preflight.status, 204);
  assert.is(preflight.headers.get('access-control-allow-origin'), '*');
  assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /POST/);
  for (const h of ['authorization', 'content-type', 'idempotency-key', 'x-stainless-lang', 'anthropic-version'])
    assert.match(preflight.headers.get('access-control-allow-headers') ?? '', new RegExp(h));
  assert.is(preflight.headers.get('access-control-allow-credentials'), null, 'never credentials');
  assert.ok(Number(preflight.headers.get('access-control-max-age')) > 0);
  // A header list that is not a list of header names is not echoed back.
  const odd = await fetch(`${origin}/v1/models`, {
    method: 'OPTIONS',
    headers: { ...from, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-a, <script>' },
  });
  assert.not.match(odd.headers.get('access-control-allow-headers') ?? '', /script/);

  // The real calls: successes and errors alike are readable by the page, with the cost headers.
  const ok = await fetch(`${origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...from, authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await ok.text();
  assert.is(ok.status, 200);
  assert.is(ok.headers.get('access-control-allow-origin'), '*');
  assert.match(ok.headers.get('access-control-expose-headers') ?? '', /x-tollgate-billed-tokens/);
  assert.match(ok.headers.get('access-control-expose-headers') ?? '', /x-tollgate-remaining-tokens/);
  for (const r of [await fetch(`${origin}/v1/models`, { headers: from }), await fetch(`${origin}/v1/nope`, { method: 'POST', headers: from })]) {
    await r.text();
    assert.ok(r.status === 401 || r.status === 404);
    assert.is(r.headers.get('access-control-allow-origin'), '*', 'an error is readable too');
  }

  // Elsewhere: no origin is granted, to preflights or to requests.
  for (const path of ['/admin/v1/plans', '/admin/v1/accounts/sec-a/keys', '/app/chat', '/app/usage', '/metrics', '/healthz', '/']) {
    const pre = await fetch(`${origin}${path}`, {
      method: 'OPTIONS',
      headers: { ...from, 'access-control-request-method': path.startsWith('/admin') ? 'POST' : 'GET', 'access-control-request-headers': 'authorization' },
    });
    await pre.text();
    assert.is(pre.headers.get('access-control-allow-origin'), null, `preflight ${path}`);
    const get = await fetch(`${origin}${path}`, { headers: { ...from, ...(path.startsWith('/admin') ? { authorization: `Bearer ${ADMIN}` } : {}) } });
    await get.text();
    assert.is(get.headers.get('access-control-allow-origin'), null, `GET ${path}`);
    assert.is(get.headers.get('access-control-allow-credentials'), null);
  }
});

test('security headers: strict CSP and friends on /app; nosniff and no caching on the API and admin', async () => {
  for (const path of ['/app/chat', '/app/usage']) {
    const r = await fetch(`${origin}${path}`);
    const html = await r.text();
    assert.is(r.status, 200);
    const csp = r.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/, 'no inline or eval scripts');
    assert.not.match(csp, /unsafe-inline|unsafe-eval|\*/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.match(csp, /object-src 'none'/);
    assert.match(csp, /base-uri 'none'/);
    assert.is(r.headers.get('x-content-type-options'), 'nosniff');
    assert.is(r.headers.get('referrer-policy'), 'no-referrer');
    assert.is(r.headers.get('x-frame-options'), 'DENY');
    // The policy holds for the page as written: no inline script or handler to break.
    assert.not.match(html, /<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+=/i);
  }
  const key = keys.find((k) => k.label === 'sec-b key 2')!.key;
  for (const [path, headers] of [
    ['/v1/subscription', { authorization: `Bearer ${key}` }],
    ['/v1/models', {}],
    ['/admin/v1/accounts/sec-b', { authorization: `Bearer ${ADMIN}` }],
  ] as const) {
    const r = await fetch(`${origin}${path}`, { headers });
    await r.text();
    assert.is(r.headers.get('x-content-type-options'), 'nosniff', path);
    assert.match(r.headers.get('cache-control') ?? '', /no-store/, `${path} must not be cached`);
    assert.match(r.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/, path);
  }
  // The one response that carries a secret: a freshly issued key.
  const issued = await fetch(`${origin}/admin/v1/accounts/sec-b/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: '{"name":"once"}',
  });
  await issued.text();
  assert.is(issued.status, 201);
  assert.match(issued.headers.get('cache-control') ?? '', /no-store/);
});

test.run();
