// The operator console (/admin) driven end to end in Debian's chromium through playwright-core,
// against an in-process gateway on the simulated upstream: sign-in (a wrong token first), the
// accounts list, one account (a key issued, shown once, then masked and revoked; extra tokens
// granted; a renewal; statements downloaded as CSV and JSON), a channel switched off and on, a
// correction's dry run (table and chart equal to the API's) then applied (its progress streamed,
// shown as charges adjusted), verify (its progress
// streamed, shown as events checked per phase), one flow by keyboard only, and a phone-sized
// screen. The new list endpoint is checked over HTTP too.
// Screenshots go to artifacts/admin-*.png. Without chromium the file prints a SKIP line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, ConsoleMessage, Page } from 'playwright-core';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { chromiumMissing, launchChromium, PHONE } from './support/browser.ts';

const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;
const ADMIN = 'tg_admin_console_e2e_0123456789abcdef';
const MODEL = 'cx/gen-6-terra';
const CHANNEL = 'simulated/gen-6-terra';

const skipReason = chromiumMissing();

let gw: TestGateway;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
/** The window the test's charges fall in (ISO), and the keys of the two charged accounts. */
let windowFrom: string;
let windowTo: string;
const authorizedUrls: string[] = [];
const cspProblems: string[] = [];
const consoleErrors: string[] = [];
const pageErrors: string[] = [];

async function shot(p: Page, name: string, fullPage = false): Promise<void> {
  // A whole-page shot from the top, so the sticky bar is drawn where it belongs.
  if (fullPage) await p.evaluate(() => window.scrollTo(0, 0));
  await p.screenshot({ path: join(ARTIFACTS, name), fullPage });
}

async function adminApi(method: string, path: string, body?: unknown, token = ADMIN) {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* CSV */
  }
  return { status: res.status, json, text };
}

