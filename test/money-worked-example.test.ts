// The worked example of docs/payments.md, "Two customers in two countries", performed as written
// against an `npm start` process (Stripe through the official client, pointed at the local double)
// and read back over HTTP: a consumer in Germany and a business in France each buy a pack through
// Checkout, get part of it refunded and top up automatically with a saved card. Every figure of
// their invoices and credit notes, their numbers, their PDFs, and the journal's tax payable (hledger
// agrees) is asserted.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { call } from './support/http.ts';
import { startStripeDouble, stripeEnv, type StripeDouble } from './support/stripe-double.ts';
import { adminApi, deliverStripe, spendExactly } from './support/money.ts';
import { documentsOf } from './support/documents.ts';
import { pdfText } from './support/pdf-text.ts';
import { hledgerBalances } from './support/hledger.ts';

const ADMIN = 'tg_admin_worked_example_two_countries_0123';
const TAX_TABLE = { DE: { name: 'USt', rate: '19' }, FR: { name: 'TVA', rate: '20', inclusive: true, reverse_charge: true } };
const YEAR = new Date().getUTCFullYear();
const invoiceNo = (n: number) => `TG-${YEAR}-${String(n).padStart(6, '0')}`;
const creditNoteNo = (n: number) => `TG-CN-${YEAR}-${String(n).padStart(6, '0')}`;

interface Customer {
  accountId: string;
  key: string;
}
interface Doc {
  object: 'invoice' | 'credit_note';
  number: string;
  subtotal: number;
  tax: number;
  total: number;
  notes: string[];
}

let stripe: StripeDouble;
let proc: GatewayProcess;
let gw: { url: string };
const erika: Customer = { accountId: 'erika', key: '' };
const exemple: Customer = { accountId: 'exemple', key: '' };

const admin = (path: string, body?: unknown, method?: string) => adminApi(gw, ADMIN)(path, body, method);
async function ok(reply: Promise<{ status: number; text: string; json: any }>, status = 200) {
  const r = await reply;
  assert.is(r.status, status, r.text);
  return r.json;
}
const tokensLeft = async (c: Customer): Promise<number> => (await ok(call(gw, '/v1/auto-top-up', { key: c.key }))).tokens_left;
const docs = (c: Customer, count: number) => documentsOf<Doc>(gw, ADMIN, c.accountId, count);
const figures = (d: Doc | undefined) => d && [d.number, d.subtotal, d.tax, d.total];

/** Buys pack p1000 through Stripe Checkout: the session's gross amount and tax, then the payment's intent. */
async function buyPack(c: Customer, expect: { amount: number; tax: number }): Promise<string> {
  const session = await ok(call(gw, '/v1/checkout/sessions', { key: c.key, body: { pack_id: 'p1000' } }), 201);
  assert.equal([session.amount, session.tax], [expect.amount, expect.tax]);
  const paid = stripe.pay(session.id);
  assert.is(await deliverStripe(gw, stripe, 'checkout.session.completed', paid), 'recorded');
  return String(paid.payment_intent);
}

/** Saves a card in setup mode and turns auto top-up on at `threshold` with pack p1000. */
async function autoTopUp(c: Customer, threshold: number) {
  const session = await ok(call(gw, '/v1/auto-top-up/card', { key: c.key, body: {} }), 201);
  assert.is(await deliverStripe(gw, stripe, 'checkout.session.completed', stripe.saveCard(session.id)), 'recorded');
  const set = await ok(call(gw, '/v1/auto-top-up', { key: c.key, method: 'PUT', body: { threshold_tokens: threshold, pack_id: 'p1000' } }));
  assert.is(set.enabled, true);
}

