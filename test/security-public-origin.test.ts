// Security, issue #39 item 1: every link Tollgate sends or redirects to is built from the public
// origin (TOLLGATE_PUBLIC_URL, else the base URL `npm start` prints), never from the request's Host
// or X-Forwarded-Host, which whoever sends the request chooses. Over real HTTP, with sign-in links
// mailed through a real SMTP server on loopback:
// - a configured origin behind a trusted proxy: `Host: evil.example` and `X-Forwarded-Host:
//   evil.example` still get a link to the configured origin (that signs in), the OpenID Connect
//   redirect and Checkout's way back name it too, and the page after sign-in is on it;
// - `npm start` without TOLLGATE_PUBLIC_URL: the link names the base URL it printed;
// - a gateway with no public origin (HOST=0.0.0.0, nothing set) says so at start and answers a link
//   request 503 public_url_unset, mailing nothing.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request } from 'node:http';
import { customerSettingsFromEnv } from '../src/config.ts';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { startOidcProvider, startSmtpServer } from './support/customer-servers.ts';
import { call, openAccount } from './support/http.ts';
import { signInByLink, asPerson } from './support/sessions.ts';
import { startStripeDouble, startStripeGateways } from './support/stripe-double.ts';

const ADMIN = 'public-origin-test-admin-token-0123456789abcdef';
const PUBLIC = 'https://tollgate.example.test';
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;

test.before(async () => {
  smtp = await startSmtpServer();
});
test.after(async () => {
  await smtp?.close();
});

interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

/** A request with headers fetch will not send as given (Host), over node:http. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<RawReply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, base),
      { method, headers: { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: unknown = null;
          try {
            json = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The sign-in link of the next mail to `email` after `before` mails. */
async function mailedLink(email: string, before: number): Promise<URL> {
  const mail = await smtp.mailTo(email, before);
  const link = /https?:\/\/\S+\/app\/sign-in#\S+/.exec(mail.text)?.[0];
  assert.ok(link, `a sign-in link in: ${mail.text}`);
  assert.not.match(mail.text, /evil/, 'nothing of the forged host in the mail');
  return new URL(link!);
}

/** Asks for a link with these headers; the link the mail carries. */
async function linkAskedWith(base: string, email: string, headers: Record<string, string>): Promise<URL> {
  const before = smtp.mails.length;
  const asked = await raw(base, 'POST', '/app/api/sign-in/email', headers, { email });
  assert.is(asked.status, 202, JSON.stringify(asked.json));
  return mailedLink(email, before);
}