async function chat(key: string, content: string) {
  const res = await fetch(`${gw.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }] }),
  });
  assert.is(res.status, 200, await res.clone().text());
  return res.json();
}

/** An ISO time as a datetime-local value in the browser's own time zone. */
function localValue(p: Page, iso: string): Promise<string> {
  // No named inner function: the TypeScript loader would wrap it in a helper the page lacks.
  return p.evaluate((t) => {
    const d = new Date(t);
    const parts = [d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0'));
    return `${d.getFullYear()}-${parts[0]}-${parts[1]}T${parts[2]}:${parts[3]}:${parts[4]}`;
  }, iso);
}

/** What has the focus: its tag, accessible-ish name and whether the browser shows it as focused. */
function focused(p: Page) {
  return p.evaluate(() => {
    const a = document.activeElement as HTMLElement | null;
    if (!a) return { tag: '', name: '', visible: false };
    const label = a.getAttribute('aria-label') || (a as HTMLInputElement).labels?.[0]?.textContent || a.textContent || '';
    return { tag: a.tagName.toLowerCase(), name: label.replace(/\s+/g, ' ').trim(), visible: a.matches(':focus-visible') };
  });
}

/** Presses Tab until the focused element's name matches; fails after `max` presses. */
async function tabTo(p: Page, name: RegExp, max = 80): Promise<void> {
  const seen: string[] = [];
  for (let i = 0; i < max; i++) {
    await p.keyboard.press('Tab');
    const f = await focused(p);
    seen.push(`${f.tag}:${f.name.slice(0, 40)}`);
    if (name.test(f.name)) {
      assert.ok(f.visible, `${f.name} shows its focus`);
      return;
    }
  }
  assert.unreachable(`Tab never reached ${name}: ${seen.join(' | ')}`);
}

async function signIn(p: Page, token: string, actor = ''): Promise<void> {
  await p.getByLabel('Admin token').fill(token);
  if (actor) await p.getByLabel(/Your name/).fill(actor);
  await p.getByRole('button', { name: 'Sign in' }).click();
}

async function dataValue(p: Page, selector: string): Promise<number> {
  return Number(await p.locator(selector).first().getAttribute('data-value'));
}

if (skipReason) {
  console.log(`SKIP admin-console-e2e: ${skipReason}`);
  test.skip('operator console in chromium');
} else {
  test.before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    gw = await startTestGateway({ adminToken: ADMIN, bootstrap: true });
    assert.is(
      (await adminApi('POST', '/plans', { plan_id: 'pro', name: 'Pro', quota: 200_000, validity_days: 30, requests_per_minute: 600, models: ['*'] })).status,
      201,
    );
    const keys: Record<string, string> = {};
    for (const [id, name] of [
      ['north', 'North Co'],
      ['south', 'South Ltd'],
      ['idle', 'Idle Inc'],
    ]) {
      assert.is((await adminApi('POST', '/accounts', { account_id: id, name })).status, 201);
      assert.is((await adminApi('POST', `/accounts/${id}/subscription`, { plan_id: 'pro' })).status, 200);
      keys[id] = (await adminApi('POST', `/accounts/${id}/keys`, { name: `${id} key` })).json.key;
    }
    // Charges to correct: two for north, one for south, all inside [windowFrom, windowTo).
    windowFrom = new Date(Math.floor(Date.now() / 1000) * 1000 - 1000).toISOString();
    await chat(keys.north, 'Tell me about toll bridges and their history.');
    await chat(keys.north, 'And about ferries?');
    await chat(keys.south, 'What is a lighthouse keeper?');
    windowTo = new Date(Math.ceil(Date.now() / 1000) * 1000 + 1000).toISOString();

    userDataDir = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'));
    context = await launchChromium(userDataDir);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
    // Every CSP violation is reported to the test, whatever the console shows.
    await context.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`));
    });
    context.on('request', (req) => {
      if (req.headers().authorization) authorizedUrls.push(req.url());
    });
    context.on('console', (msg: ConsoleMessage) => {
      if (msg.type() !== 'error') return;
      if (/Content Security Policy|Refused to|CSP violation/i.test(msg.text())) cspProblems.push(msg.text());
      consoleErrors.push(msg.text());
    });
    context.on('weberror', (e) => pageErrors.push(String(e.error())));
    page = context.pages()[0] ?? (await context.newPage());
  });

  test.after(async () => {
    await context?.close().catch(() => undefined);
    await gw?.stop();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  });

  test('GET /admin/v1/accounts pages through the accounts; the console and its assets carry the /app security headers', async () => {
    const all: string[] = [];
    let after: string | null = null;
    for (let i = 0; i < 10; i++) {
      const r = await adminApi('GET', `/accounts?limit=1${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      assert.is(r.status, 200);
      assert.is(r.json.data.length, 1);
      all.push(r.json.data[0].account_id);
      if (!r.json.has_more) {
        assert.is(r.json.next_after, null);
        break;
      }
      after = r.json.next_after;
      assert.is(after, r.json.data[0].account_id);
    }
    assert.equal(all, ['demo', 'demo-books', 'idle', 'north', 'south'], 'the first start opens demo and demo-books');
    const page1 = await adminApi('GET', '/accounts');
    assert.equal(
      page1.json.data.map((a: any) => a.account_id),
      all,
    );
    assert.is(page1.json.has_more, false);
    const north = page1.json.data.find((a: any) => a.account_id === 'north');
    assert.is(north.status, 'active');
    assert.equal(north.plan, { id: 'pro', name: 'Pro' });
    assert.ok(north.quota.used > 0 && north.quota.remaining === 200_000 - north.quota.used);
    assert.is(north.remaining_tokens, north.quota.remaining);
    // The balance is the listing's summary and the account's grants with terms (none yet).
    assert.equal((await adminApi('GET', '/accounts/north/balance')).json, { ...north, credits: [] });
    for (const bad of ['limit=0', 'limit=201', 'limit=abc', 'limit=1.5']) assert.is((await adminApi('GET', `/accounts?${bad}`)).status, 400, bad);
    assert.is((await adminApi('GET', '/accounts/nobody/balance')).status, 404);
    assert.is((await adminApi('GET', '/accounts', undefined, 'tg_admin_wrong')).status, 401);
    assert.is((await fetch(`${gw.url}/admin/v1/accounts`)).status, 401);

    const r = await fetch(`${gw.url}/admin/`, { redirect: 'manual' });
    assert.is(r.status, 302);
    assert.is(r.headers.get('location'), '/admin');
    const appCsp = (await fetch(`${gw.url}/app/chat`)).headers.get('content-security-policy');
    for (const path of ['/admin', '/admin/assets/console.js', '/admin/assets/console.css']) {
      const res = await fetch(gw.url + path);
      assert.is(res.status, 200, path);
      assert.is(res.headers.get('content-security-policy'), appCsp, path);
      assert.not.match(appCsp ?? '', /unsafe-inline|unsafe-eval|https?:/);
      assert.is(res.headers.get('x-frame-options'), 'DENY');
      assert.is(res.headers.get('x-content-type-options'), 'nosniff');
    }
    assert.is((await fetch(`${gw.url}/admin/assets/..%2Fconsole.html`)).status, 404);
    assert.is((await fetch(`${gw.url}/admin`, { method: 'POST' })).status, 405);
    const html = await (await fetch(`${gw.url}/admin`)).text();
    assert.not.match(html, /(src|href)="(https?:)?\/\//, 'every asset is local');
    assert.not.match(html, /<script>|style=/, 'no inline script or style');
  });

  test('sign-in: a wrong token is refused with a clear error, the right one opens the accounts with their balances', async () => {
    await page.goto(`${gw.url}/admin`);
    await page.getByRole('heading', { name: 'Operator console' }).waitFor();
    await signIn(page, 'tg_admin_not_the_token');
    const alert = page.locator('#signin-problem[role="alert"]');
    await alert.getByText('The admin token was not accepted').waitFor();
    assert.match((await alert.textContent()) ?? '', /HTTP 401/);
    assert.match((await alert.textContent()) ?? '', /What to do:/);
    assert.is(await page.getByLabel('Admin token').getAttribute('aria-invalid'), 'true');
    assert.is(await page.evaluate(() => sessionStorage.getItem('tollgate.adminToken')), null, 'a refused token is not kept');
    await shot(page, 'admin-signin-error.png');

    await signIn(page, ADMIN, 'e2e-operator');
    await page.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
    assert.is(await page.evaluate(() => sessionStorage.getItem('tollgate.adminToken')), ADMIN, 'kept in sessionStorage');
    assert.is(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.includes('admin')).length), 0, 'never in localStorage');
    assert.is(await page.getByRole('link', { name: 'Accounts' }).getAttribute('aria-current'), 'page');
    const api = (await adminApi('GET', '/accounts')).json.data;
    const rows = page.locator('#accounts-table tbody tr');
    await rows.first().waitFor();
    assert.is(await rows.count(), api.length);
    for (const a of api) {
      const row = page.locator(`#accounts-table tr[data-account-id="${a.account_id}"]`);
      assert.is(Number(await row.locator('[data-field="remaining_tokens"]').getAttribute('data-value')), a.remaining_tokens, a.account_id);
      assert.ok(((await row.textContent()) ?? '').includes(a.name), `${a.account_id}'s name`);
    }
    assert.match((await page.locator('#session-who').textContent()) ?? '', /e2e-operator/);
    await shot(page, 'admin-accounts-desktop.png');
  });

  test('an account: a key issued (secret shown once, copied, then masked) and revoked; extra tokens granted; a renewal', async () => {
    await page.getByRole('link', { name: 'North Co' }).click();
    await page.waitForURL(/#\/accounts\/north$/);
    await page.getByRole('heading', { level: 1, name: /North Co/ }).waitFor();
    await page.locator('#balance[aria-busy="false"] [data-field="extra_remaining"]').waitFor();
    const before = (await adminApi('GET', '/accounts/north/balance')).json;
    assert.is(await dataValue(page, '#balance p[data-field="remaining_tokens"]'), before.remaining_tokens);
    assert.is(await dataValue(page, '#balance [data-field="quota_used"]'), before.quota.used);
    assert.is(await dataValue(page, '#balance [data-field="quota_remaining"]'), before.quota.remaining);

    // Issue: the secret appears once, selected, with a copy button.
    await page.getByLabel('Key name').fill('laptop');
    await page.getByRole('button', { name: 'Issue a key' }).click();
    const secretBox = page.getByLabel('Secret key');
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    assert.match(secret, /^sk_svc_[A-Za-z0-9_-]{20,}$/);
    assert.ok(await secretBox.evaluate((e) => e === document.activeElement), 'the secret has the focus');
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText(/Copied to the clipboard|Selected: press Ctrl\+C/).waitFor();
    if (await page.getByText('Copied to the clipboard.').isVisible()) assert.is(await page.evaluate(() => navigator.clipboard.readText()), secret);
    const row = page.locator('#keys-table tr', { hasText: 'laptop' });
    await row.waitFor();
    const masked = (await row.locator('code.masked').textContent()) ?? '';
    assert.is(masked, `sk_svc_…${secret.slice(-4)}`);
    await shot(page, 'admin-account-new-key.png', true);
    assert.is((await fetch(`${gw.baseUrl}/models`, { headers: { authorization: `Bearer ${secret}` } })).status, 200, 'the new key works');
    await page.getByRole('button', { name: 'Done: I have saved it' }).click();
    await page.getByText(/now shown only masked/).waitFor();
    assert.not.ok((await page.content()).includes(secret), 'the secret is gone from the page');
    assert.is(await page.getByLabel('Secret key').count(), 0);

    // Revoke: Cancel changes nothing; confirming revokes at once.
    const revoke = page.getByRole('button', { name: `Revoke key laptop (${masked})` });
    await revoke.click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Revoke key laptop?' }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.not.ok(await dialog.isVisible());
    assert.is(await row.getAttribute('data-status'), 'active');
    await revoke.click();
    await dialog.getByLabel(/Reason/).fill('laptop lost');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await page.locator('#keys-table tr[data-status="revoked"]', { hasText: 'laptop' }).waitFor();
    await page.getByText(`Key laptop (${masked}) is revoked.`).waitFor();
    assert.is((await fetch(`${gw.baseUrl}/models`, { headers: { authorization: `Bearer ${secret}` } })).status, 401, 'the revoked key is refused');

    // Per-key controls: a daily spend limit and one model.
    const listed = (await adminApi('GET', '/accounts/north/keys')).json.data;
    assert.ok(
      listed.every((k: any) => 'spend_limit' in k && 'models' in k && 'expires_at' in k),
      'the key listing carries the controls',
    );
    const northKey = listed.find((k: any) => k.name === 'north key');
    await page.getByRole('button', { name: `Edit the limits of key north key (${northKey.masked})` }).click();
    const limits = page.locator('section[aria-labelledby="limits-heading"]');
    assert.is((await focused(page)).name.startsWith('Spend limit'), true, 'the limits form takes the focus');
    await limits.getByLabel(/^Spend limit/).fill('50000');
    await limits.getByLabel('Limit period').selectOption('daily');
    await limits.getByLabel(/^Models/).fill(MODEL);
    await limits.getByRole('button', { name: 'Save limits' }).click();
    await page.getByText(`Limits of key north key (${northKey.masked}) saved.`).waitFor();
    const saved = (await adminApi('GET', '/accounts/north/keys')).json.data.find((k: any) => k.key_id === northKey.key_id);
    assert.equal(saved.spend_limit, { tokens: 50_000, period: 'daily' });
    assert.equal(saved.models, [MODEL]);
    const cell = page.locator(`#keys-table tr[data-key-id="${northKey.key_id}"] td.controls`);
    await cell.filter({ hasText: '50,000 tokens a day' }).waitFor();
    assert.match((await cell.textContent()) ?? '', /50,000 tokens a day/);
    assert.match((await cell.textContent()) ?? '', new RegExp(`Models: ${MODEL}`));
    assert.match((await cell.textContent()) ?? '', new RegExp(`${saved.spend.remaining.toLocaleString('en-US')} left`));

    // Extra tokens: the balance changes by the grant.
    await page.getByLabel('Tokens to grant').fill('5000');
    await page.getByLabel(/^Reason for the grant/).fill('goodwill');
    await page.getByRole('button', { name: 'Grant extra tokens' }).click();
    await page.getByText(/Granted 5,000 extra tokens\./).waitFor();
    await page.waitForFunction(
      (n) => Number(document.querySelector('#balance [data-field="extra_remaining"]')?.getAttribute('data-value')) === n,
      before.extra_tokens.remaining + 5000,
    );
    const after = (await adminApi('GET', '/accounts/north/balance')).json;
    assert.is(after.extra_tokens.remaining, before.extra_tokens.remaining + 5000);
    assert.is(await dataValue(page, '#balance p[data-field="remaining_tokens"]'), after.remaining_tokens);
    assert.is(after.remaining_tokens, before.remaining_tokens + 5000);
    assert.equal(after.credits, [], 'a grant without terms is not a credit of its own');
    assert.is(await page.locator('#balance-credits').count(), 0);

    // Extra tokens with terms: the gateway's refusal (a priority out of range) reads as a message
    // naming the field; then an expiry day, a priority and a model, shown in the balance's table.
    const expiryDay = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const grant = page.locator('section[aria-labelledby="extra-heading"]');
    await grant.getByLabel('Tokens to grant').fill('2000');
    await grant.getByLabel(/^Reason for the grant/).fill('launch credit');
    await grant.getByLabel(/^Expires on/).fill(expiryDay);
    await grant.getByLabel(/^Priority/).fill('0');
    await grant.getByLabel(/^Models/).fill(MODEL);
    await grant.getByRole('button', { name: 'Grant extra tokens' }).click();
    await grant.getByText('priority must be a whole number from 1 (drawn first) to 100.').waitFor();
    assert.is(await grant.getByLabel(/^Priority/).getAttribute('aria-invalid'), 'true', 'the field the gateway named is marked');
    assert.is((await adminApi('GET', '/accounts/north/balance')).json.extra_tokens.granted, after.extra_tokens.granted, 'nothing was granted');
    await grant.getByLabel(/^Priority/).fill('10');
    await grant.getByRole('button', { name: 'Grant extra tokens' }).click();
    await grant.getByText(`Granted 2,000 extra tokens, expiring ${expiryDay} 23:59 UTC, for ${MODEL}, priority 10.`).waitFor();
    assert.is(await grant.getByLabel(/^Expires on/).inputValue(), '', 'the form is emptied');
    const termed = (await adminApi('GET', '/accounts/north/balance')).json;
    assert.equal(termed.credits, [
      { granted: 2000, used: 0, remaining: 2000, expires_at: `${expiryDay}T23:59:59.000Z`, priority: 10, models: [MODEL], status: 'active' },
    ]);
    assert.is(termed.extra_tokens.remaining, after.extra_tokens.remaining + 2000);
    const creditRow = page.locator('#balance-credits tbody tr');
    await creditRow.first().waitFor();
    assert.is(await creditRow.count(), 1);
    const cells = (await creditRow.locator('td').allTextContents()).map((t) => t.trim());
    const shownDay = await page.evaluate(
      (t) => new Date(t).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric' }),
      termed.credits[0].expires_at,
    );
    assert.is(cells.length, 5);
    assert.match(cells[1], new RegExp(`^${shownDay} \\(in 3[01] days\\)$`));
    assert.equal([cells[0], cells[2], cells[3], cells[4]], ['2,000 of 2,000', MODEL, '10', 'Active']);

    await shot(page, 'admin-account-desktop.png', true);

    // Renew a plan (on an account without charges: a correction that refunds a charge made before
    // a renewal is refused by the account's money invariant today, see the report).
    // Its key's own expiry (set in the future, as it must be) passes: the key is still listed as
    // active, but shown as Expired.
    const idleKey = (await adminApi('GET', '/accounts/idle/keys')).json.data[0];
    const expiresAt = new Date(Date.now() + 500).toISOString();
    assert.is((await adminApi('PATCH', `/keys/${idleKey.key_id}`, { expires_at: expiresAt })).status, 200);
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(expiresAt) - Date.now() + 20)));
    await page.goto(`${gw.url}/admin#/accounts/idle`);
    await page.getByRole('heading', { level: 1, name: /Idle Inc/ }).waitFor();
    const idleRow = page.locator(`#keys-table tr[data-key-id="${idleKey.key_id}"]`);
    await idleRow.waitFor();
    assert.is(await idleRow.getAttribute('data-status'), 'active');
    assert.is(await idleRow.locator('.pill').textContent(), 'Expired', 'an expired key is not shown as Active');
    await page.locator('#balance[aria-busy="false"] [data-field="expires_at"]').waitFor();
    const expiresBefore = await page.locator('#balance [data-field="expires_at"]').getAttribute('data-value');
    await page.waitForFunction(() => !!document.querySelector('select[name="plan_id"] option[value="pro"]'));
    assert.is(await page.getByLabel('Plan', { exact: true }).inputValue(), 'pro', 'the current plan is chosen');
    await page.getByRole('button', { name: 'Renew' }).click();
    await page.getByText(/Renewed Pro: expires/).waitFor();
    await page.waitForFunction((b) => document.querySelector('#balance [data-field="expires_at"]')?.getAttribute('data-value') !== b, expiresBefore);
    await page.goto(`${gw.url}/admin#/accounts/north`);
    await page.getByRole('heading', { level: 1, name: /North Co/ }).waitFor();
  });

  test("statements download as CSV and JSON, equal to the API's", async () => {
    const today = new Date().toISOString().slice(0, 10);
    await page.getByLabel('From (UTC day)').fill(today);
    await page.getByLabel('To (UTC day, included)').fill(today);
    const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download statement' }).click()]);
    assert.is(csv.suggestedFilename(), `statement-north-${today}-to-${today}.csv`);
    const end = new Date(`${today}T00:00:00Z`);
    end.setUTCDate(end.getUTCDate() + 1);
    const q = `from=${encodeURIComponent(`${today}T00:00:00.000Z`)}&to=${encodeURIComponent(end.toISOString())}`;
    const apiCsv = (await adminApi('GET', `/accounts/north/statement?${q}&format=csv`)).text;
    assert.is(readFileSync(await csv.path(), 'utf8'), apiCsv);
    assert.match(apiCsv, /,chat,/);
    await page.getByText(/Downloaded statement-north-.*\.csv: 2 charges/).waitFor();

    await page.getByLabel('JSON').check();
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download statement' }).click()]);
    assert.match(json.suggestedFilename(), /\.json$/);
    const saved = JSON.parse(readFileSync(await json.path(), 'utf8'));
    assert.equal(saved, (await adminApi('GET', `/accounts/north/statement?${q}`)).json);
    assert.is(saved.totals.charges, 2);
  });

  test('channel health: a channel switched off with a reason, then on again', async () => {
    await page.getByRole('link', { name: 'Channels' }).click();
    await page.getByRole('heading', { level: 1, name: 'Channel health' }).waitFor();
    const row = page.locator(`#channels-table tr[data-channel-id="${CHANNEL}"]`);
    await row.waitFor();
    const api = (await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === CHANNEL);
    assert.is(Number(await row.locator('[data-field="calls"]').getAttribute('data-value')), api.calls);
    assert.ok(api.calls >= 3);
    assert.is(await row.getAttribute('data-state'), 'closed');

    await row.getByRole('button', { name: `Disable channel ${CHANNEL}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Disable channel' }).click();
    await dialog.getByText('Give a reason').waitFor();
    assert.is(await dialog.getByLabel('Reason').getAttribute('aria-invalid'), 'true', 'a reason is required to disable');
    await dialog.getByLabel('Reason').fill('provider incident 42');
    await dialog.getByRole('button', { name: 'Disable channel' }).click();
    await page.locator(`#channels-table tr[data-channel-id="${CHANNEL}"][data-state="disabled"]`).waitFor();
    assert.match((await row.textContent()) ?? '', /admin:e2e-operator: “provider incident 42”/);
    const off = (await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === CHANNEL);
    assert.is(off.state, 'disabled');
    assert.is(off.disabled.reason, 'provider incident 42');
    assert.is(off.disabled.by, 'admin:e2e-operator', 'the actor typed at sign-in is recorded');
    await shot(page, 'admin-channels-desktop.png');

    await row.getByRole('button', { name: `Enable channel ${CHANNEL}` }).click();
    await dialog.getByRole('button', { name: 'Enable channel' }).click();
    await page.locator(`#channels-table tr[data-channel-id="${CHANNEL}"][data-state="closed"]`).waitFor();
    assert.is((await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === CHANNEL).state, 'closed');
  });

  test("a correction: the dry run as a table and a chart equal to the API's, then applied", async () => {
    await page.getByRole('link', { name: 'Corrections' }).click();
    await page.getByRole('heading', { level: 1, name: 'Corrections' }).waitFor();
    await page.waitForFunction((m) => !!document.querySelector(`select[name="model"] option[value="${m}"]`), MODEL);
    await page.getByLabel('Model', { exact: true }).selectOption(MODEL);
    await page.getByLabel('Multiplier').fill('1.1');
    await page.getByLabel(/^From/).fill(await localValue(page, windowFrom));
    await page.getByLabel(/^To/).fill(await localValue(page, windowTo));
    await page.getByLabel(/^Reason for the correction/).fill('terra was priced 1.25 instead of 1.1');
    const wait = Date.parse(windowTo) - Date.now() + 200;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait)); // the window must end in the past
    const sent = page.waitForRequest((r) => r.url().endsWith('/admin/v1/corrections'));
    await page.getByRole('button', { name: 'Preview (dry run)' }).click();
    const body = (await sent).postDataJSON();
    assert.equal(body, {
      model: MODEL,
      component: 'multiplier',
      value: 1.1,
      reason: 'terra was priced 1.25 instead of 1.1',
      from: windowFrom,
      to: windowTo,
      dry_run: true,
    });
    await page.locator('#dry-run-table').waitFor();
    const api = (await adminApi('POST', '/corrections', body)).json;
    assert.is(api.accounts.length, 2);
    assert.ok(api.totals.difference < 0);

    for (const a of [...api.accounts, { accountId: '(total)', ...api.totals }]) {
      const tr = page.locator(`#dry-run-table tr[data-account="${a.accountId}"]`);
      for (const col of ['charges', 'billedOriginally', 'billedNow', 'corrected', 'difference']) {
        assert.is(Number(await tr.locator(`[data-col="${col}"]`).getAttribute('data-value')), a[col], `${a.accountId} ${col}`);
      }
    }
    // The chart: one pair of bars per account with the same figures, and a text alternative.
    const chart = page.locator('svg.recon-chart');
    assert.is(await chart.getAttribute('role'), 'img');
    for (const a of api.accounts) {
      const g = chart.locator(`g.account[data-account="${a.accountId}"]`);
      assert.is(Number(await g.locator('rect[data-kind="billed-now"]').getAttribute('data-value')), a.billedNow);
      assert.is(Number(await g.locator('rect[data-kind="corrected"]').getAttribute('data-value')), a.corrected);
      assert.is(Number(await g.locator('text.diff').getAttribute('data-value')), a.difference);
      const widths = await g.locator('rect').evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('width'))));
      assert.ok(widths[0] > widths[1] && widths[1] > 0, `billed now is drawn longer than corrected (${widths})`);
    }
    const desc = (await chart.locator('desc').textContent()) ?? '';
    for (const a of api.accounts)
      assert.match(desc, new RegExp(`${a.accountId}: billed now ${a.billedNow.toLocaleString('en-US')}, corrected ${a.corrected.toLocaleString('en-US')}`));
    assert.is(await chart.getAttribute('aria-labelledby'), 'recon-chart-title recon-chart-desc');
    assert.is(await page.locator('[data-field="correction_id"]').textContent(), api.correctionId);
    await page.locator('#dry-run').scrollIntoViewIfNeeded();
    await shot(page, 'admin-correction-dry-run.png', true);

    // An apply whose answer fails after it began (a progress line, then an error line) shows the
    // error and leaves Apply enabled; the gateway never sees this one (the browser answers it).
    const stopped = 'The correction stopped before it finished (the gateway log has the cause). Run the same correction again to finish it.';
    await page.route('**/admin/v1/corrections', (route) =>
      route.fulfill({
        status: 200,
        contentType: 'application/x-ndjson',
        body:
          JSON.stringify({ object: 'correction.progress', phase: 'adjust', done: 0, total: 3, appended: 0, pass: 1 }) +
          '\n' +
          JSON.stringify({ object: 'error', status: 500, error: { message: stopped, type: 'server_error', code: 'server_error' } }) +
          '\n',
      }),
    );
    const dialog = page.getByRole('dialog');
    await page.getByRole('button', { name: 'Apply correction' }).click();
    await dialog.getByRole('button', { name: 'Apply correction' }).click();
    const alert = page.locator('#dry-run [role="alert"]');
    await alert.getByText(stopped).waitFor();
    assert.match((await alert.textContent()) ?? '', /The gateway had an error/);
    await page.unroute('**/admin/v1/corrections');
    assert.ok(await page.locator('#cx-apply-bar').isHidden(), 'the bar is hidden once the apply failed');
    assert.ok(await page.getByRole('button', { name: 'Apply correction' }).isEnabled(), 'it can be applied again');
    assert.is(await page.locator('#applied').count(), 0);

    // Apply, confirmed, with its progress: every state of the bar while the apply runs.
    await page.evaluate(() => {
      type Seen = { shown: boolean; value: string | null; max: string | null; text: string; valuetext: string | null };
      const w = window as unknown as { applyStates: Seen[] };
      w.applyStates = [];
      const bar = document.getElementById('cx-apply-bar') as HTMLProgressElement;
      const region = bar.parentElement!;
      new MutationObserver(() =>
        w.applyStates.push({
          shown: !region.hasAttribute('hidden'),
          value: bar.getAttribute('value'),
          max: bar.getAttribute('max'),
          text: document.getElementById('cx-apply-status')!.textContent ?? '',
          valuetext: bar.getAttribute('aria-valuetext'),
        }),
      ).observe(region, { attributes: true, subtree: true, childList: true, characterData: true });
    });
    const applying = page.waitForRequest((r) => r.url().endsWith('/admin/v1/corrections') && r.postDataJSON().dry_run === false);
    await page.getByRole('button', { name: 'Apply correction' }).click();
    await dialog.getByText(new RegExp(`3 charges of 2 accounts move from ${api.totals.billedNow.toLocaleString('en-US')}`)).waitFor();
    await dialog.getByRole('button', { name: 'Apply correction' }).click();
    assert.is((await applying).headers().accept, 'application/x-ndjson', 'the console asks for the progress stream');
    await page.locator('#applied').waitFor();
    const states = await page.evaluate(() => (window as unknown as { applyStates: Array<Record<string, any>> }).applyStates);
    assert.ok(
      states.some((s) => s.shown),
      `the progress bar was shown while the correction applied: ${JSON.stringify(states)}`,
    );
    const determinate = states.filter((s) => s.max !== null);
    assert.ok(
      determinate.some((s) => s.max === '3'),
      `the bar had the window's 3 charges as its total: ${JSON.stringify(states)}`,
    );
    for (const s of determinate) {
      assert.match(s.text, /^Adjusted \d of 3 charges, \d adjustments? appended \(pass 1\)$/);
      assert.is(s.valuetext, s.text, 'the bar reads out the same text');
    }
    // The last progress line (every charge gone through) stays on the (now hidden) bar.
    assert.equal(await page.locator('#cx-apply-bar').evaluate((b: HTMLProgressElement) => [b.value, b.max]), [3, 3]);
    assert.is(await page.locator('#cx-apply-status').textContent(), 'Adjusted 3 of 3 charges, 3 adjustments appended (pass 1)');
    assert.ok(await page.locator('#cx-apply-bar').isHidden(), 'the bar is hidden once the apply ended');
    assert.is(await dataValue(page, '#applied [data-field="appended"]'), 3);
    assert.is(await dataValue(page, '#applied [data-field="already_applied"]'), 0);
    assert.ok(await page.getByRole('button', { name: 'Apply correction' }).isDisabled(), 'applied once');
    const again = (await adminApi('POST', '/corrections', body)).json;
    assert.is(again.totals.difference, 0, 'nothing left to correct');
    assert.is(again.totals.billedNow, api.totals.corrected);
    await shot(page, 'admin-correction-applied.png', true);
  });

  test("plans and prices: a plan defined then updated, a model's multiplier, alias and cache weight set", async () => {
    await page.getByRole('link', { name: 'Plans' }).click();
    await page.getByRole('heading', { level: 1, name: 'Plans' }).waitFor();
    await page.locator('#plans-table tr[data-plan-id="pro"]').waitFor();
    await page.getByLabel('Plan id').fill('team');
    await page.getByLabel('Name', { exact: true }).fill('Team');
    await page.getByLabel('Quota (tokens)').fill('500000');
    await page.getByLabel('Validity (days)').fill('90');
    await page.getByLabel('Requests per minute').fill('120');
    await page.getByLabel(/All models/).uncheck();
    await page.getByLabel('alpha-haiku-4.5').check();
    await page.getByLabel(MODEL).check();
    await page.getByRole('button', { name: 'Define plan' }).click();
    await page.getByText('Plan team defined.').waitFor();
    await page.locator('#plans-table tr[data-plan-id="team"]').waitFor();
    const team = (await adminApi('GET', '/plans')).json.data.find((p: any) => p.plan_id === 'team');
    assert.equal(
      { ...team, updated_at: undefined },
      { plan_id: 'team', name: 'Team', quota: 500_000, validity_days: 90, requests_per_minute: 120, models: ['alpha-haiku-4.5', MODEL], updated_at: undefined },
    );
    await page.getByRole('button', { name: 'Edit plan team' }).click();
    assert.is(await page.getByLabel('Plan id').getAttribute('readonly'), '');
    // The form is filled from the plan as it renders: change a field only once it shows the plan,
    // or a render still on its way puts the old value back (seen under CI's load: 500000 saved).
    const quota = page.getByLabel('Quota (tokens)');
    for (let i = 0; (await quota.inputValue()) !== '500000'; i++) {
      assert.ok(i < 100, `the form never showed plan team's quota: ${await quota.inputValue()}`);
      await page.waitForTimeout(50);
    }
    await quota.fill('600000');
    assert.is(await quota.inputValue(), '600000');
    await page.getByRole('button', { name: 'Update plan' }).click();
    await page.getByText(/Plan team updated/).waitFor();
    // Read until the update shows (bounded): under CI's load one read saw the plan before it.
    let quotaSaved = 0;
    for (let i = 0; i < 50 && quotaSaved !== 600_000; i++) {
      if (i > 0) await page.waitForTimeout(100);
      quotaSaved = (await adminApi('GET', '/plans')).json.data.find((p: any) => p.plan_id === 'team').quota;
    }
    assert.is(quotaSaved, 600_000);

    await page.getByRole('link', { name: 'Models' }).click();
    await page.getByRole('heading', { level: 1, name: 'Models and prices' }).waitFor();
    await page.getByRole('button', { name: 'Edit the price of alpha-opus-4.6' }).click();
    const form = page.locator('section[aria-labelledby="model-edit-heading"]');
    assert.is((await focused(page)).name, 'Multiplier', 'the form takes the focus');
    await form.getByLabel('Multiplier').fill('2.5');
    await form.getByLabel(/^Alias/).fill('opus-classic');
    await form.getByLabel(/^Cache read weight/).fill('0.1');
    const sent = page.waitForRequest((r) => r.method() === 'PATCH');
    await form.getByRole('button', { name: 'Save price' }).click();
    const req = await sent;
    assert.ok(req.url().endsWith('/admin/v1/models/alpha-opus-4.6'), req.url());
    assert.equal(req.postDataJSON(), { multiplier: 2.5, alias: 'opus-classic', cache_read_weight: 0.1 }, 'only what changed is sent');
    await page.getByText('alpha-opus-4.6 priced: ×2.5, active, alias opus-classic.').waitFor();
    const m = (await adminApi('GET', '/models')).json.data.find((x: any) => x.model_id === 'alpha-opus-4.6');
    assert.equal([m.multiplier_milli, m.alias, m.cache_read_milli, m.cache_write_milli, m.status], [2500, 'opus-classic', 100, null, 'ACTIVE']);
    assert.is(await page.locator('#models-table tr[data-model-id="alpha-opus-4.6"] td.num').first().getAttribute('data-value'), '2.5');
    await shot(page, 'admin-models-desktop.png');
  });

  test('verify: a running state while the audit runs, its progress in events per phase, then the counts of a ledger that verifies', async () => {
    await page.getByRole('link', { name: 'Verify' }).click();
    await page.getByRole('heading', { level: 1, name: 'Verify the ledger' }).waitFor();
    // Every state of the progress region while it is shown: the bar's value and max and its text.
    await page.evaluate(() => {
      type Seen = { value: string | null; max: string | null; position: number; text: string; valuetext: string | null };
      const w = window as unknown as { sawProgress: boolean; progressStates: Seen[] };
      w.sawProgress = false;
      w.progressStates = [];
      const p = document.querySelector('.verify-progress')!;
      new MutationObserver(() => {
        if (p.hasAttribute('hidden')) return;
        w.sawProgress = true;
        const bar = document.getElementById('verify-bar') as HTMLProgressElement;
        w.progressStates.push({
          value: bar.getAttribute('value'),
          max: bar.getAttribute('max'),
          position: bar.position,
          text: document.getElementById('verify-status')!.textContent ?? '',
          valuetext: bar.getAttribute('aria-valuetext'),
        });
      }).observe(p, { attributes: true, subtree: true, childList: true, characterData: true });
    });
    // Held back a moment on its way, so the running state can be seen (and photographed).
    let accept = '';
    await page.route('**/admin/v1/verify', async (route) => {
      accept = route.request().headers().accept ?? '';
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue();
    });
    await page.getByRole('button', { name: 'Run verify' }).click();
    await page.locator('.verify-progress:not([hidden]) progress').waitFor();
    assert.ok(await page.getByRole('button', { name: 'Run verify' }).isDisabled(), 'one run at a time');
    assert.is(await page.locator('section[aria-labelledby="verify-heading"]').getAttribute('aria-busy'), 'true');
    assert.is(await page.locator('#verify-bar').evaluate((p: HTMLProgressElement) => p.position), -1, 'indeterminate until the first progress line');
    await shot(page, 'admin-verify-running.png');
    await page.locator('#verify-verdict').waitFor({ timeout: 60_000 });
    await page.unroute('**/admin/v1/verify');
    assert.is(accept, 'application/x-ndjson', 'the console asks for the progress stream');
    const w = await page.evaluate(() => {
      const { sawProgress, progressStates } = window as unknown as { sawProgress: boolean; progressStates: Array<Record<string, any>> };
      return { sawProgress, progressStates };
    });
    assert.ok(w.sawProgress, 'the progress indicator was shown while verify ran');
    const determinate = w.progressStates.filter((s) => s.max !== null);
    assert.ok(determinate.length > 0, `a determinate progress was shown: ${JSON.stringify(w.progressStates)}`);
    for (const s of determinate) {
      assert.ok(Number(s.max) >= 1 && Number(s.value) >= 0 && Number(s.value) <= Number(s.max), JSON.stringify(s));
      assert.ok(s.position >= 0 && s.position <= 1, 'a determinate bar');
      assert.match(s.text, /^Checked [\d,]+ of [\d,]+ events \((hash chains|read models)\)$/);
      assert.is(s.valuetext, s.text, 'the bar reads out the same text');
    }
    // The last progress line (every event replayed: those checked, or more if some were appended
    // meanwhile) stays on the (now hidden) bar.
    const events = await dataValue(page, '[data-field="events"]');
    assert.ok(events > 20);
    const bar = await page.locator('#verify-bar').evaluate((p: HTMLProgressElement) => ({ value: p.value, max: p.max }));
    assert.is(bar.value, bar.max);
    assert.ok(bar.max >= events, `${bar.max} >= ${events}`);
    const n = bar.max.toLocaleString('en-US');
    assert.is(await page.locator('#verify-status').textContent(), `Checked ${n} of ${n} events (read models)`);
    assert.is(await page.locator('#verify-verdict').getAttribute('data-ok'), 'true');
    assert.is(await dataValue(page, '[data-field="chain_problems"]'), 0);
    assert.is(await dataValue(page, '[data-field="read_model_differences"]'), 0);
    assert.ok(await page.getByRole('button', { name: 'Run verify' }).isEnabled());
    assert.is(await page.locator('[data-field="mode"]').getAttribute('data-value'), 'full', 'the first verification is full');
    await shot(page, 'admin-verify-desktop.png');
    // The next one reads only what came after the checkpoint the first recorded; "Full" reads it all again.
    const verdictAfterRun = async () => {
      await page.getByRole('button', { name: 'Run verify' }).click();
      await page.locator('#verify-verdict').waitFor({ timeout: 60_000 });
      await page.getByRole('button', { name: 'Run verify' }).waitFor({ state: 'visible' });
      await page.waitForFunction(() => !(document.getElementById('verify-run') as HTMLButtonElement).disabled);
      return {
        mode: await page.locator('[data-field="mode"]').getAttribute('data-value'),
        read: await dataValue(page, '[data-field="checked_events"]'),
        all: await dataValue(page, '[data-field="events"]'),
        ok: await page.locator('#verify-verdict').getAttribute('data-ok'),
      };
    };
    const since = await verdictAfterRun();
    assert.equal([since.mode, since.ok], ['since_checkpoint', 'true']);
    assert.match((await page.locator('[data-field="mode"]').textContent()) ?? '', /^Since the checkpoint of /);
    assert.ok(since.read < since.all && since.all >= events, JSON.stringify(since));
    await page.getByLabel('Full: read the whole log again').check();
    const full = await verdictAfterRun();
    assert.equal([full.mode, full.ok, full.read], ['full', 'true', full.all]);
  });

  test('by keyboard only: sign in, open the channels, switch a channel off and on', async () => {
    const kb = await context.newPage(); // a new tab: its own sessionStorage, so signed out
    await kb.goto(`${gw.url}/admin#/channels`);
    await kb.getByRole('heading', { name: 'Operator console' }).waitFor();
    await tabTo(kb, /^Skip to the content$/);
    await tabTo(kb, /^Admin token$/);
    await kb.keyboard.type(ADMIN);
    await kb.keyboard.press('Enter');
    await kb.getByRole('heading', { level: 1, name: 'Channel health' }).waitFor();
    assert.is((await focused(kb)).name, 'Channel health', 'the focus moves to the section heading');
    await tabTo(kb, /^Accounts$/);
    await kb.keyboard.press('Enter');
    await kb.getByRole('heading', { level: 1, name: 'Accounts' }).waitFor();
    await tabTo(kb, /^Channels$/);
    await kb.keyboard.press('Enter');
    const target = 'simulated/gen-6-luna';
    await kb.locator(`#channels-table tr[data-channel-id="${target}"]`).waitFor();
    await tabTo(kb, new RegExp(`^Disable channel ${target}$`));
    await kb.keyboard.press('Enter');
    await kb.getByRole('dialog').waitFor();
    assert.is((await focused(kb)).tag, 'textarea', 'the reason box has the focus');
    await kb.keyboard.type('keyboard drill');
    await kb.keyboard.press('Tab');
    await kb.keyboard.press('Tab');
    assert.is((await focused(kb)).name, 'Disable channel');
    await kb.keyboard.press('Enter');
    await kb.locator(`#channels-table tr[data-channel-id="${target}"][data-state="disabled"]`).waitFor();
    assert.is((await focused(kb)).name, `Enable channel ${target}`, 'the focus is back on the row');
    await kb.keyboard.press('Enter');
    await kb.getByRole('dialog').waitFor();
    // Escape closes without a change; then again, confirmed.
    await kb.keyboard.press('Escape');
    assert.not.ok(await kb.getByRole('dialog').isVisible());
    assert.is((await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === target).state, 'disabled');
    assert.is((await focused(kb)).name, `Enable channel ${target}`);
    await kb.keyboard.press('Enter');
    await kb.getByRole('dialog').waitFor();
    await kb.keyboard.press('Tab');
    await kb.keyboard.press('Tab');
    assert.is((await focused(kb)).name, 'Enable channel');
    await kb.keyboard.press('Enter');
    await kb.locator(`#channels-table tr[data-channel-id="${target}"][data-state="closed"]`).waitFor();
    assert.is((await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === target).state, 'closed');
    await shot(kb, 'admin-keyboard-channels.png');
    await kb.close();
  });

  test('a dialog opened again before the earlier close event arrives stays open (Escape, then Enter at once)', async () => {
    const p = await context.newPage();
    await p.goto(`${gw.url}/admin#/channels`);
    await signIn(p, ADMIN);
    const target = 'simulated/gen-6-terra';
    const button = p.locator(`#channels-table tr[data-channel-id="${target}"] button`);
    await button.click();
    await p.getByRole('dialog').waitFor();
    // One task: the dialog closes (its close event is queued as a task of its own) and the button
    // asks again, as a fast Escape then Enter can do when the browser takes input first.
    await p.evaluate((id) => {
      (document.getElementById('dialog') as HTMLDialogElement).close();
      document.querySelector<HTMLButtonElement>(`#channels-table tr[data-channel-id="${id}"] button`)!.click();
    }, target);
    await p.evaluate(() => new Promise((resolve) => setTimeout(resolve, 100)));
    assert.ok(await p.getByRole('dialog').isVisible(), 'the second ask is still open');
    assert.is((await focused(p)).tag, 'textarea', 'the reason box has the focus');
    await p.getByRole('button', { name: 'Cancel' }).click();
    assert.not.ok(await p.getByRole('dialog').isVisible());
    assert.is((await adminApi('GET', '/channels')).json.data.find((c: any) => c.id === target).state, 'closed');
    await p.close();
  });

  test('a phone-sized screen (390x844): the console fits the width and stays usable', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize(PHONE);
    await phone.goto(`${gw.url}/admin`);
    await signIn(phone, ADMIN);
    await phone.locator('#accounts-table tbody tr').first().waitFor();
    const width = async () => phone.evaluate(() => document.documentElement.scrollWidth);
    assert.ok((await width()) <= PHONE.width, `no sideways scrolling on the accounts (${await width()}px)`);
    await shot(phone, 'admin-accounts-phone.png', true);

    await phone.goto(`${gw.url}/admin#/accounts/south`);
    await phone.locator('#balance[aria-busy="false"] [data-field="extra_remaining"]').waitFor();
    assert.ok((await width()) <= PHONE.width, `no sideways scrolling on an account (${await width()}px)`);
    await shot(phone, 'admin-account-phone.png', true);

    await phone.goto(`${gw.url}/admin#/corrections`);
    await phone.waitForFunction((m) => !!document.querySelector(`select[name="model"] option[value="${m}"]`), MODEL);
    await phone.getByLabel('Model', { exact: true }).selectOption(MODEL);
    await phone.getByLabel('Multiplier').fill('1.2');
    await phone.getByLabel(/^From/).fill(await localValue(phone, windowFrom));
    await phone.getByLabel(/^To/).fill(await localValue(phone, windowTo));
    await phone.getByRole('button', { name: 'Preview (dry run)' }).click();
    await phone.locator('svg.recon-chart g.account').first().waitFor();
    assert.ok((await width()) <= PHONE.width, `no sideways scrolling on the corrections (${await width()}px)`);
    const chartWidth = await phone.locator('svg.recon-chart').evaluate((s) => s.getBoundingClientRect().width);
    assert.ok(chartWidth <= PHONE.width && chartWidth > 250, `the chart fits (${chartWidth}px)`);
    await phone.locator('#dry-run').scrollIntoViewIfNeeded();
    await shot(phone, 'admin-correction-phone.png');
    await phone.emulateMedia({ colorScheme: 'dark' });
    await shot(phone, 'admin-correction-phone-dark.png');
    await phone.close();
  });

  test('the admin token went only to /admin/v1 of this gateway; the CSP blocked nothing; no script error', async () => {
    assert.ok(authorizedUrls.length > 10);
    for (const url of authorizedUrls) assert.ok(url.startsWith(`${gw.url}/admin/v1/`), url);
    assert.equal(cspProblems, []);
    assert.equal(pageErrors, []);
    // The only console errors are the browser's notes on the refused sign-in (HTTP 401) and the
    // refused grant of extra tokens (HTTP 400, a priority out of range).
    for (const e of consoleErrors) assert.match(e, /Failed to load resource: the server responded with a status of 40[01]/, e);
    assert.is(consoleErrors.filter((e) => / 400 /.test(e)).length, 1, 'one refused grant');
  });
}

test.run();