async function topUpSucceeded(c: Customer): Promise<void> {
  for (const until = Date.now() + 20_000; ;) {
    const t = await ok(call(gw, '/v1/auto-top-up', { key: c.key }));
    if (t.top_ups[0]?.status === 'succeeded') return;
    if (Date.now() > until) assert.unreachable(`no top-up succeeded: ${JSON.stringify(t.top_ups)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test.before(async () => {
  stripe = await startStripeDouble();
  proc = await spawnGateway({
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    ...stripeEnv(stripe),
    TOLLGATE_TAX_TABLE: JSON.stringify(TAX_TABLE),
    TOLLGATE_SELLER_COUNTRY: 'IE',
    TOLLGATE_SELLER_NAME: 'Tollgate Reseller Ltd',
    TOLLGATE_SELLER_TAX_ID: 'IE6388047V',
  });
  gw = { url: proc.baseUrl.replace(/\/v1$/, '') };
  // The example's set-up: a plan that gives the models and no tokens, and the pack both buy.
  await ok(admin('/plans', { plan_id: 'access', name: 'Access', quota: 0, validity_days: 365, requests_per_minute: 1000, models: ['*'] }), 201);
  await ok(admin('/packs/p1000', { name: '1,000 tokens', tokens: 1000, amount: 1000 }, 'PUT'));
  const address = { address_lines: ['Hauptstraße 5'], city: 'Berlin', invoice_email: 'ap@buyer.test' };
  for (const [c, name, profile] of [
    [erika, 'Erika Mustermann', { legal_name: 'Erika Mustermann', country: 'DE' }],
    [
      exemple,
      'Société Exemple SAS',
      { legal_name: 'Société Exemple SAS', address_lines: ['1 rue de la Paix'], city: 'Paris', country: 'FR', tax_id: 'FR40303265045' },
    ],
  ] as const) {
    await ok(admin('/accounts', { account_id: c.accountId, name }), 201);
    await ok(admin(`/accounts/${c.accountId}/subscription`, { plan_id: 'access' }));
    c.key = (await ok(admin(`/accounts/${c.accountId}/keys`, { name: 'app' }), 201)).key;
    await ok(admin(`/accounts/${c.accountId}/billing-profile`, { ...address, ...profile }, 'PUT'));
  }
});
test.after(async () => {
  await proc?.stop();
  await stripe?.close();
});

let erikaIntent = '';
let exempleIntent = '';

test('1. each buys pack p1000 (10.00 USD before tax) through Checkout: Erika pays 11.90 with 1.90 of USt; the business 10.00, reverse-charged', async () => {
  erikaIntent = await buyPack(erika, { amount: 1190, tax: 190 });
  const [first] = await docs(erika, 1);
  assert.equal(figures(first), [invoiceNo(1), 1000, 190, 1190]);
  exempleIntent = await buyPack(exemple, { amount: 1000, tax: 0 });
  const [second] = await docs(exemple, 1);
  assert.equal(figures(second), [invoiceNo(2), 1000, 0, 1000]);
  assert.match(second.notes.join(' '), /Reverse charge/);
  assert.equal([await tokensLeft(erika), await tokensLeft(exemple)], [1000, 1000]);
});

test('2. each uses some and gets part refunded: Erika 5.95 of 11.90 (500 tokens withdrawn, 0.95 of tax back), the business 4.00 (400 tokens)', async () => {
  await spendExactly(gw, erika.key, 400);
  await spendExactly(gw, exemple.key, 200);
  assert.is(await deliverStripe(gw, stripe, 'charge.refunded', stripe.refund(erikaIntent, 595)), 'refunded');
  const erikaNote = (await docs(erika, 2)).find((d) => d.object === 'credit_note');
  assert.equal(figures(erikaNote), [creditNoteNo(1), 500, 95, 595]);
  assert.is(await deliverStripe(gw, stripe, 'charge.refunded', stripe.refund(exempleIntent, 400)), 'refunded');
  const exempleNote = (await docs(exemple, 2)).find((d) => d.object === 'credit_note');
  assert.equal(figures(exempleNote), [creditNoteNo(2), 400, 0, 400]);
  assert.equal([await tokensLeft(erika), await tokensLeft(exemple)], [100, 400]);
});

test('3. each saves a card and tops up: the call that crosses the threshold buys p1000 off session, invoiced like any payment', async () => {
  await autoTopUp(erika, 50);
  await spendExactly(gw, erika.key, 60);
  await topUpSucceeded(erika);
  const erikaTopUp = (await docs(erika, 3)).find((d) => d.object === 'invoice' && d.number === invoiceNo(3));
  assert.equal(figures(erikaTopUp), [invoiceNo(3), 1000, 190, 1190]);

  await autoTopUp(exemple, 300);
  await spendExactly(gw, exemple.key, 110);
  await topUpSucceeded(exemple);
  const exempleTopUp = (await docs(exemple, 3)).find((d) => d.object === 'invoice' && d.number === invoiceNo(4));
  assert.equal(figures(exempleTopUp), [invoiceNo(4), 1000, 0, 1000]);
  assert.equal([await tokensLeft(erika), await tokensLeft(exemple)], [1040, 1290]);
});

test('4. each lists and downloads their documents; the PDF carries the same figures', async () => {
  const listed = await ok(call(gw, '/v1/invoices', { key: erika.key }));
  assert.equal(listed.data.map((d: Doc) => d.number).sort(), [invoiceNo(1), invoiceNo(3), creditNoteNo(1)].sort());
  for (const [c, number, total] of [
    [erika, invoiceNo(1), '11.90 USD'],
    [erika, creditNoteNo(1), '5.95 USD'],
    [exemple, invoiceNo(2), '10.00 USD'],
    [exemple, creditNoteNo(2), '4.00 USD'],
  ] as const) {
    const pdf = await fetch(`${gw.url}/v1/invoices/${number}?format=pdf`, { headers: { authorization: `Bearer ${c.key}` } });
    assert.is(pdf.status, 200, number);
    const text = (await pdfText(new Uint8Array(await pdf.arrayBuffer()))).replace(/\s+/g, ' ');
    assert.ok(text.includes(number) && text.includes(total), `${number}: ${text}`);
  }
  // Another customer's document is not theirs to read.
  assert.is((await call(gw, `/v1/invoices/${invoiceNo(2)}?format=pdf`, { key: erika.key })).status, 404);
});

test('5. the journal: 1.90 + 1.90 of USt collected, 0.95 given back: 2.85 tax payable, and hledger agrees', async () => {
  const today = new Date().toISOString().slice(0, 10);
  const report = await ok(admin(`/finance/report?from=${today}&to=${today}`));
  assert.equal([report.totals.tax, report.totals.tax_refunded], [380, 95]);
  const journal = await ok(admin(`/finance/journal?from=${today}&to=${today}&format=json`));
  assert.is(journal.balances['liabilities:tax-payable'], -285);
  assert.is(
    Object.values(journal.balances as Record<string, number>).reduce((s, v) => s + v, 0),
    0,
  );
  const hledger = await hledgerBalances((await admin(`/finance/journal?from=${today}&to=${today}`)).text, 'money-worked-example');
  if (hledger) assert.is(hledger['liabilities:tax-payable'], -285, JSON.stringify(hledger));
});

test.run();
