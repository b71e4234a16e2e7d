// Security, issue #30 item 3: no key reaches a log line or a customer, wherever it was put.
// - A real `tollgate serve` process: a key (the real demo key, and admin tokens) is sent in every
//   place a caller could put one (URL path, query, each header the gateway reads or echoes, the
//   body's fields), and the process's log is searched for it.
// - An upstream that sends its own key back in every field of its error (message, code, type,
//   param), plain and streamed: the customer's answer holds no trace of it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { startGatewayWithRoutes, openAccount } from './support/http.ts';
import { startUpstreamDouble } from './support/upstream-double.ts';

const ADMIN = `tg_admin_${randomBytes(24).toString('base64url')}`;

test('a key put anywhere in a request never reaches the log', async () => {
  const gp: GatewayProcess = await spawnGateway({ TOLLGATE_ADMIN_TOKEN: ADMIN, LOG_LEVEL: 'info' });
  try {
    const origin = gp.baseUrl.replace(/\/v1$/, '');
    const key = gp.key;
    const secretPart = key.slice('sk_svc_'.length);
    // The demo key is printed once at start (with a curl line using it); only what comes after counts.
    await new Promise((r) => setTimeout(r, 500));
    const from = gp.output().length;
    const places: [string, RequestInit & { path: string }][] = [
      ['the path', { path: `/v1/${key}` }],
      ['the path after a route', { path: `/v1/models/${key}` }],
      ['an admin path', { path: `/admin/v1/accounts/${key}`, headers: { authorization: `Bearer ${ADMIN}` } }],
      ['an admin path without the token', { path: `/admin/v1/keys/${key}/revoke`, method: 'POST' }],
      ['the query', { path: `/v1/models?api_key=${key}`, headers: { authorization: `Bearer ${key}` } }],
      ['x-request-id', { path: '/v1/models', headers: { authorization: `Bearer ${key}`, 'x-request-id': key } }],
      ['x-request-id (admin token)', { path: '/healthz', headers: { 'x-request-id': ADMIN } }],
      ['idempotency-key', { path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${key}`, 'idempotency-key': key } }],
      ['a malformed authorization', { path: '/v1/models', headers: { authorization: `Bearer ${key} extra` } }],
      ['a wrong-case authorization', { path: '/v1/models', headers: { authorization: `bearer ${key}x` } }],
      ['x-api-key', { path: '/v1/models', headers: { 'x-api-key': `${key}x` } }],
      ['user-agent and referer', { path: '/v1/models', headers: { authorization: `Bearer ${key}`, 'user-agent': key, referer: `https://x/${key}` } }],
      ['the admin actor', { path: '/admin/v1/plans', headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': key } }],
      ['the admin token as a customer key', { path: '/v1/models', headers: { authorization: `Bearer ${ADMIN}` } }],
    ];
    const body = (over: Record<string, unknown>) =>
      JSON.stringify({ model: 'cx/gen-6-luna', messages: [{ role: 'user', content: key }], user: key, metadata: { key }, ...over });
    for (const [where, init] of places) {
      const { path, ...rest } = init;
      const sent = rest.method === 'POST' ? { ...rest, headers: { 'content-type': 'application/json', ...rest.headers }, body: body({}) } : rest;
      const res = await fetch(origin + path, sent);
      const text = await res.text();
      assert.ok(res.status > 0, `${where}: ${text}`);
    }
    for (const over of [{ model: key }, { model: 7, stream: key }, { messages: key }]) {
      const res = await fetch(`${origin}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body(over),
      });
      await res.text();
    }
    // A line for every request: the log was written, and none of it names the key.
    await new Promise((r) => setTimeout(r, 300));
    const log = gp.output().slice(from);
    assert.ok(log.split('\n').filter((l) => l.includes('"msg":"request"')).length >= places.length, log.slice(0, 2000));
    assert.not.ok(
      log.includes(secretPart),
      `the key's secret part is in the log:\n${log
        .split('\n')
        .filter((l) => l.includes(secretPart))
        .join('\n')}`,
    );
    const adminSecret = ADMIN.slice('tg_admin_'.length);
    assert.not.ok(
      log.includes(adminSecret),
      `the admin token is in the log:\n${log
        .split('\n')
        .filter((l) => l.includes(adminSecret))
        .join('\n')}`,
    );
  } finally {
    await gp.stop();
  }
});

test("an upstream's key sent back in every field of its error reaches no customer", async () => {
  const UPSTREAM_KEY = `sk-proj-${randomBytes(18).toString('hex')}`;
  const double = await startUpstreamDouble();
  const gw = await startGatewayWithRoutes(
    { echo: { type: 'openai-compatible', baseURL: double.url, apiKeyEnv: 'SEC_ECHO_UPSTREAM_KEY', timeoutMs: 5000 } },
    { 'test/echo': { provider: 'echo', upstreamModel: 'echo-1', multiplierMilli: 1000 } },
    { env: { SEC_ECHO_UPSTREAM_KEY: UPSTREAM_KEY } },
  );
  try {
    const acct = await openAccount(gw, { quota: 1_000_000 });
    assert.is(double.requests.length, 0);
    const fields = [
      { message: UPSTREAM_KEY, code: UPSTREAM_KEY, type: UPSTREAM_KEY, param: UPSTREAM_KEY },
      { message: 'bad', code: UPSTREAM_KEY },
      { message: 'bad', type: UPSTREAM_KEY },
      { message: 'bad', code: `key_${UPSTREAM_KEY}_invalid` },
    ];
    for (const error of fields) {
      for (const status of [400, 401, 404, 422, 429, 500]) {
        for (const stream of [false, true]) {
          double.failNext(status, { error });
          const res = await fetch(`${gw.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'test/echo', messages: [{ role: 'user', content: 'hello there' }], stream }),
          });
          const text = await res.text();
          assert.ok(res.status >= 400 || stream, `${status}: ${res.status} ${text}`);
          assert.not.ok(text.includes(UPSTREAM_KEY), `HTTP ${status} ${JSON.stringify(error)} stream=${stream} reached the customer: ${text}`);
          assert.not.ok(text.includes(UPSTREAM_KEY.slice(8, 30)), `part of the key reached the customer: ${text}`);
        }
      }
    }
    // The upstream really was asked (with its key): the errors above were its answers.
    assert.ok(double.requests.length >= fields.length * 6, `${double.requests.length} upstream calls`);
    assert.is(double.requests[0].headers.authorization, `Bearer ${UPSTREAM_KEY}`);
  } finally {
    await gw.stop();
    await double.close();
  }
});

test.run();