test('a forged Host or X-Forwarded-Host never reaches the link: it names TOLLGATE_PUBLIC_URL, and so do the OIDC redirect and Checkout', async () => {
  const stripe = await startStripeDouble();
  const idp = await startOidcProvider();
  idp.register(`${PUBLIC}/app/api/sign-in/oidc/callback`);
  const { gw, stopAll } = await startStripeGateways(stripe, ADMIN, {
    trustProxy: true,
    customers: {
      ...customerSettingsFromEnv({}),
      smtpUrl: smtp.url,
      publicUrl: PUBLIC,
      oidc: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, name: 'Test IdP' },
    },
  });
  try {
    assert.is(gw.publicOrigin, PUBLIC);
    const acct = await openAccount(gw, { quota: 1000 });
    const admin = (path: string, body: unknown, method = 'POST') => call(gw, `/admin/v1${path}`, { key: ADMIN, body, method });
    assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
    const victim = 'victim@acme.test';
    assert.is((await admin(`/accounts/${acct.accountId}/members`, { email: victim, role: 'owner' })).status, 201);

    const forged: Array<[string, Record<string, string>]> = [
      ['Host', { host: 'evil.example' }],
      ['X-Forwarded-Host (proxy trusted)', { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' }],
      ['both', { host: 'evil.example:8443', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http' }],
    ];
    let link: URL | null = null;
    for (const [what, headers] of forged) {
      link = await linkAskedWith(gw.url, victim, headers);
      assert.is(link.origin, PUBLIC, `${what}: the link's origin`);
      assert.is(link.pathname, '/app/sign-in', what);
    }
    // The link works where it points: its token signs in on this gateway.
    const fragment = new URLSearchParams(link!.hash.slice(1));
    const verified = await call(gw, '/app/api/sign-in/email/verify', { body: { email: fragment.get('email'), token: fragment.get('token') } });
    assert.is(verified.status, 200, verified.text);
    assert.match(verified.headers.get('set-cookie') ?? '', /secure/i, 'an https public origin makes the cookie Secure');

    // OpenID Connect: the provider is asked to send the person back to the public origin.
    const oidcStart = await raw(gw.url, 'GET', '/app/api/sign-in/oidc', { host: 'evil.example', 'x-forwarded-host': 'evil.example' });
    assert.is(oidcStart.status, 302, JSON.stringify(oidcStart.json));
    const toProvider = new URL(String(oidcStart.headers.location));
    assert.is(toProvider.origin, idp.issuer);
    assert.is(toProvider.searchParams.get('redirect_uri'), `${PUBLIC}/app/api/sign-in/oidc/callback`);

    // Checkout from /app: Stripe sends the member back to the billing page at the public origin.
    const owner = await signInByLink(gw, smtp, victim);
    const checkout = await call(gw, `/app/api/accounts/${acct.accountId}/checkout`, {
      body: { pack_id: 'p300' },
      headers: { cookie: `tollgate_session=${owner.cookie}`, 'x-csrf-token': owner.csrf, 'x-forwarded-host': 'evil.example' },
    });
    assert.is(checkout.status, 201, checkout.text);
    const onStripe = stripe.sessions.get(checkout.json.id)!;
    assert.is(onStripe.successUrl, `${PUBLIC}/app/billing?checkout=paid`);
    assert.is(onStripe.cancelUrl, `${PUBLIC}/app/billing?checkout=cancelled`);
    // The API base named in answers is the public one too.
    assert.is((await raw(gw.url, 'GET', '/', { host: 'evil.example', accept: 'application/json' })).json.base_url, `${PUBLIC}/v1`);
    assert.is((await asPerson(gw, owner, '/sign-out', {})).status, 200);
  } finally {
    await stopAll();
    await stripe.close();
    await idp.close();
  }
});

test('npm start without TOLLGATE_PUBLIC_URL: the link names the base URL it printed, whatever the Host', async () => {
  let gp: GatewayProcess | null = null;
  try {
    gp = await spawnGateway({ TOLLGATE_SMTP_URL: smtp.url, TOLLGATE_SIGNUP: 'open', TOLLGATE_BOOTSTRAP: 'off' });
    const site = new URL(gp.baseUrl).origin;
    assert.match(gp.output(), `public origin (of sign-in links and redirects; TOLLGATE_PUBLIC_URL): ${site}`);
    const link = await linkAskedWith(site, 'newcomer@example.test', { host: 'evil.example', 'x-forwarded-host': 'evil.example' });
    assert.is(link.origin, site);
    const fragment = new URLSearchParams(link.hash.slice(1));
    const verified = await call({ url: site }, '/app/api/sign-in/email/verify', { body: { email: fragment.get('email'), token: fragment.get('token') } });
    assert.is(verified.status, 200, verified.text);
  } finally {
    await gp?.stop();
  }
});

test('no public origin (HOST=0.0.0.0, nothing set): a warning at start, and a link request is 503 public_url_unset with nothing mailed', async () => {
  let gp: GatewayProcess | null = null;
  try {
    gp = await spawnGateway({ HOST: '0.0.0.0', TOLLGATE_SMTP_URL: smtp.url, TOLLGATE_SIGNUP: 'open', TOLLGATE_BOOTSTRAP: 'off' });
    assert.match(gp.output(), 'no public origin: sign-in links are refused until TOLLGATE_PUBLIC_URL is set');
    // The log says why (its lines may come a moment after the banner).
    for (let i = 0; i < 100 && !gp.output().includes('no public origin: set TOLLGATE_PUBLIC_URL'); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(gp.output(), 'no public origin: set TOLLGATE_PUBLIC_URL', gp.output());
    const base = `http://127.0.0.1:${new URL(gp.baseUrl).port}`;
    const before = smtp.mails.length;
    for (const headers of [{}, { host: 'tollgate.example.test' }] as Array<Record<string, string>>) {
      const r = await raw(base, 'POST', '/app/api/sign-in/email', headers, { email: 'someone@example.test' });
      assert.is(r.status, 503, JSON.stringify(r.json));
      assert.is(r.json.error.code, 'public_url_unset');
      assert.match(r.json.error.message, 'TOLLGATE_PUBLIC_URL');
    }
    await new Promise((r) => setTimeout(r, 500));
    assert.is(smtp.mails.length, before, 'no mail was sent');
  } finally {
    await gp?.stop();
  }
});

test.run();
