// Security, issue #39 item 2: no answer that holds a secret or money may be stored by a cache. Route
// by route, from the routers' own lists (every @koa/router mounted on the running gateway's app, so
// a route added later is tested without anyone listing it here), over real HTTP:
// - every /app/api route, as a signed-in owner with the CSRF token, with real inputs where the
//   answer holds a secret or money (a new key's and a management key's secret, the balance, a
//   receipt as HTML, the statement and usage as CSV, a redemption): Cache-Control: no-store, and
//   those answers are 2xx (so the no-store is on the real answer, not on an error);
// - every /v1 route with the account's key (and a streamed chat), every /admin/v1 read with the admin
//   token and every /admin/v1 write without one: no-store too; paths in other letter cases as well.
// The pages under /app are the same static files for everyone (no secret, no money: no-cache);
// every download (receipts, statements, usage) is an /app/api or /v1 answer, covered here.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type Router from '@koa/router';
import { customerSettingsFromEnv } from '../src/config.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { call, openAccount, type Reply, type TestAccount } from './support/http.ts';
import { signInByLink, type Person } from './support/sessions.ts';

const ADMIN = 'cache-control-test-admin-token-0123456789abcdef';
let gw: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let acct: TestAccount;
let owner: Person;
let code = '';

test.before(async () => {
  smtp = await startSmtpServer();
  gw = await startTestGateway({ adminToken: ADMIN, customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url } });
  acct = await openAccount(gw, { quota: 100_000 });
  const admin = (path: string, body: unknown, method = 'POST') => call(gw, `/admin/v1${path}`, { key: ADMIN, body, method });
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  assert.is((await admin(`/accounts/${acct.accountId}/members`, { email: 'owner@cache.test', role: 'owner' })).status, 201);
  const batch = await admin('/code-batches', { count: 1, pack_id: 'p300', amount: 300 });
  assert.is(batch.status, 201, batch.text);
  code = batch.json.codes[0];
  owner = await signInByLink(gw, smtp, 'owner@cache.test');
  // Some usage, so the usage and the statement have rows.
  const used = await call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 },
  });
  assert.is(used.status, 200, used.text);
});
test.after(async () => {
  await gw?.stop();
  await smtp?.close();
});

interface Route {
  method: string;
  path: string;
}

/** Every route of every router mounted on the gateway's app (router.routes() carries its router). */
function mountedRoutes(): Route[] {
  const routes: Route[] = [];
  for (const mw of gw.app.middleware as Array<{ router?: Router }>) {
    for (const layer of mw.router?.stack ?? []) {
      for (const method of layer.methods) if (method !== 'HEAD') routes.push({ method, path: String(layer.path) });
    }
  }
  return routes;
}

/** Fills a route's parameters; unknown ones get an id of the right shape that names nothing. */
const fill = (path: string, values: Record<string, string>) => path.replace(/[:*](\w+)/g, (_, name: string) => values[name] ?? 'x_none');

const noStore = (r: Reply, what: string) =>
  assert.match(r.headers.get('cache-control') ?? '', /(^|,\s*)no-store(,|$)/, `${what}: ${r.status} ${r.text.slice(0, 200)}`);

