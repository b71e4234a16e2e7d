// Security, issue #39 item 5: a state-changing /app/api call is checked against the public origin as
// well as by its CSRF token. Over real HTTP, with a member signed in by a link mailed through a real
// SMTP server: a cross-site `Origin` (another site, `null`, the request's own host when the public
// origin is another) or `Sec-Fetch-Site: cross-site` / `same-site` / `none` is a 403
// cross_site_request with nothing written, even holding the session cookie and a valid CSRF token,
// and so is asking for a sign-in link from another site; the public origin, and a client that sends
// neither header (no browser), go through; reads are not affected.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { customerSettingsFromEnv } from '../src/config.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { call, openAccount, type Reply, type TestAccount } from './support/http.ts';
import { signInByLink, type Person } from './support/sessions.ts';

const ADMIN = 'cross-site-test-admin-token-0123456789abcdef';
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;

test.before(async () => {
  smtp = await startSmtpServer();
});
test.after(async () => {
  await smtp?.close();
});

/** A gateway with one account whose owner is signed in. */
async function gatewayWithOwner(publicUrl?: string): Promise<{ gw: TestGateway; acct: TestAccount; owner: Person }> {
  const gw = await startTestGateway({ adminToken: ADMIN, customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url, publicUrl } });
  const acct = await openAccount(gw, { quota: 1000 });
  const email = `owner-${publicUrl ? 'configured' : 'derived'}@cross.test`;
  assert.is((await call(gw, `/admin/v1/accounts/${acct.accountId}/members`, { key: ADMIN, body: { email, role: 'owner' } })).status, 201);
  return { gw, acct, owner: await signInByLink(gw, smtp, email) };
}

/** Creates a key as the owner, with the session cookie, the CSRF token and these headers. */
const createKey = (gw: TestGateway, acct: TestAccount, owner: Person, headers: Record<string, string>) =>
  call(gw, `/app/api/accounts/${acct.accountId}/keys`, {
    body: { name: 'from a page' },
    headers: { cookie: `tollgate_session=${owner.cookie}`, 'x-csrf-token': owner.csrf, ...headers },
  });

/** How many events the log holds: a refused call writes none. */
const logLength = async (gw: TestGateway) => (await gw.ledger.events.readAll(0, 100_000)).length;

function refused(r: Reply, what: string) {
  assert.is(r.status, 403, `${what}: ${r.text}`);
  assert.is(r.json.error.code, 'cross_site_request', what);
  assert.is(r.json.error.type, 'permission_error');
}

test('with a valid session and CSRF token: another site is refused, the public origin and non-browser clients go through', async () => {
  const { gw, acct, owner } = await gatewayWithOwner();
  try {
    const origin = gw.publicOrigin!;
    assert.is(origin, gw.url);
    const before = await logLength(gw);
    const crossSite: Array<[string, Record<string, string>]> = [
      ['another site', { origin: 'https://evil.example' }],
      ['another site, its browser says so', { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }],
      ['only Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
      ['a sibling site', { origin: 'http://sub.127.0.0.1.example', 'sec-fetch-site': 'same-site' }],
      ['no initiating page', { 'sec-fetch-site': 'none' }],
      ['Origin: null (a sandboxed frame)', { origin: 'null' }],
      ['the same host on another port', { origin: `http://127.0.0.1:${Number(new URL(origin).port) + 1}` }],
    ];
    for (const [what, headers] of crossSite) refused(await createKey(gw, acct, owner, headers), what);
    assert.is(await logLength(gw), before, 'nothing was written');

    // Reads are not refused: another site cannot read the answer anyway (no CORS for /app/api).
    const read = await call(gw, `/app/api/accounts/${acct.accountId}/keys`, {
      headers: { cookie: `tollgate_session=${owner.cookie}`, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    assert.is(read.status, 200, read.text);
    // Another site cannot ask for sign-in links either (nor sign anyone in with its own).
    refused(
      await call(gw, '/app/api/sign-in/email', { body: { email: owner.email }, headers: { origin: 'https://evil.example' } }),
      'a link asked from another site',
    );
    refused(await call(gw, '/app/api/sign-in/email/verify', { body: {}, headers: { 'sec-fetch-site': 'cross-site' } }), 'a link used from another site');

    const fromPage = await createKey(gw, acct, owner, { origin, 'sec-fetch-site': 'same-origin' });
    assert.is(fromPage.status, 201, fromPage.text);
    // The same port under another loopback name is this gateway (a developer may type localhost).
    const port = new URL(origin).port;
    const localhost = await createKey(gw, acct, owner, { origin: `http://localhost:${port}`, 'sec-fetch-site': 'same-origin' });
    assert.is(localhost.status, 201, localhost.text);
    const noBrowser = await createKey(gw, acct, owner, {});
    assert.is(noBrowser.status, 201, noBrowser.text);
    // The CSRF token is still required: the Origin check is a second line, not a replacement.
    const noToken = await call(gw, `/app/api/accounts/${acct.accountId}/keys`, {
      body: { name: 'x' },
      headers: { cookie: `tollgate_session=${owner.cookie}`, origin, 'sec-fetch-site': 'same-origin' },
    });
    assert.is(noToken.status, 403);
    assert.is(noToken.json.error.code, 'csrf_failed');
  } finally {
    await gw.stop();
  }
});

test('with TOLLGATE_PUBLIC_URL set, only that origin may change anything (the address the request reached is not enough)', async () => {
  const { gw, acct, owner } = await gatewayWithOwner('https://tollgate.example.test');
  try {
    refused(await createKey(gw, acct, owner, { origin: gw.url, 'sec-fetch-site': 'same-origin' }), 'the listening address, not the public origin');
    const ok = await createKey(gw, acct, owner, { origin: 'https://tollgate.example.test', 'sec-fetch-site': 'same-origin' });
    assert.is(ok.status, 201, ok.text);
  } finally {
    await gw.stop();
  }
});

test.run();
