// The web pages (/app/chat, /app/usage) driven end to end in Debian's chromium through
// playwright-core, against an in-process gateway on the simulated upstream: a streamed chat
// reply, an image generated and edited in the chat frame, readable 401 and 402 errors, the
// usage chart with today's bar and the usage downloaded as CSV. Screenshots (desktop and a
// 390x844 phone) go to artifacts/. Without chromium the file prints a SKIP line and reports the
// test as skipped.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, mkdtempSync, rmSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import type { BrowserContext, ConsoleMessage, Page } from 'playwright-core';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { chromiumMissing, launchChromium, PHONE } from './support/browser.ts';
import { issueKey } from '../src/keys/index.ts';
import { definePlan, grantExtra, openAccount, subscribe } from '../src/accounts/index.ts';

const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;

const skipReason = chromiumMissing();

let gw: TestGateway;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
let demoKey: string;
let tinyKey: string;
/** Every request that carried an Authorization header, and what the pages logged. */
const authorizedUrls: string[] = [];
const consoleProblems: string[] = [];
const pageErrors: string[] = [];

const today = () => new Date().toISOString().slice(0, 10);

/** The cells of one CSV line (RFC 4180 quoting: "a,b" and "say ""hi"""). */
function csvCells(line: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      cells.push(cell);
      cell = '';
    } else cell += ch;
  }
  cells.push(cell);
  return cells;
}

async function shot(p: Page, name: string, fullPage = false): Promise<void> {
  await p.screenshot({ path: join(ARTIFACTS, name), fullPage });
}

async function remaining(p: Page): Promise<number> {
  await p.waitForFunction(() => document.getElementById('quota')?.dataset.remaining !== undefined);
  return Number(await p.locator('#quota').getAttribute('data-remaining'));
}

async function saveKey(p: Page, key: string): Promise<void> {
  if (await p.getByRole('button', { name: 'Change key' }).isVisible()) await p.getByRole('button', { name: 'Change key' }).click();
  await p.getByLabel('Your API key').fill(key);
  await p.getByRole('button', { name: 'Save', exact: true }).click();
}