test('every /app/api route answers Cache-Control: no-store, the answers holding secrets and money included', async () => {
  const routes = mountedRoutes().filter((r) => r.path.startsWith('/app/api/'));
  assert.ok(routes.length >= 30, `the session API's routes: ${routes.length}`);
  const payment = await call(gw, `/app/api/accounts/${acct.accountId}/redemptions`, {
    body: { code },
    headers: { cookie: `tollgate_session=${owner.cookie}`, 'x-csrf-token': owner.csrf },
  });
  assert.is(payment.status, 201, payment.text);
  const a = `/app/api/accounts/:account`;
  // Real inputs for the answers that hold a secret or money, and the status they must have.
  const real: Record<string, { query?: string; body?: unknown; status: number }> = {
    [`POST /app/api/sign-in/email`]: { body: { email: 'someone@cache.test' }, status: 202 },
    [`GET /app/api/session`]: { status: 200 },
    [`POST ${a}/keys`]: { body: { name: 'cache test' }, status: 201 },
    [`POST ${a}/management-keys`]: { body: { name: 'cache test' }, status: 201 },
    [`GET ${a}/subscription`]: { status: 200 },
    [`GET ${a}/prices`]: { status: 200 },
    [`GET ${a}/payments`]: { status: 200 },
    [`GET ${a}/payments/:id`]: { query: '?format=html', status: 200 },
    [`GET ${a}/statement`]: { query: '?format=csv', status: 200 },
    [`GET ${a}/usage`]: { query: '?format=csv', status: 200 },
    [`GET ${a}/billing/usage`]: { query: '?format=csv', status: 200 },
    [`GET ${a}/keys`]: { status: 200 },
    [`GET ${a}/members`]: { status: 200 },
  };
  const values = { account: acct.accountId, key: 'key_000000000000000000000000', member: 'mem_0000000000000000' };
  // Signing out ends the session the other calls use: last.
  const ordered = [...routes.filter((r) => r.path !== '/app/api/sign-out'), ...routes.filter((r) => r.path === '/app/api/sign-out')];
  const seen = new Set<string>();
  for (const route of ordered) {
    const name = `${route.method} ${route.path}`;
    const input = real[name];
    const path = fill(route.path, { ...values, id: route.path.endsWith('/payments/:id') ? payment.json.payment.id : 'ses_000000000000000000000000' });
    const r = await call(gw, path + (input?.query ?? ''), {
      method: route.method,
      body: input?.body ?? (route.method === 'GET' || route.method === 'DELETE' ? undefined : {}),
      headers: { cookie: `tollgate_session=${owner.cookie}`, 'x-csrf-token': owner.csrf },
    });
    noStore(r, name);
    if (input) {
      assert.is(r.status, input.status, `${name}: ${r.text.slice(0, 300)}`);
      seen.add(name);
    }
  }
  assert.equal([...seen].sort(), Object.keys(real).sort(), 'every answer with a secret or money was reached as a route of the router');
});

test('every /v1 route (and a streamed chat) and every /admin/v1 route answers no-store too, in any letter case', async () => {
  const routes = mountedRoutes();
  const v1 = routes.filter((r) => r.path.startsWith('/v1/'));
  const admin = routes.filter((r) => r.path.startsWith('/admin/v1/'));
  assert.ok(v1.length >= 15 && admin.length >= 40, `${v1.length} /v1 routes, ${admin.length} /admin/v1 routes`);
  for (const route of v1) {
    const r = await call(gw, fill(route.path, { id: 'pay_000000000000000000000000', key: 'key_000000000000000000000000' }), {
      method: route.method,
      key: acct.key,
      body: route.method === 'GET' || route.method === 'DELETE' ? undefined : {},
    });
    noStore(r, `${route.method} ${route.path}`);
  }
  const streamed = await call(gw, '/v1/chat/completions', {
    key: acct.key,
    body: { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream: true },
  });
  assert.is(streamed.status, 200, streamed.text);
  noStore(streamed, 'a streamed chat');
  // Reads with the token; writes without it (their answers with it are data like any other, see reliability-secrets).
  for (const route of admin) {
    const read = route.method === 'GET';
    const r = await call(gw, fill(route.path, { id: acct.accountId }), { method: route.method, key: read ? ADMIN : undefined, body: read ? undefined : {} });
    noStore(r, `${route.method} ${route.path}`);
    if (read) assert.is.not(r.status, 500, `${route.path}: ${r.text.slice(0, 200)}`);
  }
  for (const [path, key] of [
    ['/V1/models', acct.key],
    ['/v1/Subscription', acct.key],
    ['/ADMIN/v1/accounts', ADMIN],
    ['/App/Api/session', undefined],
  ] as const) {
    noStore(await call(gw, path, { key }), path);
  }
});

test.run();
