// The console's Payments and Finance sections driven in Debian's chromium (playwright-core) against
// an in-process gateway on the simulated upstream: a plan priced and a pack offered, a payment
// recorded by hand and partly refunded, redemption codes minted (one redeemed through /v1), then
// the finance figures per day, the money reconciliation, upstream cost and margin and the journal,
// each equal to what the admin API answers for the calls this test made. Screenshots of every
// section at desktop and phone size go to /tmp/console-shots/. Without chromium: a SKIP line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { unmatchedDecider } from '../src/books/unmatched.ts';
import { streams } from '../src/ledger/events.ts';
import { metadataFor } from '../src/ledger/ledger.ts';
import { chromiumMissing, DESKTOP, launchChromium, PHONE } from './support/browser.ts';

const SHOTS = process.env.CONSOLE_SHOTS || '/tmp/console-shots';
const ADMIN = 'tg_admin_console_money_e2e_0123456789ab';
const MODEL = 'cx/gen-6-terra';
const SECTIONS = ['accounts', 'accounts/acme', 'plans', 'models', 'channels', 'payments', 'finance', 'corrections', 'verify'];

const skipReason = chromiumMissing();

let gw: TestGateway;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
let acmeKey = '';
const pageErrors: string[] = [];
const cspProblems: string[] = [];

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* CSV or a journal */
  }
  return { status: res.status, json, text };
}

