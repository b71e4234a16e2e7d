// The signed-in /app pages in chromium: an owner creates a key (its secret shown once, Copy and
// Done), rotates it and revokes it, each key usable or refused at once through /v1 on another
// gateway (the official openai client; on PostgreSQL a second gateway on the same log, on PGlite
// the same one); invites a developer, who signs in and manages keys; changes them to billing, and
// the role stops them: the pages hide keys and the server refuses a key (403), nothing written.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { modelsStatus, refusedOnOther } from './support/key-checks.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { openAccount, type TestAccount } from './support/http.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { chromiumMissing, openBrowser, signInByMail, type Browser, becomesVisible } from './support/browser.ts';
import { customerSettingsFromEnv } from '../src/config.ts';
import { streams } from '../src/ledger/events.ts';

const ADMIN = 'app-account-e2e-admin-token-0123456789abcdef';
let gw: TestGateway;
let other: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let acme: TestAccount;
let browser: Browser;

const signIn = (email: string) =>
  signInByMail(
    browser.page,
    gw.url,
    (a, n) => smtp.mailTo(a, n),
    () => smtp.mails.length,
    email,
  );
async function signOut() {
  await browser.page.getByRole('button', { name: 'Sign out' }).click();
  await browser.page.waitForURL(/\/app\/sign-in$/);
}
const modelsWith = (key: string) => modelsStatus(other.url, key);
const stoppedOnOther = (key: string) => refusedOnOther(other.url, key);
const secretShown = () =>
  browser.page
    .locator('#new-key-secret')
    .textContent()
    .then((t) => (t ?? '').trim());