if (skipReason) {
  console.log(`SKIP web-e2e: ${skipReason}`);
  test.skip('web pages in chromium');
} else {
  test.before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    gw = await startTestGateway({ bootstrap: true });
    assert.ok(gw.demo, 'the bootstrap made a demo key');
    demoKey = gw.demo!.keySecret;

    const actor = 'admin:test';
    await definePlan(gw.ledger, { planId: 'tiny', name: 'Tiny', quota: 10, validityDays: 30, requestsPerMinute: 600, models: ['*'] }, actor);
    const tiny = await openAccount(gw.ledger, { name: 'Tiny account' }, actor);
    await subscribe(gw.ledger, tiny, 'tiny', actor);
    tinyKey = (await issueKey(gw.ledger, tiny, 'tiny key', actor)).secret;
    await gw.ledger.caughtUp();

    userDataDir = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'));
    context = await launchChromium(userDataDir);
    context.on('request', (req) => {
      if (req.headers().authorization) authorizedUrls.push(req.url());
    });
    context.on('console', (msg: ConsoleMessage) => {
      if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) consoleProblems.push(msg.text());
    });
    context.on('weberror', (e) => pageErrors.push(String(e.error())));
    page = context.pages()[0] ?? (await context.newPage());
  });

  test.after(async () => {
    await context?.close().catch(() => undefined);
    await gw?.stop();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  });

  test('GET /app redirects to the chat page; /app pages and assets carry the security headers', async () => {
    const r = await fetch(`${gw.url}/app`, { redirect: 'manual' });
    assert.is(r.status, 302);
    assert.is(r.headers.get('location'), '/app/chat');
    for (const path of ['/app/chat', '/app/usage', '/app/assets/chat.js', '/app/assets/usage.js', '/app/assets/style.css']) {
      const res = await fetch(gw.url + path);
      assert.is(res.status, 200, path);
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'self'/, path);
      assert.match(csp, /img-src 'self' data: blob:/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.not.match(csp, /unsafe-inline|unsafe-eval|https?:/, 'nothing but self');
      assert.is(res.headers.get('x-content-type-options'), 'nosniff');
      assert.is(res.headers.get('referrer-policy'), 'no-referrer');
      assert.is(res.headers.get('x-frame-options'), 'DENY');
    }
    assert.match((await fetch(`${gw.url}/app/chat`)).headers.get('content-type') ?? '', /text\/html/);
    assert.match((await fetch(`${gw.url}/app/assets/chat.js`)).headers.get('content-type') ?? '', /javascript/);
    assert.is((await fetch(`${gw.url}/app/assets/..%2Fchat.html`)).status, 404);
    // Every asset the pages reference is local: no http(s) URL in the HTML.
    for (const path of ['/app/chat', '/app/usage']) assert.not.match(await (await fetch(gw.url + path)).text(), /(src|href)="(https?:)?\/\//);
  });

  test('chat: key saved, models with multipliers, a streamed reply with the chosen effort, quota refreshed', async () => {
    await page.goto(`${gw.url}/app`);
    assert.is(new URL(page.url()).pathname, '/app/chat');
    await saveKey(page, demoKey);
    assert.is(await page.evaluate(() => localStorage.getItem('tollgate.apiKey')), demoKey, 'the key is kept in localStorage');
    const model = page.getByLabel('Model');
    assert.ok(await model.isVisible());
    await page.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
    const options = await model.locator('option').allTextContents();
    assert.ok(options.includes('cx/gen-6-terra — ×1.25'), options.join(', '));
    assert.ok(options.includes('alpha-opus-5 — ×1.75'), options.join(', '));
    await model.selectOption('cx/gen-6-terra');
    await page.getByLabel('Reasoning effort').selectOption('high');
    const before = await remaining(page);
    assert.ok(before > 0);

    await page.evaluate(() => {
      const w = window as unknown as { textUpdates: number };
      w.textUpdates = 0;
      new MutationObserver((records) => {
        for (const r of records)
          if ((r.target as Element).closest?.('.message.assistant .text') || r.target.parentElement?.closest('.message.assistant .text')) w.textUpdates++;
      }).observe(document.getElementById('log')!, { subtree: true, childList: true, characterData: true });
    });
    const prompt = page.getByLabel('Your message');
    await prompt.fill('Hello from the browser test. Tell me about lighthouses.');
    const requested = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    const answered = page.waitForResponse((r) => r.url().endsWith('/v1/chat/completions'));
    await prompt.press('Enter');
    const body = (await requested).postDataJSON();
    assert.is(body.model, 'cx/gen-6-terra');
    assert.is(body.stream, true);
    assert.equal(body.stream_options, { include_usage: true });
    assert.is(body.reasoning_effort, 'high');
    assert.equal(body.messages, [{ role: 'user', content: 'Hello from the browser test. Tell me about lighthouses.' }]);
    const res = await answered;
    assert.match(res.headers()['content-type'], /text\/event-stream/);

    const reply = page.locator('.message.assistant[data-state="done"]').last();
    await reply.waitFor();
    const text = (await reply.locator('.text').textContent()) ?? '';
    assert.ok(text.trim().length > 10, `a reply: ${text}`);
    assert.ok((await page.evaluate(() => (window as unknown as { textUpdates: number }).textUpdates)) > 1, 'the reply arrived in several chunks');
    assert.match((await reply.locator('.meta').textContent()) ?? '', /tokens/);
    assert.is(await page.locator('#log').getAttribute('aria-live'), 'polite');
    await page.waitForFunction((b) => Number(document.getElementById('quota')?.dataset.remaining) < b, before);
    assert.ok((await remaining(page)) < before, 'the quota was refreshed after the call');

    // A second turn carries the conversation.
    await prompt.fill('And one more thing?');
    const second = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    await page.getByRole('button', { name: 'Send' }).click();
    const turn2 = (await second).postDataJSON();
    assert.is(turn2.messages.length, 3);
    assert.is(turn2.messages[1].role, 'assistant');
    await page.locator('.message.assistant[data-state="done"]').nth(1).waitFor();
    await shot(page, 'chat-desktop.png');
  });

  test('image mode: a generated image renders in the frame with a download; a source file is edited', async () => {
    await page.getByLabel('Image', { exact: true }).check();
    await page.getByLabel('Model').selectOption('alpha-haiku-4.5');
    await page.getByLabel('Image size').selectOption('1536x1024');
    const before = await remaining(page);
    const prompt = page.getByLabel('Image prompt');
    await prompt.fill('a lighthouse at dusk');
    const requested = page.waitForRequest((r) => r.url().includes('/v1/images/'));
    await page.getByRole('button', { name: 'Create image' }).click();
    const req = await requested;
    assert.ok(req.url().endsWith('/v1/images/generations'), req.url());
    assert.equal({ ...req.postDataJSON() }, { model: 'alpha-haiku-4.5', prompt: 'a lighthouse at dusk', size: '1536x1024', n: 1, response_format: 'b64_json' });

    const first = page.locator('.message.assistant img.result').first();
    await first.waitFor({ timeout: 90_000 });
    await page.waitForFunction(
      () => {
        const i = document.querySelector<HTMLImageElement>('.message.assistant img.result');
        return !!i && i.complete && i.naturalWidth >= 1024;
      },
      null,
      { timeout: 90_000 },
    );
    const natural = await first.evaluate((i: HTMLImageElement) => ({ w: i.naturalWidth, h: i.naturalHeight, visible: i.getBoundingClientRect().width > 100 }));
    assert.equal(natural, { w: 1536, h: 1024, visible: true });
    assert.match((await first.getAttribute('alt')) ?? '', /lighthouse at dusk/);

    const link = page.getByRole('link', { name: 'Download image' }).first();
    assert.match((await link.getAttribute('download')) ?? '', /^tollgate-.*\.jpg$/);
    assert.match((await link.getAttribute('href')) ?? '', /^blob:/);
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const saved = await download.path();
    assert.ok(statSync(saved).size > 100_000, 'the download is the full image');
    assert.equal([...readFileSync(saved).subarray(0, 3)], [0xff, 0xd8, 0xff], 'a JPEG');
    await page.waitForFunction((b) => Number(document.getElementById('quota')?.dataset.remaining) < b, before);

    // Image to image: a file becomes a data URI sent to /v1/images/edits.
    const png = await sharp({ create: { width: 96, height: 96, channels: 3, background: { r: 200, g: 40, b: 40 } } })
      .png()
      .toBuffer();
    await page.getByLabel('Image file').setInputFiles({ name: 'red.png', mimeType: 'image/png', buffer: png });
    await page.locator('#source-preview').waitFor();
    await page.getByLabel('Image size').selectOption('1024x1024');
    await prompt.fill('make it warmer');
    const editRequested = page.waitForRequest((r) => r.url().includes('/v1/images/'));
    await prompt.press('Enter');
    const edit = await editRequested;
    assert.ok(edit.url().endsWith('/v1/images/edits'), edit.url());
    const editBody = edit.postDataJSON();
    assert.match(editBody.image, /^data:image\/png;base64,/);
    assert.is(editBody.size, '1024x1024');
    await page.waitForFunction(
      () => {
        const all = document.querySelectorAll<HTMLImageElement>('.message.assistant img.result');
        const i = all[1];
        return all.length === 2 && i.complete && i.naturalWidth >= 1024;
      },
      null,
      { timeout: 90_000 },
    );
    await page.locator('.message.assistant img.result').nth(1).scrollIntoViewIfNeeded();
    await shot(page, 'chat-image-desktop.png');
    await page.getByRole('button', { name: 'Remove source image' }).click();
  });

  test('errors read as messages with what to do: 401 for a bad key, 402 when the quota is used up', async () => {
    await saveKey(page, 'sk_svc_thisisnotarealkey0000000000');
    const alert = page.locator('#problem[role="alert"]');
    await alert.getByText('Your API key was not accepted').waitFor();
    assert.match((await alert.textContent()) ?? '', /HTTP 401/);
    assert.match((await alert.textContent()) ?? '', /What to do:/);
    await page.locator('#quota', { hasText: 'Key not accepted' }).waitFor();
    await shot(page, 'chat-401-desktop.png');

    await saveKey(page, tinyKey);
    await page.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
    assert.is(await alert.textContent(), '', 'the old error is cleared');
    await page.getByLabel('Chat', { exact: true }).check();
    await page.getByLabel('Model').selectOption('cx/gen-6-luna');
    const prompt = page.getByLabel('Your message');
    await prompt.fill('This needs more than ten tokens of quota to answer, surely.');
    await prompt.press('Enter');
    await alert.getByText('Your quota is used up').waitFor();
    const text = (await alert.textContent()) ?? '';
    assert.match(text, /You exceeded your current quota/);
    assert.match(text, /HTTP 402/);
    assert.match(text, /insufficient_quota/);
    assert.match(text, /extra tokens/);
    assert.is(await prompt.inputValue(), 'This needs more than ten tokens of quota to answer, surely.', 'the text is back in the box');
    assert.ok((await page.locator('.message.user.failed').count()) >= 1);
    await shot(page, 'chat-402-desktop.png');

    // The same for an image.
    await page.getByLabel('Image', { exact: true }).check();
    await page.getByLabel('Image prompt').fill('a small boat');
    await page.getByRole('button', { name: 'Create image' }).click();
    await alert.getByText('Your quota is used up').waitFor();

    await page.getByRole('button', { name: 'Dismiss this error' }).click();
    assert.is(await alert.textContent(), '');
    await page.getByLabel('Chat', { exact: true }).check();
    await saveKey(page, demoKey);
    await page.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
  });

  test("errors read as messages with what to do: 429 from the plan's call rate, 403, 502 and a stream cut mid-way", async () => {
    const actor = 'admin:test';
    await definePlan(gw.ledger, { planId: 'slow', name: 'Slow', quota: 1_000_000, validityDays: 30, requestsPerMinute: 1, models: ['*'] }, actor);
    const slow = await openAccount(gw.ledger, { name: 'Slow account' }, actor);
    await subscribe(gw.ledger, slow, 'slow', actor);
    const slowKey = (await issueKey(gw.ledger, slow, 'slow key', actor)).secret;
    await gw.ledger.caughtUp();
    await saveKey(page, slowKey);
    await page.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
    const alert = page.locator('#problem[role="alert"]');
    const prompt = page.getByLabel('Your message');
    // Wait for this reply, not an earlier one: on a busy machine the first call may still be
    // streaming (and the prompt closed to input) when an older message already reads "done".
    const done = page.locator('.message.assistant[data-state="done"]');
    const before = await done.count();
    await prompt.fill('first');
    await prompt.press('Enter');
    await page.waitForFunction((n) => document.querySelectorAll('.message.assistant[data-state="done"]').length > n, before, { timeout: 60_000 });
    await prompt.fill('second, too soon');
    await prompt.press('Enter');
    await alert.getByText('Too many requests').waitFor();
    assert.match((await alert.textContent()) ?? '', /HTTP 429/);
    assert.match((await alert.textContent()) ?? '', /Wait \d+ seconds? and try again/);
    await shot(page, 'chat-429-desktop.png');

    // Statuses the simulated upstream never produces, answered by the browser's network layer.
    const cases: Array<{ status: number; body: string; type: string; title: string }> = [
      {
        status: 403,
        type: 'application/json',
        title: 'This model is not available on your plan',
        body: JSON.stringify({
          error: {
            message: "The model 'x' does not exist or is not enabled in your plan.",
            type: 'invalid_request_error',
            param: 'model',
            code: 'model_not_found',
          },
        }),
      },
      {
        status: 502,
        type: 'application/json',
        title: 'The model provider failed',
        body: JSON.stringify({
          error: {
            message: 'The upstream model provider failed; nothing was charged. Try again.',
            type: 'upstream_error',
            param: null,
            code: 'upstream_error',
          },
        }),
      },
      {
        status: 200,
        type: 'text/event-stream',
        title: 'The model provider failed',
        body: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'Half a rep' } }] })}\n\ndata: ${JSON.stringify({ error: { message: 'The upstream model provider failed mid-stream; nothing was charged.', type: 'upstream_error', param: null, code: 'upstream_error' } })}\n\n`,
      },
    ];
    for (const c of cases) {
      await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: c.status, contentType: c.type, body: c.body }));
      await page
        .getByRole('button', { name: 'Dismiss this error' })
        .click()
        .catch(() => undefined);
      await prompt.fill(`case ${c.status}`);
      await prompt.press('Enter');
      await alert.getByText(c.title).waitFor();
      const text = (await alert.textContent()) ?? '';
      assert.match(text, /What to do:/);
      assert.match(text, c.status === 200 ? /HTTP 502 · upstream_error/ : new RegExp(`HTTP ${c.status}`));
      if (c.status === 200) assert.match((await page.locator('.message.assistant[data-state="failed"] .text').last().textContent()) ?? '', /Half a rep/);
      await page.unroute('**/v1/chat/completions');
    }
    await shot(page, 'chat-502-desktop.png');
    await saveKey(page, demoKey);
    await page.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
  });

  test('usage: per-day stacked bars split by model with today present, tables with totals, the subscription card with its credits', async () => {
    // Extra tokens with terms on the demo account: one for one model that expires in 30 days, one
    // for every model that never expires (a priority of its own), and one that has expired.
    const actor = 'admin:test';
    const inThirtyDays = new Date(Date.now() + 30 * 86_400_000).toISOString();
    const soon = new Date(Date.now() + 1000).toISOString();
    await grantExtra(gw.ledger, gw.demo!.accountId, 3000, 'launch', actor, { expiresAt: inThirtyDays, priority: 20, models: ['cx/gen-6-terra'] });
    await grantExtra(gw.ledger, gw.demo!.accountId, 700, 'goodwill', actor, { priority: 5 });
    await grantExtra(gw.ledger, gw.demo!.accountId, 400, 'trial', actor, { expiresAt: soon });
    await gw.ledger.caughtUp();
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(soon) - Date.now() + 50)));
    const api = await (await fetch(`${gw.baseUrl}/usage?daily=true&range=7d`, { headers: { authorization: `Bearer ${demoKey}` } })).json();
    const sub = await (await fetch(`${gw.baseUrl}/subscription`, { headers: { authorization: `Bearer ${demoKey}` } })).json();
    assert.ok(api.totals.billed > 0);

    await page.getByRole('link', { name: 'Usage' }).click();
    await page.waitForURL(/\/app\/usage/);
    await page.getByRole('radio', { name: '7 days', exact: true }).check();
    await page.waitForURL(/range=7d/);
    // The 30-day chart stays until the 7-day data has arrived and replaced it.
    await page.waitForFunction(() => document.querySelectorAll('svg.chart g.day').length === 7, undefined, { timeout: 30_000 });
    const day = page.locator(`svg.chart g.day[data-date="${today()}"]`);
    await day.locator('rect.seg').first().waitFor();
    assert.is(await page.locator('svg.chart g.day').count(), 7);
    assert.ok(await day.evaluate((g) => g.classList.contains('today')));
    const segModels = await day.locator('rect.seg').evaluateAll((rects) => rects.map((r) => r.getAttribute('data-model')).sort());
    assert.equal(segModels, ['alpha-haiku-4.5', 'cx/gen-6-terra'], 'one stacked segment per model used today');
    const barHeight = await day
      .locator('rect.seg')
      .first()
      .evaluate((r) => Number(r.getAttribute('height')));
    assert.ok(barHeight > 0);

    const total = Number(await page.locator('#total-billed').getAttribute('data-value'));
    assert.ok(total > 0, 'the table total is above zero');
    assert.is(total, api.totals.billed, 'the table total is the API total');
    assert.match((await page.locator('#days-table').textContent()) ?? '', new RegExp(`${today()} \\(today\\)`));
    assert.match((await page.locator('#models-table').textContent()) ?? '', /alpha-haiku-4\.5/);
    assert.equal(await page.locator('#legend li').allTextContents(), ['alpha-haiku-4.5', 'cx/gen-6-terra']);

    const card = page.locator('#subscription');
    assert.match((await card.textContent()) ?? '', /Demo/);
    assert.match((await card.textContent()) ?? '', /Active/);
    assert.match((await card.textContent()) ?? '', /Expires/);
    assert.is(await page.locator('#sub-remaining').textContent(), sub.remaining_tokens.toLocaleString('en-US'));

    // The credits with terms, as the API lists them: open ones in draw-down order, then the expired one.
    assert.equal(
      sub.extra_tokens.credits.map((c: any) => [c.granted, c.remaining, c.expires_at, c.priority, c.models, c.status]),
      [
        [3000, 3000, inThirtyDays, 20, ['cx/gen-6-terra'], 'active'],
        [700, 700, null, 5, null, 'active'],
        [400, 0, soon, 50, null, 'expired'],
      ],
    );
    const credits = page.locator('#sub-credits');
    await credits.locator('tbody tr').nth(2).waitFor();
    assert.is(await credits.locator('caption').textContent(), 'Credits with an expiry or a scope');
    const rows = await credits.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim())));
    const shownDay = (iso: string) => page.evaluate((t) => new Date(t).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric' }), iso);
    assert.equal(rows, [
      ['3,000 of 3,000', `${await shownDay(inThirtyDays)} (in 30 days)`, 'cx/gen-6-terra', '20', 'Active'],
      ['700 of 700', 'Never', 'All models', '5', 'Active'],
      ['0 of 400', `${await shownDay(soon)} (today)`, 'All models', '50', 'Expired'],
    ]);

    // The chart is one tab stop; the arrow keys read the days out.
    await page.locator('svg.chart').focus();
    await page.keyboard.press('End');
    assert.match((await page.locator('#chart-tip').textContent()) ?? '', /billed tokens — /);
    await shot(page, 'usage-desktop.png', true);

    for (const days of [30, 90]) {
      await page.getByRole('radio', { name: `${days} days`, exact: true }).check();
      await page.waitForFunction((n) => document.querySelectorAll('svg.chart g.day').length === n, days);
      await page.locator(`svg.chart g.day[data-date="${today()}"] rect.seg`).first().waitFor();
    }
  });

  test('usage: "Download CSV" saves the selected range per API key with the API\'s totals; a failure reads as a message', async () => {
    await page.getByRole('radio', { name: '7 days', exact: true }).check();
    await page.waitForURL(/range=7d/);
    const download = page.getByRole('button', { name: 'Download CSV' });
    const requested = page.waitForRequest((r) => r.url().includes('format=csv'));
    const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
    const req = await requested;
    assert.is(new URL(req.url()).search, '?group_by=key&format=csv&range=7d');
    assert.is(req.headers().authorization, `Bearer ${demoKey}`, 'the saved key, in the Authorization header');
    assert.not.ok(req.url().includes(demoKey), 'never in the URL');

    const api = await (await fetch(`${gw.baseUrl}/usage?group_by=key&range=7d`, { headers: { authorization: `Bearer ${demoKey}` } })).json();
    assert.is(file.suggestedFilename(), `usage-${api.account_id}-${api.range.start}-${api.range.end}-by-key.csv`);
    const text = readFileSync(await file.path(), 'utf8');
    const [header, ...rows] = text.replace(/\r\n$/, '').split('\r\n');
    assert.is(header, 'date,key_id,key_name,requests,prompt_tokens,completion_tokens,images,billed_tokens,adjustment_tokens,corrected_billed_tokens');
    assert.ok(rows.length > 0, 'a row for today at least');
    const columns = header.split(',');
    const numeric = columns.slice(3);
    const sums = Object.fromEntries(numeric.map((c) => [c, 0]));
    for (const row of rows) {
      const cells = csvCells(row);
      assert.is(cells.length, columns.length, row);
      const r = Object.fromEntries(columns.map((c, i) => [c, cells[i]]));
      assert.ok(r.date >= api.range.start && r.date <= api.range.end, r.date);
      assert.ok(
        api.keys.some((k: { key_id: string | null }) => (k.key_id ?? '') === r.key_id),
        r.key_id,
      );
      for (const c of numeric) sums[c] += Number(r[c]);
    }
    for (const c of numeric) assert.is(sums[c], api.totals[c], `the CSV's ${c} add up to the API's total`);
    assert.ok(sums.billed_tokens > 0);
    assert.match((await page.locator('#csv-status').textContent()) ?? '', /^Downloaded usage-.*-by-key\.csv \(\d+ rows?, the last 7 days\)\.$/);

    // A failure: what went wrong and what to do, in the page's alert region; no file.
    const csvUrl = /\/v1\/usage\?.*format=csv/;
    await page.route(csvUrl, (route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({ error: { message: 'The read models are behind; try again.', type: 'server_error', param: null, code: 'read_model_behind' } }),
      }),
    );
    let downloads = 0;
    const count = () => downloads++;
    page.on('download', count);
    await download.click();
    const alert = page.locator('#problem[role="alert"]');
    await alert.getByText('The CSV could not be downloaded: The gateway is busy or starting').waitFor();
    const said = (await alert.textContent()) ?? '';
    assert.match(said, /The read models are behind; try again\./);
    assert.match(said, /What to do:/);
    assert.match(said, /HTTP 503 · read_model_behind/);
    assert.is(await page.locator('#csv-status').textContent(), '');
    assert.ok(await download.isEnabled(), 'the button works again');
    await shot(page, 'usage-csv-error-desktop.png');
    await page.unroute(csvUrl);
    page.off('download', count);
    assert.is(downloads, 0, 'nothing was saved');

    // Once it works again the error goes away.
    await Promise.all([page.waitForEvent('download'), download.click()]);
    await page.waitForFunction(() => document.getElementById('problem')!.textContent === '');
  });

  test('a phone-sized screen (390x844): both pages fit the width and stay usable', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize(PHONE);
    await phone.goto(`${gw.url}/app/chat`);
    await phone.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
    await phone.getByLabel('Your message').fill('Hi from a phone');
    await phone.getByLabel('Your message').press('Enter');
    await phone.locator('.message.assistant[data-state="done"]').waitFor({ timeout: 60_000 });
    const chatWidth = await phone.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(chatWidth <= PHONE.width, `no sideways scrolling on the chat page (${chatWidth}px)`);
    await shot(phone, 'chat-phone.png');
    await phone.evaluate(() => window.scrollTo(0, 0));
    await shot(phone, 'chat-phone-top.png');

    await phone.goto(`${gw.url}/app/usage?range=30d`);
    await phone.locator(`svg.chart g.day[data-date="${today()}"] rect.seg`).first().waitFor();
    const usageWidth = await phone.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(usageWidth <= PHONE.width, `no sideways scrolling on the usage page (${usageWidth}px)`);
    const chartWidth = await phone.locator('svg.chart').evaluate((s) => s.getBoundingClientRect().width);
    assert.ok(chartWidth <= PHONE.width && chartWidth > 250, `the chart fits (${chartWidth}px)`);
    await shot(phone, 'usage-phone.png', true);
    await phone.emulateMedia({ colorScheme: 'dark' });
    await phone.goto(`${gw.url}/app/chat`);
    await phone.waitForFunction(() => !(document.getElementById('model') as HTMLSelectElement).disabled);
    await shot(phone, 'chat-phone-dark.png');
    await phone.close();
  });

  test("the key went only to this gateway's /v1 API, and the CSP blocked nothing the pages need", async () => {
    assert.ok(authorizedUrls.length > 5);
    for (const url of authorizedUrls) assert.ok(url.startsWith(`${gw.url}/v1/`), url);
    assert.equal(consoleProblems, []);
    assert.equal(pageErrors, []);
  });
}

test.run();
