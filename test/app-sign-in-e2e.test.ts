// The /app sign-in pages in chromium: an invited owner asks for a link on the sign-in page, the
// link arrives through a real SMTP server on loopback, opening it signs them in and lands in the
// signed-in shell (navigation by role, the session read from the session API); the link does not
// work twice; sign-out ends the session on the server. With open sign-up, a new address creates
// its own account on the starter plan. An invited admin signs in through a local OpenID provider
// (oidc-provider's own login and consent pages). Runs on PGlite, and on PostgreSQL with DATABASE_URL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';
import { startOidcProvider, startSmtpServer } from './support/customer-servers.ts';
import { chromiumMissing, openBrowser, type Browser, becomesVisible } from './support/browser.ts';
import { customerSettingsFromEnv } from '../src/config.ts';
import { definePlan } from '../src/accounts/index.ts';

const ADMIN = 'app-sign-in-e2e-admin-token-0123456789abcdef';
let gw: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let idp: Awaited<ReturnType<typeof startOidcProvider>>;
let acme: TestAccount;
let browser: Browser;

const admin = (path: string, body?: unknown, method?: string) => call(gw, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${ADMIN}` } });

/** The link of the next mail to this address. */
async function mailedLink(email: string, after: number): Promise<string> {
  const mail = await smtp.mailTo(email, after);
  const url = /https?:\/\/\S+\/app\/sign-in#\S+/.exec(mail.text)?.[0];
  assert.ok(url, `a sign-in link in: ${mail.text}`);
  return url;
}

/** The cookies the browser would send to the session API. */
const browserCookie = async () => (await browser.context.cookies(`${gw.url}/app/api/session`)).map((c) => `${c.name}=${c.value}`).join('; ');

const skip = chromiumMissing();
if (skip) {
  console.log(`SKIP app-sign-in-e2e: ${skip}`);
  test.skip('sign-in pages in chromium');
} else {
  test.before(async () => {
    smtp = await startSmtpServer();
    idp = await startOidcProvider();
    gw = await startTestGateway({
      adminToken: ADMIN,
      customers: {
        ...customerSettingsFromEnv({}),
        smtpUrl: smtp.url,
        signUpOpen: true,
        signUpPlan: 'starter',
        oidc: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, name: 'Test IdP' },
      },
    });
    idp.register(`${gw.url}/app/api/sign-in/oidc/callback`);
    await definePlan(gw.ledger, { planId: 'starter', name: 'Starter', quota: 5000, validityDays: 30, requestsPerMinute: 60, models: ['*'] }, 'admin:test');
    acme = await openAccount(gw, { quota: 100_000 });
    browser = await openBrowser();
  });
  test.after(async () => {
    await browser?.close();
    await gw?.stop();
    await smtp?.close();
    await idp?.close();
  });

  test('an invited owner signs in by a mailed link and lands in the shell; the link works once; sign-out ends the session', async () => {
    assert.is((await admin(`/accounts/${acme.accountId}/members`, { email: 'owner@acme.test', role: 'owner' })).status, 201);
    const { page } = browser;
    await page.goto(`${gw.url}/app/keys`);
    await page.waitForURL(/\/app\/sign-in\?next=keys$/);
    // The page renders after its URL settles: wait for the offer rather than look once.
    const signUp = page.getByRole('heading', { name: 'New here? Create an account' });
    await signUp.waitFor({ state: 'visible', timeout: 10_000 }).catch(() => undefined);
    assert.ok(await signUp.isVisible(), 'sign-up is offered when open');
    await browser.shots(page, 'sign-in');
    const before = smtp.mails.length;
    await page.getByLabel('Email address').first().fill('owner@acme.test');
    await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
    await page.locator('#sign-in-sent', { hasText: 'a link is on its way' }).waitFor();
    const link = await mailedLink('owner@acme.test', before);

    await page.goto(link);
    await page.waitForURL(/\/app\/keys$/);
    assert.not.match(page.url(), /token=/, 'the token left the address bar');
    const nav = page.getByRole('navigation', { name: 'Pages' });
    for (const name of ['Keys', 'Members', 'Usage', 'Chat', 'Sessions']) assert.ok(await becomesVisible(nav.getByRole('link', { name })), name);
    assert.is(await nav.getByRole('link', { name: 'Keys' }).getAttribute('aria-current'), 'page');
    assert.ok(await becomesVisible(page.getByText('owner@acme.test')));
    await browser.shots(page, 'shell-keys');

    // The same link again: refused, and said so.
    await page.goto(link);
    await page.getByText('This link does not work').waitFor();

    await page.goto(`${gw.url}/app/sessions`);
    await page.locator('#sessions-table tr', { hasText: 'this session' }).waitFor();
    await browser.shots(page, 'sessions');
    const cookieBefore = await browserCookie();
    assert.is((await call(gw, '/app/api/session', { headers: { cookie: cookieBefore } })).status, 200, 'the browser holds a live session');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/app\/sign-in$/);
    assert.is((await call(gw, '/app/api/session', { headers: { cookie: cookieBefore } })).status, 401, 'the session ended on the server');
    assert.equal(browser.problems, []);
  });

  test('open sign-up: a new address creates its own account on the starter plan', async () => {
    const { page } = browser;
    await page.goto(`${gw.url}/app/sign-in`);
    const before = smtp.mails.length;
    await page.locator('#sign-up-email').fill('founder@new.test');
    await page.getByRole('button', { name: 'Create my account' }).click();
    await page.locator('#sign-up-sent', { hasText: 'a link is on its way' }).waitFor();
    await page.goto(await mailedLink('founder@new.test', before));
    await page.waitForURL(/\/app\/keys$/);
    assert.ok(await becomesVisible(page.getByText('founder@new.test')));
    const session = await call(gw, '/app/api/session', { headers: { cookie: await browserCookie() } });
    assert.is(session.json.accounts.length, 1);
    assert.is(session.json.accounts[0].role, 'owner');
    const sub = await admin(`/accounts/${session.json.accounts[0].account_id}`);
    assert.match(sub.text, /starter/);
    assert.equal(browser.problems, []);
  });
  test('an invited admin signs in through the OpenID provider and lands in the shell', async () => {
    assert.is((await admin(`/accounts/${acme.accountId}/members`, { email: 'oidc-admin@acme.test', role: 'admin' })).status, 201);
    const { page } = browser;
    await page.goto(`${gw.url}/app/sign-in`);
    await page.getByRole('link', { name: 'Sign in with Test IdP' }).click();
    // The provider's own pages: a login form (any password), then consent.
    await page.waitForURL((u) => u.href.startsWith(idp.issuer));
    await page.locator('input[name="login"]').fill('oidc-admin@acme.test');
    await page.locator('input[name="password"]').fill('any');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]', { hasText: 'Continue' }).click();
    await page.waitForURL(/\/app\/keys$/);
    assert.ok(await becomesVisible(page.getByText('oidc-admin@acme.test')));
    await page.goto(`${gw.url}/app/sign-in`);
    await page.getByRole('link', { name: 'Sign in with Test IdP' }).waitFor();
    await browser.shots(page, 'sign-in-oidc');
    await page.goto(`${gw.url}/app/keys`);
    const nav = page.getByRole('navigation', { name: 'Pages' });
    assert.ok(await becomesVisible(nav.getByRole('link', { name: 'Members' })), 'an admin manages members');
    assert.not.ok(await nav.getByRole('link', { name: 'Usage' }).isVisible(), 'an admin has no usage page (the role table)');
    const session = await call(gw, '/app/api/session', { headers: { cookie: await browserCookie() } });
    assert.is(session.json.email, 'oidc-admin@acme.test');
    assert.equal(
      browser.problems.filter((p) => !p.includes(idp.issuer)),
      [],
    );
  });
}

test.run();