async function chat(content: string) {
  const res = await fetch(`${gw.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acmeKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }] }),
  });
  assert.is(res.status, 200, await res.clone().text());
}

const value = async (p: Page, selector: string) => Number(await p.locator(selector).first().getAttribute('data-value'));

async function signIn(p: Page) {
  await p.getByLabel('Admin token').fill(ADMIN);
  await p.getByLabel(/Your name/).fill('money-operator');
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.getByRole('heading', { level: 1, name: 'Payments' }).waitFor();
}

if (skipReason) {
  console.log(`SKIP admin-console-money-e2e: ${skipReason}`);
  test.skip('console payments and finance in chromium');
} else {
  test.before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
    assert.is(
      (await api('POST', '/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 600, models: ['*'] })).status,
      201,
    );
    assert.is((await api('POST', '/accounts', { account_id: 'acme', name: 'Acme' })).status, 201);
    acmeKey = (await api('POST', '/accounts/acme/keys', { name: 'acme app' })).json.key;
    userDataDir = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'));
    context = await launchChromium(userDataDir);
    await context.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`));
    });
    context.on('console', (msg) => {
      if (msg.type() === 'error' && /Content Security Policy|Refused to|CSP violation/i.test(msg.text())) cspProblems.push(msg.text());
    });
    context.on('weberror', (e) => pageErrors.push(String(e.error())));
    page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${gw.url}/admin#/payments`);
    await signIn(page);
  });

  test.after(async () => {
    await context?.close().catch(() => undefined);
    await gw?.stop();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  });

  test('payments: a plan priced and a pack offered, as the price list says', async () => {
    await page.getByRole('link', { name: 'Payments' }).click();
    await page.getByRole('heading', { level: 1, name: 'Payments' }).waitFor();
    await page.waitForFunction(() => !!document.querySelector('#pp-plan option[value="pro"]'));
    await page.getByLabel('Plan to price').selectOption('pro');
    await page.getByLabel(/^Price per period/).fill('20.00');
    await page.getByRole('button', { name: 'Set plan price' }).click();
    await page.getByText('Plan pro priced at 20.00 USD a period.').waitFor();
    await page.getByLabel('Pack id').fill('p300');
    await page.getByLabel('Pack name').fill('Three hundred');
    await page.getByLabel('Tokens in the pack').fill('300');
    await page.getByLabel(/^Pack price/).fill('3.00');
    await page.getByRole('button', { name: 'Offer pack' }).click();
    await page.getByText(/Pack p300 offered/).waitFor();
    const prices = (await api('GET', '/prices')).json;
    assert.equal(
      prices.plans.map((p: any) => [p.plan_id, p.amount]),
      [['pro', 2000]],
    );
    assert.equal(
      prices.packs.map((p: any) => [p.pack_id, p.tokens, p.amount]),
      [['p300', 300, 300]],
    );
    assert.is(await value(page, '#plan-prices-table tr[data-plan-id="pro"] td.num'), 2000);
    assert.is(await value(page, '#packs-table tr[data-pack-id="p300"] td.num:nth-of-type(2)'), 300);
    // A bad price is refused before anything is sent, naming the field.
    await page.getByLabel('Plan to price').selectOption('pro');
    await page.getByLabel(/^Price per period/).fill('20.001');
    await page.getByRole('button', { name: 'Set plan price' }).click();
    await page.getByText(/Enter the price in USD/).waitFor();
    assert.is(await page.getByLabel(/^Price per period/).getAttribute('aria-invalid'), 'true');
    assert.is((await api('GET', '/prices')).json.plans[0].amount, 2000, 'nothing changed');
  });

  test('payments: a plan bought by a transfer recorded by hand, then 1.00 of it refunded; the table and the balance follow', async () => {
    await page.getByLabel('Account', { exact: true }).selectOption('acme');
    await page.getByLabel('Reference').fill('INV-2026-001');
    await page.getByLabel('Bought').selectOption('plan:pro');
    await page.getByLabel(/^Amount received/).fill('20.00');
    await page.getByLabel(/^Fee/).fill('0.88');
    await page.getByRole('button', { name: 'Record payment' }).click();
    await page.getByText(/^Recorded payment .*: 20\.00 USD for Plan pro\.$/).waitFor();
    const listed = (await api('GET', '/accounts/acme/payments')).json.data;
    assert.is(listed.length, 1);
    const paid = listed[0];
    assert.equal([paid.reference ?? paid.id, paid.amount, paid.fee, paid.item.tokens], ['INV-2026-001', 2000, 88, 1000]);
    const before = (await api('GET', '/accounts/acme/balance')).json;
    assert.equal([before.status, before.quota.remaining], ['active', 1000]);
    const row = `#payments-table tr[data-payment-id="${paid.id}"]`;
    assert.is(await value(page, `${row} [data-field="amount"]`), 2000);

    await page
      .locator(row)
      .getByRole('button', { name: `Refund payment ${paid.id}` })
      .click();
    await page.getByLabel(/^Amount to refund/).fill('1.00');
    await page.getByRole('button', { name: 'Refund payment', exact: true }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: `Refund 1.00 USD of payment ${paid.id}?` }).waitFor();
    await dialog.getByRole('button', { name: 'Refund' }).click();
    await page.getByText(`Refunded 1.00 USD of payment ${paid.id}: 50 tokens withdrawn.`).waitFor();
    const after = (await api('GET', '/accounts/acme/payments')).json.data[0];
    assert.equal([after.refunded, after.tokens_withdrawn], [100, 50], '1.00 at 2 cents a token');
    assert.is(await value(page, `${row} [data-field="refunded"]`), 100);
    assert.is(await value(page, `${row} [data-field="tokens_withdrawn"]`), 50);
    assert.is((await api('GET', '/accounts/acme/balance')).json.remaining_tokens, before.remaining_tokens - 50);

    // The payment's invoice and the refund's credit note, as the API lists them; the credit note as a PDF.
    const documents = page.locator('#invoices-table tr[data-document]');
    for (const until = Date.now() + 15_000; Date.now() < until;) {
      await page.goto(`${gw.url}/admin#/plans`);
      await page.goto(`${gw.url}/admin#/payments`);
      await page.locator('#invoices-table').waitFor();
      if ((await documents.count()) === 2) break;
    }
    const issued = (await api('GET', '/invoices?account_id=acme')).json.data as Array<{ object: string; number: string; total: number }>;
    assert.equal(
      issued.map((d) => [d.object, d.total]),
      [
        ['credit_note', 100],
        ['invoice', 2000],
      ],
    );
    assert.equal(
      await documents.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-document'))),
      issued.map((d) => d.number),
    );
    const note = page.locator(`#invoices-table tr[data-document="${issued[0].number}"]`);
    assert.match((await note.textContent()) ?? '', new RegExp(`Credit note for ${issued[1].number}.*1\\.00`));
    const [pdf] = await Promise.all([page.waitForEvent('download'), note.getByRole('button', { name: `Download ${issued[0].number} as a PDF` }).click()]);
    assert.is(pdf.suggestedFilename(), `${issued[0].number}.pdf`);
    assert.is(
      readFileSync(await pdf.path())
        .subarray(0, 5)
        .toString(),
      '%PDF-',
    );
  });

  test('redemption codes: minted, shown once, one redeemed through /v1', async () => {
    await page.getByLabel('Number of codes').fill('3');
    await page.getByLabel('Each code gives').selectOption('pack:p300');
    await page.getByLabel(/^Sold at, each/).fill('2.50');
    await page.getByRole('button', { name: 'Mint codes' }).click();
    const box = page.getByLabel('Codes, one a line');
    await box.waitFor();
    const codes = (await box.inputValue()).split('\n');
    assert.is(codes.length, 3);
    for (const c of codes) assert.match(c, /^tgc_/);
    await page.screenshot({ path: join(SHOTS, 'payments-codes-desktop.png'), fullPage: true });
    const redeemed = await fetch(`${gw.baseUrl}/redemptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acmeKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ code: codes[0] }),
    });
    assert.is(redeemed.status, 201, await redeemed.clone().text());
    assert.is((await api('GET', '/accounts/acme/balance')).json.extra_tokens.remaining, 300);
    await page.getByRole('button', { name: 'Done: I have saved them' }).click();
    assert.not.ok((await page.content()).includes(codes[1]), 'the codes are gone from the page');
    assert.is(await value(page, '#code-batches-table td.num'), 3);
  });

  test("unmatched payments: a processor's payment tied to nothing is listed as the API lists it", async () => {
    // Recorded as the Stripe webhook records one (its own path is tested in payments-stripe).
    await gw.ledger.command(
      unmatchedDecider,
      streams.unmatchedPayments(),
      {
        type: 'Record',
        payment: {
          processor: 'stripe',
          processorPaymentId: 'pi_stray_1',
          amount: 1234,
          currency: 'USD',
          reason: 'no account in the metadata',
          details: { pack_id: 'p300' },
        },
      },
      metadataFor('stripe:webhook'),
    );
    const listed = (await api('GET', '/unmatched-payments')).json.data;
    assert.is(listed.length, 1);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Payments' }).waitFor();
    const row = page.locator('#unmatched-table tr[data-payment-id="pi_stray_1"]');
    await row.waitFor();
    assert.is(Number(await row.locator('[data-col="amount"]').getAttribute('data-value')), listed[0].amount);
    assert.match(await row.innerText(), /no account in the metadata/);
    assert.match(await row.innerText(), /pack_id: p300/);
  });

  test("finance: revenue, deferred and breakage per day, the reconciliation, cost and margin and the journal equal the API's", async () => {
    for (const q of ['What is a toll road?', 'Who pays for bridges?']) await chat(q);
    const rows = (await api('GET', `/finance/report?from=2000-01-01&to=2000-01-01`)).json;
    assert.ok(rows.object === 'finance_report');
    const day = new Date().toISOString().slice(0, 10);
    const channels = [
      ...new Set(((await api('GET', `/finance/report?from=${day}&to=${day}`)).json.rows as any[]).filter((r) => r.model === MODEL).map((r) => r.channel)),
    ];
    assert.ok(channels.length > 0);
    for (const channel of channels)
      assert.is((await api('POST', '/cost-rates', { channel, effective_at: '2000-01-01T00:00:00Z', input: '1000', output: '2000' })).status, 201);

    await page.getByRole('link', { name: 'Finance' }).click();
    await page.getByRole('heading', { level: 1, name: 'Finance' }).waitFor();
    await page.getByLabel('From (UTC day)').fill(day);
    await page.getByLabel('To (UTC day, included)').fill(day);
    const sent = page.waitForResponse((r) => r.url().includes(`/admin/v1/finance/report?from=${day}&to=${day}`));
    await page.getByRole('button', { name: 'Show' }).click();
    await sent;
    const report = (await api('GET', `/finance/report?from=${day}&to=${day}`)).json;
    const recon = (await api('GET', `/finance/reconciliation?from=${day}&to=${day}`)).json;
    const sum = (k: string) => report.rows.reduce((s: number, r: any) => s + r[k], 0);
    assert.ok(sum('revenue') > 0, 'the calls recognised revenue');
    assert.ok(report.totals.upstream_cost > 0, 'the calls cost something upstream');
    const tr = `#finance-days-table tr[data-day="${day}"]`;
    await page.locator(tr).waitFor();
    assert.is(await value(page, `${tr} [data-col="revenue"]`), sum('revenue'));
    assert.is(await value(page, `${tr} [data-col="breakage"]`), sum('breakage'));
    const deferred = report.deferred.filter((d: any) => d.day === day).reduce((s: number, d: any) => s + d.deferred, 0);
    assert.ok(deferred > 0, 'unused paid tokens are deferred');
    assert.is(await value(page, `${tr} [data-col="deferred"]`), deferred);
    // The charts draw the same figures.
    assert.is(Number(await page.locator(`#revenue-chart g.day[data-date="${day}"]`).getAttribute('data-billed')), sum('revenue') + sum('breakage'));
    assert.is(Number(await page.locator(`#deferred-chart g.day[data-date="${day}"]`).getAttribute('data-billed')), deferred);
    // Cost and margin per day: the table's columns and the chart (cost, and the margin above it when positive).
    assert.is(await value(page, `${tr} [data-col="upstream_cost"]`), sum('upstream_cost'));
    assert.is(await value(page, `${tr} [data-col="margin"]`), sum('margin'));
    assert.is(sum('margin'), sum('revenue') - sum('upstream_cost'), 'margin is revenue less cost');
    assert.is(
      Number(await page.locator(`#cost-chart g.day[data-date="${day}"]`).getAttribute('data-billed')),
      sum('upstream_cost') + Math.max(0, sum('margin')),
    );
    // The reconciliation, per account and in total.
    for (const line of [...recon.lines, { ...recon.total, account_id: '(total)' }]) {
      const row = `#money-recon-table tr[data-account="${line.account_id}"]`;
      for (const col of ['payments', 'refunds', 'revenue', 'refunded_revenue', 'breakage', 'deferred_change', 'difference'])
        assert.is(await value(page, `${row} [data-col="${col}"]`), line[col], `${line.account_id} ${col}`);
    }
    assert.is(recon.total.payments, 2000 + 250, 'the manual payment and the redeemed code');
    assert.is(recon.total.refunds, 100);
    assert.is(recon.total.difference, 0);
    // Upstream cost and margin per model and channel.
    for (const channel of channels) {
      const mine = report.rows.filter((r: any) => r.model === MODEL && r.channel === channel);
      const row = `#cost-table tr[data-model="${MODEL}"][data-channel="${channel}"]`;
      assert.is(
        await value(page, `${row} [data-col="upstream_cost"]`),
        mine.reduce((s: number, r: any) => s + r.upstream_cost, 0),
      );
      assert.is(
        await value(page, `${row} [data-col="margin"]`),
        mine.reduce((s: number, r: any) => s + r.margin, 0),
      );
    }
    await page.screenshot({ path: join(SHOTS, 'finance-desktop.png'), fullPage: true });

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download journal' }).click()]);
    assert.is(download.suggestedFilename(), `journal-${day}-to-${day}.journal`);
    const journal = readFileSync(await download.path(), 'utf8');
    assert.is(journal, (await api('GET', `/finance/journal?from=${day}&to=${day}&format=hledger`)).text);
    assert.match(journal, /revenue:recognised/);
  });

  test('finance: an operator closes last month from the console, is told why it cannot be closed twice, and reopens it with a reason', async () => {
    const now = new Date();
    const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)).toISOString().slice(0, 7);
    await page.getByRole('link', { name: 'Finance' }).click();
    await page.getByRole('heading', { level: 2, name: 'Month close' }).waitFor();
    await page.getByLabel('Month', { exact: true }).fill(month);
    await page.getByRole('button', { name: 'Close month' }).click();
    const row = page.locator(`#periods-table tr[data-period="${month}"]`);
    await page.locator(`#periods-table tr[data-period="${month}"][data-status="closed"]`).waitFor();
    const listed = (await api('GET', '/finance/periods')).json.data.find((p: any) => p.period === month);
    assert.is(listed.status, 'closed');
    assert.match(await row.innerText(), listed.closed_by);

    await page.getByRole('button', { name: 'Close month' }).click();
    await page.getByText(`${month} is already closed.`).waitFor();

    await row.getByRole('button', { name: `Reopen ${month}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: `Reopen ${month}?` }).waitFor();
    await dialog.getByLabel(/Reason/).fill('a late bill to book');
    await dialog.getByRole('button', { name: 'Reopen month' }).click();
    await page.locator(`#periods-table tr[data-period="${month}"][data-status="reopened"]`).waitFor();
    const reopened = (await api('GET', '/finance/periods')).json.data.find((p: any) => p.period === month);
    assert.is(reopened.reopen_reason, 'a late bill to book');
    assert.match(await row.innerText(), 'a late bill to book');
  });

  test('every section, desktop and phone: no sideways scrolling on a phone, no CSP report, no script error', async () => {
    for (const [size, viewport] of [
      ['desktop', DESKTOP],
      ['phone', PHONE],
    ] as const) {
      await page.setViewportSize(viewport);
      for (const section of SECTIONS) {
        await page.goto(`${gw.url}/admin#/${section}`);
        await page.locator('#view h1').waitFor();
        await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'));
        if (size === 'phone') {
          const width = await page.evaluate(() => document.documentElement.scrollWidth);
          assert.ok(width <= PHONE.width, `${section} fits a phone (${width}px)`);
        }
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: join(SHOTS, `${section.replace('/', '-')}-${size}.png`), fullPage: true });
      }
    }
    assert.equal(cspProblems, []);
    assert.equal(pageErrors, []);
  });
}

test.run();
