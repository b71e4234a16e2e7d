// Sign-in through OpenID Connect against a certified provider run by the test (oidc-provider,
// installed on first use): the gateway's openid-client redirects with PKCE, state and nonce, the
// provider's own login and consent forms are submitted over real HTTP, and the callback starts a
// session for the invited address. A callback whose state does not match is refused. Runs on
// PGlite, and on PostgreSQL with DATABASE_URL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount } from './support/http.ts';
import { startOidcProvider } from './support/customer-servers.ts';
import { customerSettingsFromEnv } from '../src/config.ts';

const ADMIN = 'customers-oidc-admin-token-0123456789abcdef';
let gw: TestGateway;
let idp: Awaited<ReturnType<typeof startOidcProvider>>;
let issuer = '';

test.before(async () => {
  idp = await startOidcProvider();
  issuer = idp.issuer;
  gw = await startTestGateway({
    adminToken: ADMIN,
    customers: { ...customerSettingsFromEnv({}), oidc: { issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, name: 'Test IdP' } },
  });
  idp.register(`${gw.url}/app/api/sign-in/oidc/callback`);
});
test.after(async () => {
  await gw?.stop();
  await idp?.close();
});

/** Cookies per server (the gateway's and the provider's share a host, not a port). */
class Jar {
  cookies = new Map<string, string>();
  take(res: Response) {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      this.cookies.set(pair.slice(0, i), pair.slice(i + 1));
    }
  }
  header = () =>
    [...this.cookies]
      .filter(([, v]) => v !== '')
      .map(([k, v]) => `${k}=${v}`)
      .join('; ');
}

/** Follows redirects by hand, each host with its own jar; submits the provider's forms. */
async function browse(url: string, jars: { gw: Jar; idp: Jar }, email: string): Promise<Response> {
  let next: { url: string; method: string; body?: string } = { url, method: 'GET' };
  for (let hop = 0; hop < 20; hop++) {
    const jar = next.url.startsWith(issuer) ? jars.idp : jars.gw;
    const res = await fetch(next.url, {
      method: next.method,
      redirect: 'manual',
      headers: { cookie: jar.header(), ...(next.body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      body: next.body,
    });
    jar.take(res);
    const location = res.headers.get('location');
    if (location) {
      next = { url: new URL(location, next.url).href, method: 'GET' };
      continue;
    }
    if (!next.url.startsWith(issuer)) return res;
    const html = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    assert.ok(action, `a form on the provider's page: ${html.slice(0, 300)}`);
    // The provider's development forms: a login form (any password), then a consent form.
    const body = new URLSearchParams(/name="login"/.test(html) ? { prompt: 'login', login: email, password: 'any' } : { prompt: 'consent' }).toString();
    next = { url: new URL(action, next.url).href, method: 'POST', body };
  }
  throw new Error('too many hops');
}

test('an invited address signs in through the OpenID provider and gets a session', async () => {
  const acct = await openAccount(gw, { quota: 1000 });
  const inv = await call(gw, `/admin/v1/accounts/${acct.accountId}/members`, {
    body: { email: 'oidc-user@acme.test', role: 'admin' },
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.is(inv.status, 201, inv.text);
  const jars = { gw: new Jar(), idp: new Jar() };
  const start = await fetch(`${gw.url}/app/api/sign-in/oidc`, { redirect: 'manual' });
  jars.gw.take(start);
  const auth = new URL(start.headers.get('location')!);
  assert.is(auth.origin, issuer);
  assert.is(auth.searchParams.get('code_challenge_method'), 'S256');
  assert.ok(auth.searchParams.get('state') && auth.searchParams.get('nonce') && auth.searchParams.get('code_challenge'));
  const landed = await browse(auth.href, jars, 'oidc-user@acme.test');
  assert.ok(jars.gw.cookies.get('tollgate_session'), `a session cookie (last answer ${landed.status} ${landed.url})`);
  const session = await call(gw, '/app/api/session', { headers: { cookie: `tollgate_session=${jars.gw.cookies.get('tollgate_session')}` } });
  assert.is(session.status, 200, session.text);
  assert.is(session.json.email, 'oidc-user@acme.test');
  assert.equal(
    session.json.accounts.map((a: { role: string }) => a.role),
    ['admin'],
  );
});

test('a callback whose state was not issued to this browser is refused, no session', async () => {
  const start = await fetch(`${gw.url}/app/api/sign-in/oidc`, { redirect: 'manual' });
  const jar = new Jar();
  jar.take(start);
  const forged = await fetch(`${gw.url}/app/api/sign-in/oidc/callback?code=abc&state=forged&iss=${encodeURIComponent(issuer)}`, {
    redirect: 'manual',
    headers: { cookie: jar.header() },
  });
  assert.is(forged.status, 400, await forged.text());
  assert.not.ok(forged.headers.getSetCookie().some((c) => c.startsWith('tollgate_session=') && !c.startsWith('tollgate_session=;')));
});

test.run();
