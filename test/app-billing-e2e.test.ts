// Buying in /app, driven in Debian's chromium through playwright-core: an owner signed in by the
// email link (mailed through a real SMTP server on loopback; the session cookie set in the
// browser) opens Billing, buys a pack through Stripe Checkout (the local Stripe double's page, the
// notice signed with the official `stripe` library, back to /app/billing), pays for a pack offered in
// another currency than the settlement one, redeems a code,
// downloads a receipt and the statement, and sees the balance grow. A developer of the same account
// sees no Billing at all. Screenshots go to artifacts/app/ (APP_SHOTS overrides). Without chromium
// the file prints a SKIP line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { chromiumMissing, openBrowser, PHONE, type Browser, becomesVisible } from './support/browser.ts';
import type { StripeDouble } from './support/stripe-double.ts';
import { startBillingSetup, type BillingSetup } from './support/billing.ts';
import { signInByLink, type Person } from './support/sessions.ts';
import { call, type TestAccount } from './support/http.ts';
import type { TestGateway } from './support/gateway.ts';
import { pdfText } from './support/pdf-text.ts';

const ADMIN = 'app-billing-e2e-admin-token-0123456789abcdef';
const CHECKOUT = 'https://checkout.stripe.test/';
const skipReason = chromiumMissing();

let setup: BillingSetup;
let stripe: StripeDouble;
let gw: TestGateway;
let acme: TestAccount;
let browser: Browser;
let page: Page;
let code = '';

/** The balance the page shows (the subscription card's remaining tokens). */
const shownBalance = async (p: Page) => Number(((await p.locator('#sub-remaining').textContent()) ?? '').replace(/,/g, ''));

async function signInBrowser(person: Person): Promise<void> {
  await browser.context.clearCookies();
  await browser.context.addCookies([{ name: 'tollgate_session', value: person.cookie, url: `${gw.url}/app`, httpOnly: true, sameSite: 'Strict' }]);
}