const skip = chromiumMissing();
if (skip) {
  console.log(`SKIP app-account-e2e: ${skip}`);
  test.skip('account pages in chromium');
} else {
  test.before(async () => {
    smtp = await startSmtpServer();
    gw = await startTestGateway({ adminToken: ADMIN, customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url } });
    // A second gateway on the same log needs a database both can share; on PGlite it is the same one.
    other = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema }) : gw;
    acme = await openAccount(gw, { quota: 1_000_000 });
    const inv = await fetch(`${gw.url}/admin/v1/accounts/${acme.accountId}/members`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'owner@acme.test', role: 'owner' }),
    });
    assert.is(inv.status, 201);
    browser = await openBrowser();
  });
  test.after(async () => {
    await browser?.close();
    if (other && other !== gw) await other.close();
    await gw?.stop();
    await smtp?.close();
  });

  test('an owner creates a key (shown once), rotates and revokes it; each works or stops at once on another gateway', async () => {
    const { page } = browser;
    await signIn('owner@acme.test');
    await page.waitForURL(/\/app\/keys$/);
    await page.getByLabel('Application name').fill('billing-service');
    await page.getByLabel('Spend limit (billed tokens)').fill('5000');
    await page.getByLabel('Limit period').selectOption('daily');
    await page.getByLabel('Expires on (UTC)').fill('2031-01-31');
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Your new key' });
    await dialog.waitFor();
    const secret = await secretShown();
    assert.match(secret, /^sk_svc_/);
    await browser.shots(page, 'key-created');
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByText(/Copied|Selected/).waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.not.ok((await page.content()).includes(secret), 'Done removes the secret from the page');
    assert.is(await modelsWith(secret), 200, 'the new key works at once on the other gateway');

    const row = page.locator('#keys-table tr', { hasText: 'billing-service' });
    assert.match((await row.textContent()) ?? '', /0 of 5,000 tokens today/);
    assert.match((await row.textContent()) ?? '', /Jan 31, 2031/);
    await row.getByRole('button', { name: 'Rotate billing-service' }).click();
    await page.getByRole('dialog', { name: 'Rotate billing-service?' }).getByRole('button', { name: 'Rotate' }).click();
    await page.getByRole('dialog', { name: 'The new key of this application' }).waitFor();
    const rotated = await secretShown();
    assert.match(rotated, /^sk_svc_/);
    assert.is.not(rotated, secret);
    await page.getByRole('button', { name: 'Done' }).click();
    assert.is(await stoppedOnOther(secret), 401, 'the old key stopped (once the other gateway heard)');
    assert.is(await modelsWith(rotated), 200);

    const live = page.locator('#keys-table tr', { hasText: 'billing-service' }).filter({ hasText: 'active' });
    await live.getByRole('button', { name: 'Revoke billing-service' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke billing-service?' });
    await browser.shots(page, 'key-revoke-confirm');
    await confirm.getByRole('button', { name: 'Revoke' }).click();
    await page.locator('#keys-status', { hasText: 'was revoked' }).waitFor();
    assert.is(await stoppedOnOther(rotated), 401, 'the revoked key stopped (once the other gateway heard)');
    assert.equal(browser.problems, []);
  });

  test('an owner makes a management key in the page; it issues a key through /v1/keys on another gateway and calls no model', async () => {
    const { page } = browser;
    await page.getByLabel('Management key name').fill('provisioner');
    await page.getByRole('button', { name: 'Create management key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Your new key' });
    await dialog.waitFor();
    const manager = await secretShown();
    assert.match(manager, /^sk_mgmt_/);
    await dialog.getByRole('button', { name: 'Done' }).click();
    await page.locator('#mgmt-table tr', { hasText: 'provisioner' }).filter({ hasText: 'active' }).waitFor();
    const issued = await fetch(`${other.url}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${manager}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'user-7' }),
    });
    assert.is(issued.status, 201);
    assert.is(await modelsWith((await issued.json()).key), 200, 'the key it issued works at once');
    assert.is(await modelsWith(manager), 401, 'the management key calls no model');
    await page.reload();
    await page.locator('#keys-table tr', { hasText: 'user-7' }).waitFor();
    await browser.shots(page, 'keys');
    assert.equal(browser.problems, []);
  });

  test('invite a developer, change their role to billing, and see the role stop them', async () => {
    const { page } = browser;
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByLabel('Email address').fill('dev@acme.test');
    await page.getByLabel('Role', { exact: true }).selectOption('developer');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.locator('#members-status', { hasText: 'dev@acme.test is invited as developer' }).waitFor();
    await signOut();

    await signIn('dev@acme.test');
    await page.waitForURL(/\/app\/keys$/);
    assert.ok(await becomesVisible(page.getByRole('button', { name: 'Create key' })), 'a developer manages keys');
    // A developer reads the account's usage in the shell, with no key pasted: the API's figures.
    const chat = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gen-6-terra', messages: [{ role: 'user', content: 'How long is a toll bridge?' }] }),
    });
    assert.is(chat.status, 200, await chat.clone().text());
    const usage = await (await fetch(`${gw.baseUrl}/usage?range=30d&view=corrected`, { headers: { authorization: `Bearer ${acme.key}` } })).json();
    assert.ok(usage.totals.billed > 0, 'the call was billed');
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Usage' }).click();
    await page.waitForURL(/\/app\/account-usage$/);
    await page.locator('#total-billed').waitFor();
    assert.is(Number(await page.locator('#total-billed').getAttribute('data-value')), usage.totals.billed);
    await page.getByRole('link', { name: 'Members' }).click();
    await page.locator('#members-table tr', { hasText: 'dev@acme.test' }).waitFor();
    assert.not.ok(await page.getByRole('button', { name: 'Invite' }).isVisible(), 'a developer invites no one');
    await signOut();

    await signIn('owner@acme.test');
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByRole('button', { name: 'Change the role of dev@acme.test' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change the role of dev@acme.test' });
    await dialog.getByLabel('New role').selectOption('billing');
    await dialog.getByRole('button', { name: 'Save role' }).click();
    await page.locator('#members-status', { hasText: 'dev@acme.test is now billing' }).waitFor();
    await page.locator('#member-history tr', { hasText: 'developer → billing' }).filter({ hasText: 'owner@acme.test' }).waitFor();
    await browser.shots(page, 'members');
    await signOut();

    await signIn('dev@acme.test');
    // Keys are not this role's: the shell neither links to them nor shows them.
    await page.waitForURL(/\/app\/members$/);
    // The navigation has rendered (the role's own pages show) before the absent link is checked.
    const nav = page.getByRole('navigation', { name: 'Pages' });
    assert.ok(await becomesVisible(nav.getByRole('link', { name: 'Billing' })), 'a billing member buys');
    assert.not.ok(await nav.getByRole('link', { name: 'Keys' }).isVisible());
    await page.goto(`${gw.url}/app/keys`);
    await page.waitForURL(/\/app\/members$/);
    // And the server refuses it anyway, with the session's own CSRF token, writing nothing.
    const before = (await gw.ledger.events.readStream(streams.account(acme.accountId))).length;
    const refused = await page.evaluate(async (account) => {
      const s = await (await fetch('/app/api/session')).json();
      const r = await fetch(`/app/api/accounts/${account}/keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': s.csrf_token },
        body: JSON.stringify({ name: 'sneaky' }),
      });
      return r.status;
    }, acme.accountId);
    assert.is(refused, 403);
    assert.is((await gw.ledger.events.readStream(streams.account(acme.accountId))).length, before, 'nothing written');
    await browser.shots(page, 'billing-member');
    assert.equal(browser.problems, []);
  });
}

test.run();