if (skipReason) {
  console.log(`SKIP app-billing-e2e: ${skipReason}`);
  test.skip('buying in /app in chromium');
} else {
  test.before(async () => {
    setup = await startBillingSetup(ADMIN, [
      ['owner@acme.test', 'owner'],
      ['dev@acme.test', 'developer'],
    ]);
    ({ stripe, gw, acme } = setup);
    const batch = await setup.admin('/code-batches', { count: 1, pack_id: 'p300', amount: 250 });
    code = batch.json.codes[0];
    browser = await openBrowser();
    page = browser.page;
    // Stripe's hosted Checkout, played by the double: a page with a Pay button; paying completes the
    // session on the double, delivers Stripe's signed notice to the gateway, and sends the browser
    // to the session's success URL, as Stripe does.
    await browser.context.route(`${CHECKOUT}**`, async (route) => {
      const url = new URL(route.request().url());
      const sessionId = url.pathname.split('/').pop()!;
      const session = stripe.sessions.get(sessionId);
      if (!session) return route.fulfill({ status: 404, body: 'no such session' });
      if (url.pathname.startsWith('/cancel/')) return route.fulfill({ status: 303, headers: { location: session.cancelUrl! } });
      if (!url.pathname.startsWith('/paid/')) {
        const body = `<!doctype html><title>Checkout</title><p>Pay ${session.amount} ${session.currency}</p><a id="pay" href="${CHECKOUT}paid/${sessionId}">Pay</a> <a id="cancel" href="${CHECKOUT}cancel/${sessionId}">Back</a>`;
        return route.fulfill({ status: 200, contentType: 'text/html', body });
      }
      const completed = session.mode === 'setup' ? stripe.saveCard(sessionId, { brand: 'visa', last4: '4242' }) : stripe.pay(sessionId);
      const { body, signature } = stripe.signed(stripe.event('checkout.session.completed', completed));
      const notice = await call(gw, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
      assert.is(notice.json?.outcome, 'recorded', notice.text);
      return route.fulfill({ status: 303, headers: { location: session.successUrl } });
    });
  });

  test.after(async () => {
    await browser?.close();
    await setup?.stop();
  });

  test('an owner buys a pack through Stripe Checkout and comes back to /app/billing with the tokens added', async () => {
    await signInBrowser(await signInByLink(gw, setup.smtp, 'owner@acme.test'));
    await page.goto(`${gw.url}/app/home`);
    await page.getByRole('link', { name: 'Billing' }).click();
    await page.waitForURL(/\/app\/billing/);
    await page.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
    await page.locator('#sub-remaining').waitFor();
    const before = await shownBalance(page);
    assert.ok(before > 0, `a balance: ${before}`);
    const pack = page.locator('#packs li[data-pack="p300"]');
    assert.match((await pack.textContent()) ?? '', /300 tokens.*3\.00 USD/);
    await browser.shots(page, 'billing-prices');

    const checkout = page.waitForRequest((r) => r.url().endsWith(`/app/api/accounts/${acme.accountId}/checkout`));
    await page.getByRole('button', { name: 'Buy 300 tokens for 3.00 USD' }).click();
    assert.equal((await checkout).postDataJSON(), { pack_id: 'p300' });
    assert.ok((await checkout).headers()['x-csrf-token'], 'the CSRF token goes with the purchase');
    await page.waitForURL(`${CHECKOUT}**`);
    await page.locator('#pay').click();
    await page.waitForURL(/\/app\/billing/);
    const status = page.locator('#checkout-status');
    await status.getByText('Payment confirmed: 300 tokens added.').waitFor();
    assert.not.match(page.url(), /checkout=/, 'the outcome is taken out of the address');
    await page.waitForFunction((b) => Number(document.getElementById('sub-remaining')?.textContent?.replace(/,/g, '')) === b + 300, before);
    const row = page.locator('#payments-table tbody tr').first();
    assert.match((await row.textContent()) ?? '', /Pack p300 · 300 tokens.*Card \(Stripe\).*3\.00 USD/);
    await browser.shots(page, 'billing-paid');
  });

  test('the owner redeems a code (a wrong one reads as a message), downloads a receipt and a statement', async () => {
    const before = await shownBalance(page);
    const alert = page.locator('#problem[role="alert"]');
    await page.getByLabel('Code', { exact: true }).fill('tgc_nothing000_aaaaaaaaaaaaaaaaaaaa');
    await page.getByRole('button', { name: 'Redeem' }).click();
    await alert.getByText('This code is not valid, has expired or was already redeemed.').waitFor();
    assert.match((await alert.textContent()) ?? '', /What to do:.*HTTP 400 · invalid_code/);
    await browser.shots(page, 'billing-bad-code');
    await page.getByRole('button', { name: 'Dismiss this error' }).click();

    await page.getByLabel('Code', { exact: true }).fill(code);
    await page.getByRole('button', { name: 'Redeem' }).click();
    await page.locator('#redeem-status', { hasText: 'Code redeemed: 300 tokens added.' }).waitFor();
    await page.waitForFunction((b) => Number(document.getElementById('sub-remaining')?.textContent?.replace(/,/g, '')) === b + 300, before);
    assert.is(await page.locator('#payments-table tbody tr').count(), 2);
    assert.match((await page.locator('#payments-table tbody tr').first().textContent()) ?? '', /Code.*2\.50 USD/);

    const card = page.locator('#payments-table tbody tr', { hasText: 'Card (Stripe)' });
    const paymentId = await card.getAttribute('data-payment');
    const [receipt] = await Promise.all([page.waitForEvent('download'), card.getByRole('button', { name: /Download the receipt/ }).click()]);
    assert.is(receipt.suggestedFilename(), `receipt-${paymentId}.html`);
    const html = readFileSync(await receipt.path(), 'utf8');
    assert.ok(html.includes(paymentId!) && html.includes('3.00 USD') && html.includes(acme.accountId), html);
    await page.locator('#receipt-status', { hasText: `Downloaded receipt-${paymentId}.html.` }).waitFor();

    // The card payment's invoice (a redeemed code has none: it was invoiced where it was sold), as a PDF.
    const invoiceRow = page.locator('#invoices-table tbody tr[data-document]');
    for (const until = Date.now() + 15_000; (await invoiceRow.count()) === 0 && Date.now() < until;) {
      await page.locator('#billing-refresh').click();
      await page.waitForTimeout(300);
    }
    assert.is(await invoiceRow.count(), 1);
    const number = (await invoiceRow.getAttribute('data-document'))!;
    assert.match((await invoiceRow.textContent()) ?? '', /Invoice.*3\.00 USD/);
    const [pdf] = await Promise.all([page.waitForEvent('download'), invoiceRow.getByRole('button', { name: `Download ${number} as a PDF` }).click()]);
    assert.is(pdf.suggestedFilename(), `${number}.pdf`);
    const text = (await pdfText(readFileSync(await pdf.path()))).replace(/\s+/g, ' ');
    assert.ok(text.includes(`Invoice ${number}`) && text.includes('Total paid: 3.00 USD') && text.includes(`Account ${acme.accountId}`), text);
    await page.locator('#invoice-status', { hasText: `Downloaded ${number}.pdf.` }).waitFor();

    // Some usage first, so the statement has a line.
    const used = await call(gw, '/v1/chat/completions', {
      key: acme.key,
      body: { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'hello' }], max_tokens: 10 },
    });
    assert.is(used.status, 200, used.text);
    await gw.ledger.caughtUp();
    const [statement] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download statement' }).click()]);
    assert.is(statement.suggestedFilename(), `statement-${acme.accountId}.csv`);
    const csv = readFileSync(await statement.path(), 'utf8');
    assert.ok(csv.includes(used.headers.get('x-request-id')!), csv);
    const [usage] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download usage CSV' }).click()]);
    assert.match(usage.suggestedFilename(), /-by-key\.csv$/);
    assert.match(readFileSync(await usage.path(), 'utf8'), new RegExp(acme.keyId));
  });

  test("a plan's Checkout left without paying comes back saying nothing was charged", async () => {
    // The balance after the last test's call.
    await page.reload();
    await page.locator('#sub-remaining').waitFor();
    const before = await shownBalance(page);
    const payments = await page.locator('#payments-table tbody tr').count();
    await page.getByLabel('Renew the plan every period').uncheck();
    const checkout = page.waitForRequest((r) => r.url().endsWith(`/app/api/accounts/${acme.accountId}/checkout`));
    await page.getByRole('button', { name: `Buy the Plan ${acme.planId.slice(5)} plan for 20.00 USD` }).click();
    assert.equal((await checkout).postDataJSON(), { plan_id: acme.planId, recurring: false });
    await page.waitForURL(`${CHECKOUT}**`);
    await page.locator('#cancel').click();
    await page.waitForURL(/\/app\/billing/);
    await page.locator('#checkout-status', { hasText: 'Checkout was cancelled: nothing was charged.' }).waitFor();
    await page.locator('#sub-remaining').waitFor();
    assert.is(await shownBalance(page), before);
    assert.is(await page.locator('#payments-table tbody tr').count(), payments);
  });

  test('a pack offered in euros: the owner pays in EUR (refused, naming why, until a rate is recorded), sees the euro price, checks out in EUR and the payment lists what it was booked as', async () => {
    // The gateway settles in USD: the operator offers the pack in euros beside its dollar price.
    const offered = await setup.admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 280, currency: 'EUR' }, 'PUT');
    assert.is(offered.status, 200, offered.text);
    await page.goto(`${gw.url}/app/billing`);
    await page.locator('#sub-remaining').waitFor();
    const before = await shownBalance(page);
    const payIn = page.getByLabel('Pay in');
    assert.equal(await payIn.locator('option').allTextContents(), ['USD', 'EUR'], 'the settlement currency first');
    assert.is(await payIn.inputValue(), 'USD');
    const pack = page.locator('#packs li[data-pack="p300"]');
    assert.match((await pack.textContent()) ?? '', /3\.00 USD/);

    await payIn.selectOption('EUR');
    await pack.getByText('2.80 EUR').waitFor();
    // The plan is not sold in euros: it says so and cannot be bought in them.
    const plan = page.locator(`#plans li[data-plan="${acme.planId}"]`);
    assert.match((await plan.textContent()) ?? '', /Not sold in EUR/);
    assert.ok(await plan.getByRole('button', { name: /^Buy / }).isDisabled());
    await browser.shots(page, 'billing-pay-in-eur');

    // No exchange rate yet: the server refuses (409, naming the currency) and the page shows its message.
    const alert = page.locator('#problem[role="alert"]');
    const refusedRequest = page.waitForRequest((r) => r.url().endsWith(`/app/api/accounts/${acme.accountId}/checkout`));
    await page.getByRole('button', { name: 'Buy 300 tokens for 2.80 EUR' }).click();
    assert.equal((await refusedRequest).postDataJSON(), { pack_id: 'p300', currency: 'EUR' });
    await alert.locator('.problem-message').waitFor();
    assert.match((await alert.textContent()) ?? '', /exchange rate.*EUR|EUR.*exchange rate/i);
    assert.match((await alert.textContent()) ?? '', /HTTP 409/);
    await page.getByRole('button', { name: 'Dismiss this error' }).click();

    const rate = await setup.admin('/exchange-rates/EUR', { rate: '1.0513', source: 'ECB reference rate' }, 'PUT');
    assert.is(rate.status, 200, rate.text);
    // The session's answer, read on its way to the page (the page leaves for Stripe at once).
    const checkoutPath = `**/app/api/accounts/${acme.accountId}/checkout`;
    let answer: { status: number; json: any } | null = null;
    await page.route(checkoutPath, async (route) => {
      const response = await route.fetch();
      answer = { status: response.status(), json: await response.json() };
      await route.fulfill({ response });
    });
    const checkout = page.waitForRequest((r) => r.url().endsWith(`/app/api/accounts/${acme.accountId}/checkout`));
    await page.getByRole('button', { name: 'Buy 300 tokens for 2.80 EUR' }).click();
    assert.equal((await checkout).postDataJSON(), { pack_id: 'p300', currency: 'EUR' });
    await page.waitForURL(`${CHECKOUT}**`);
    await page.unroute(checkoutPath);
    const session = answer as { status: number; json: any } | null;
    assert.equal([session?.status, session?.json.currency, session?.json.amount], [201, 'EUR', 280]);
    assert.is(stripe.sessions.get(session!.json.id)?.amount, 280);
    assert.match((await page.locator('p').textContent()) ?? '', /^Pay 280 eur$/i, "Stripe's page asks for 2.80 EUR");
    await page.locator('#pay').click();
    await page.waitForURL(/\/app\/billing/);
    await page.locator('#checkout-status').getByText('Payment confirmed: 300 tokens added.').waitFor();
    await page.waitForFunction((b) => Number(document.getElementById('sub-remaining')?.textContent?.replace(/,/g, '')) === b + 300, before);
    // Booked in dollars at the day's rate: 280 × 1.0513 = 294.36, 2.94 USD.
    const row = page.locator('#payments-table tbody tr').first();
    assert.match((await row.textContent()) ?? '', /Pack p300 · 300 tokens.*Card \(Stripe\).*paid 2\.80 EUR \(booked 2\.94 USD at 1\.0513\)/);
    assert.is(await page.getByLabel('Pay in').inputValue(), 'USD', 'back on the page, the settlement currency again');
    await browser.shots(page, 'billing-paid-in-eur');
  });

  test('the owner fills in the billing details: a tax id in the wrong format reads as a message naming it; saved, they come back on reload and the operator sees them', async () => {
    await page.goto(`${gw.url}/app/billing`);
    await page.locator('#details-saved', { hasText: 'No billing details yet' }).waitFor();
    await page.getByLabel('Legal name').fill('Acme Rechenzentrum GmbH');
    await page.getByLabel('Address', { exact: true }).fill('Hauptstraße 5');
    await page.getByLabel('City').fill('Berlin');
    await page.getByLabel('Postal code').fill('10115');
    await page.getByLabel('Country').fill('DE');
    await page.getByLabel('Tax id').fill('DE 1234');
    await page.getByLabel('Invoice email').fill('invoices@acme.test');
    await page.getByRole('button', { name: 'Save billing details' }).click();
    const alert = page.locator('#problem[role="alert"]');
    await alert.waitFor();
    assert.match((await alert.textContent()) ?? '', /tax_id/);
    assert.is((await setup.admin(`/accounts/${acme.accountId}/billing-profile`)).json.profile, null, 'nothing written');
    await page.getByRole('button', { name: 'Dismiss this error' }).click();
    await page.getByLabel('Tax id').fill('DE 123 456 789');
    await page.getByRole('button', { name: 'Save billing details' }).click();
    await page.locator('#details-status', { hasText: 'Billing details saved.' }).waitFor();
    await page.reload();
    await page
      .locator('#details-saved', { hasText: 'Invoices are made out to Acme Rechenzentrum GmbH, a business (tax id DE123456789, format checked)' })
      .waitFor();
    assert.is(await page.getByLabel('Tax id').inputValue(), 'DE123456789');
    const seen = await setup.admin(`/accounts/${acme.accountId}/billing-profile`);
    assert.is(seen.json.profile.country, 'DE');
    assert.ok(seen.json.updated_by.endsWith(':owner@acme.test'), seen.json.updated_by);
    await browser.shots(page, 'billing-details');
  });

  test('the owner sets balance alerts (a wrong number reads as a message naming it), saves a card through Checkout in setup mode and turns auto top-up on; a call that crosses an alert lists it as mailed', async () => {
    await page.goto(`${gw.url}/app/billing`);
    await page.locator('#alerts-set', { hasText: 'No alerts set.' }).waitFor();
    await page.getByLabel('Mail us when the tokens left fall below').fill('500 0');
    await page.getByRole('button', { name: 'Save alerts' }).click();
    const alert = page.locator('#problem[role="alert"]');
    await alert.waitFor();
    assert.match((await alert.textContent()) ?? '', /thresholds_tokens/);
    await page.getByRole('button', { name: 'Dismiss this error' }).click();
    const left = (await call(gw, '/v1/balance-alerts', { key: acme.key })).json.tokens_left as number;
    await page.getByLabel('Mail us when the tokens left fall below').fill(`${left - 5}`);
    await page.getByRole('button', { name: 'Save alerts' }).click();
    await page.locator('#alerts-status', { hasText: `Saved. Alerts at ${(left - 5).toLocaleString('en-US')} tokens left.` }).waitFor();

    // No card yet: auto top-up cannot be set. Saving one goes through Checkout (setup mode) and back.
    await page.locator('#top-up-card', { hasText: 'No card saved.' }).waitFor();
    assert.ok(await page.getByRole('button', { name: 'Save auto top-up' }).isDisabled());
    const cardRequest = page.waitForRequest((r) => r.url().endsWith(`/app/api/accounts/${acme.accountId}/auto-top-up/card`));
    await page.getByRole('button', { name: 'Save a card' }).click();
    await cardRequest;
    await page.waitForURL(`${CHECKOUT}**`);
    await page.locator('#pay').click();
    await page.waitForURL(/\/app\/billing/);
    await page.locator('#top-up-card-status', { hasText: 'Card saved.' }).waitFor();
    await page.locator('#top-up-card', { hasText: 'VISA •••• 4242' }).waitFor();
    await page.getByLabel('Top up when the tokens left fall below').fill('100');
    await page.getByLabel('Pack to buy').selectOption('p300');
    await page.getByRole('button', { name: 'Save auto top-up' }).click();
    await page
      .locator('#top-up-status', { hasText: 'Saved. On: when the tokens left fall below 100, 300 tokens (3.00 USD) is bought with the card.' })
      .waitFor();
    const shown = (await call(gw, '/v1/auto-top-up', { key: acme.key })).json;
    assert.equal([shown.enabled, shown.threshold_tokens, shown.pack_id], [true, 100, 'p300']);

    // A call crosses the alert: the owner (the one member with billing) is mailed, and the page lists it.
    const before = setup.smtp.mails.length;
    const r = await call(gw, '/v1/chat/completions', {
      key: acme.key,
      body: { model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'Toll roads?' }], max_tokens: 20 },
    });
    assert.is(r.status, 200, r.text);
    const mail = await setup.smtp.mailTo('owner@acme.test', before);
    assert.match(mail.subject, new RegExp(`fewer than ${(left - 5).toLocaleString('en-US')} tokens left`));
    for (let i = 0; i < 50 && !(await page.locator('#alerts-raised', { hasText: 'mailed to 1 person' }).count()); i++) {
      await page.locator('#billing-refresh').click();
      await page.waitForTimeout(200);
    }
    await page.locator('#alerts-raised', { hasText: `below ${(left - 5).toLocaleString('en-US')}` }).waitFor();
    await page.locator('#alerts-raised', { hasText: 'mailed to 1 person' }).waitFor();
    await browser.shots(page, 'billing-low-balance');
  });

  test('a phone-sized screen (390x844): the billing page fits the width', async () => {
    await page.setViewportSize(PHONE);
    await page.reload();
    await page.locator('#sub-remaining').waitFor();
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= PHONE.width, `no sideways scrolling (${width}px)`);
    assert.ok(await becomesVisible(page.getByRole('button', { name: 'Buy 300 tokens for 3.00 USD' })));
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  test('a developer of the account sees no Billing, and the page does not open for them', async () => {
    await signInBrowser(await signInByLink(gw, setup.smtp, 'dev@acme.test'));
    await page.goto(`${gw.url}/app/home`);
    await page.locator('.shell-bar').waitFor();
    assert.is(await page.getByRole('link', { name: 'Billing' }).count(), 0);
    await page.goto(`${gw.url}/app/billing`);
    await page.locator('.shell-bar').waitFor();
    assert.not.match(page.url(), /\/app\/billing/, 'sent to a page the role may use');
    assert.is(await page.locator('#billing-heading').count(), 0);
    assert.is(await page.getByRole('button', { name: /^Buy / }).count(), 0);
    await browser.shots(page, 'billing-developer');
  });

  test('the CSP blocked nothing and no page had an error', async () => {
    assert.equal(browser.problems, []);
  });
}

test.run();
