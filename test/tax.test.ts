// Tax (issue 43, item 3): a table by country (rate, name, inclusive or exclusive prices) and the
// B2B reverse charge; tax held in every payment, given back in proportion by refunds, printed on
// invoices and credit notes, booked to liabilities:tax-payable (hledger balances it), in the
// finance report's columns and the reconciliation; Stripe Checkout charges the same tax through
// fixed tax rates (the official client against the double). Every amount exact to the minor unit.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { grossPrice, parseTaxTable, taxInGross, taxRefunded, taxTreatment } from '../src/money/tax.ts';
import { settingsFromEnv } from '../src/config.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';
import { startStripeDouble, type StripeDouble } from './support/stripe-double.ts';
import { pdfText } from './support/pdf-text.ts';
import { documentsOf as waitForDocuments } from './support/documents.ts';
import { hledgerBalances } from './support/hledger.ts';
import { dumpReadModels, rebuildReadModels } from '../projections/runner/rebuild.ts';

const TABLE = {
  IE: { name: 'VAT', rate: '23', reverse_charge: true },
  DE: { name: 'USt', rate: '19', reverse_charge: true },
  FR: { name: 'TVA', rate: '20', inclusive: true, reverse_charge: true },
};

const rules = suite('tax: the table and the rounding rule');

rules('the table parses percentages to basis points and refuses what it cannot read, naming the entry', () => {
  const t = parseTaxTable(JSON.stringify({ ...TABLE, CH: { name: 'MWST', rate: 8.1 } }));
  assert.equal(t.get('DE'), { name: 'USt', rateBasisPoints: 1900, inclusive: false, reverseCharge: true });
  assert.equal(t.get('CH'), { name: 'MWST', rateBasisPoints: 810, inclusive: false, reverseCharge: false });
  assert.equal(t.get('FR')?.inclusive, true);
  for (const [bad, why] of [
    ['{"Germany":{"name":"USt","rate":"19"}}', /"Germany".*ISO 3166/],
    ['{"DE":{"name":"USt","rate":"19%"}}', /"DE": rate must be a percentage/],
    ['{"DE":{"name":"USt","rate":"101"}}', /"DE": rate/],
    ['{"DE":{"name":"","rate":"19"}}', /"DE": name/],
    ['{"DE":{"name":"USt","rate":"19","reverse":true}}', /unknown field "reverse"/],
    ['{"DE":{"name":"USt","rate":"19","inclusive":"yes"}}', /inclusive must be true or false/],
    ['[1]', /JSON object by country/],
    ['not json', /JSON object by country/],
  ] as const)
    assert.throws(() => parseTaxTable(bad), why, bad);
  // At start: a table that does not parse stops it, naming the variable.
  assert.throws(() => settingsFromEnv({ TOLLGATE_TAX_TABLE: '{"DE":{"name":"USt","rate":"x"}}' }), /TOLLGATE_TAX_TABLE: .*"DE"/);
  assert.throws(() => settingsFromEnv({ TOLLGATE_TAX_TABLE: '/no/such/tax-table.json' }), /TOLLGATE_TAX_TABLE: .*neither a JSON object nor a readable file/);
  const s = settingsFromEnv({ TOLLGATE_TAX_TABLE: JSON.stringify(TABLE), TOLLGATE_SELLER_COUNTRY: 'IE' });
  assert.is(s.payments.tax.sellerCountry, 'IE');
  assert.is(s.payments.tax.table.get('IE')?.rateBasisPoints, 2300);
});

rules("who pays what: the buyer's country, the seller's for a buyer without a profile, the reverse charge for a checked business abroad", () => {
  const table = parseTaxTable(JSON.stringify(TABLE));
  const consumer = (country: string) => ({ country, taxId: null, taxIdChecked: false });
  const business = (country: string, checked = true) => ({ country, taxId: `${country}123456789`, taxIdChecked: checked });
  assert.equal(taxTreatment(table, 'IE', consumer('DE')), { country: 'DE', name: 'USt', rateBasisPoints: 1900, inclusive: false, reverseCharge: false });
  assert.equal(taxTreatment(table, 'IE', null), { country: 'IE', name: 'VAT', rateBasisPoints: 2300, inclusive: false, reverseCharge: false });
  assert.equal(taxTreatment(table, 'IE', business('FR')), { country: 'FR', name: 'Reverse charge', rateBasisPoints: 0, inclusive: true, reverseCharge: true });
  // A business in the seller's own country pays its tax; so does one whose tax id could not be checked.
  assert.is(taxTreatment(table, 'IE', business('IE'))?.rateBasisPoints, 2300);
  assert.is(taxTreatment(table, 'IE', business('DE', false))?.rateBasisPoints, 1900);
  // A country without a row is not taxed; a table without rows taxes nothing.
  assert.is(taxTreatment(table, 'IE', consumer('US')), null);
  assert.is(taxTreatment(new Map(), 'IE', consumer('DE')), null);
});

rules('the tax held in price + tax is exactly the tax added; inclusive prices hold it; refunds in parts give back exactly the tax held', () => {
  for (const rateBasisPoints of [0, 500, 770, 810, 1900, 2000, 2100, 2300, 2500, 10_000])
    for (let price = 0; price <= 3000; price++) {
      const exclusive = { country: 'DE', name: 'T', rateBasisPoints, inclusive: false, reverseCharge: false };
      const gross = grossPrice(price, exclusive);
      assert.is(gross - taxInGross(gross, exclusive), price, `${price} at ${rateBasisPoints}`);
      const inclusive = { ...exclusive, inclusive: true };
      assert.is(grossPrice(price, inclusive), price);
      const held = taxInGross(price, inclusive);
      if (held < 0 || held > price) assert.unreachable(`${held} of ${price} at ${rateBasisPoints}`);
    }
  // 29.75 at 19 %: 4.75 of tax. Refunded as 11.90, 0.01 and the rest: 1.90 + 0.00 + 2.85.
  const parts = [1190, 1, 1784];
  let before = 0;
  const taxes = parts.map((p) => {
    const t = taxRefunded(2975, 475, before, p);
    before += p;
    return t;
  });
  assert.equal(taxes, [190, 0, 285]);
  assert.is(taxRefunded(2500, 0, 0, 2500), 0);
});

rules.run();

const ADMIN = 'tg_admin_tax_test_token_0123456789abcdefgh';
const flow = suite('tax: paid, refunded, documented, booked and charged by Checkout');
let stripe: StripeDouble;
let gw: TestGateway;
let other: TestGateway;
let consumer: TestAccount;
let business: TestAccount;
const today = new Date().toISOString().slice(0, 10);

const admin = (g: { url: string }, path: string, body?: unknown, method?: string) =>
  call(g, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

type Doc = {
  object: string;
  number: string;
  payment_id: string;
  subtotal: number;
  tax: number;
  total: number;
  lines: Array<{ amount: number; tax: number; tax_rate: string }>;
  tax_treatment: { country: string; name: string; rate: string; prices_include_tax: boolean; reverse_charge: boolean } | null;
  notes: string[];
};

const documentsOf = (accountId: string, count: number): Promise<Doc[]> => waitForDocuments<Doc>(gw, ADMIN, accountId, count);

async function deliver(event: Record<string, unknown>) {
  const { body, signature } = stripe.signed(event);
  return call(other, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
}

flow.before(async () => {
  stripe = await startStripeDouble();
  const env = {
    TOLLGATE_TAX_TABLE: JSON.stringify(TABLE),
    TOLLGATE_SELLER_COUNTRY: 'IE',
    TOLLGATE_SELLER_NAME: 'Reseller Ltd',
    TOLLGATE_SELLER_TAX_ID: 'IE6388047V',
    STRIPE_SECRET_KEY: stripe.secretKey,
    STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    STRIPE_API_BASE: stripe.url,
  };
  const payments = settingsFromEnv(env).payments;
  gw = await startTestGateway({ adminToken: ADMIN, sweepIntervalMs: 300, payments });
  other = process.env.DATABASE_URL
    ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema, sweepIntervalMs: 300, payments })
    : gw;
  consumer = await openAccount(gw, { quota: 1_000 });
  business = await openAccount(gw, { quota: 1_000 });
  assert.is((await admin(gw, `/plans/${consumer.planId}/price`, { amount: 2500 }, 'PUT')).status, 200);
  assert.is((await admin(gw, `/plans/${business.planId}/price`, { amount: 2500 }, 'PUT')).status, 200);
  assert.is((await admin(gw, '/packs/p300', { name: 'Three hundred', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  const address = { address_lines: ['Hauptstraße 5'], city: 'Berlin', invoice_email: 'ap@buyer.test' };
  const set = (a: TestAccount, body: Record<string, unknown>) => admin(gw, `/accounts/${a.accountId}/billing-profile`, { ...address, ...body }, 'PUT');
  assert.is((await set(consumer, { legal_name: 'Erika Mustermann', country: 'DE' })).status, 200);
  assert.is((await set(business, { legal_name: 'Société Exemple SAS', country: 'FR', tax_id: 'FR40303265045' })).status, 200);
});
flow.after(async () => {
  if (other !== gw) await other?.close();
  await gw?.stop();
  await stripe?.close();
});

let consumerInvoice: Doc;

flow('a consumer in Germany: 19 % held in what they paid, on the invoice; a refund gives back its share, on the credit note', async () => {
  // The plan lists at 25.00 before tax: a transfer of 29.75 pays it with 4.75 of USt.
  const paid = await admin(other, `/accounts/${consumer.accountId}/payments`, {
    reference: 'WIRE-DE',
    amount: 2975,
    currency: 'USD',
    plan_id: consumer.planId,
  });
  assert.is(paid.status, 201, paid.text);
  const payment = paid.json as { id: string; tax: number; amount: number };
  assert.equal([payment.amount, payment.tax], [2975, 475]);
  const [invoice] = await documentsOf(consumer.accountId, 1);
  consumerInvoice = invoice;
  assert.equal([invoice.subtotal, invoice.tax, invoice.total], [2500, 475, 2975]);
  assert.equal([invoice.lines[0].amount, invoice.lines[0].tax, invoice.lines[0].tax_rate], [2500, 475, '19%']);
  assert.equal(invoice.tax_treatment, { country: 'DE', name: 'USt', rate: '19%', prices_include_tax: false, reverse_charge: false });

  const refunded = await admin(gw, `/accounts/${consumer.accountId}/payments/${payment.id}/refunds`, { amount: 1190, refund_id: 're_tax_1' });
  assert.is(refunded.status, 201, refunded.text);
  const note = (await documentsOf(consumer.accountId, 2)).find((d) => d.object === 'credit_note')!;
  assert.ok(note, 'no credit note');
  assert.equal([note.subtotal, note.tax, note.total], [1000, 190, 1190]);

  // The PDF's text and the HTML say the same figures.
  const html = await call(other, `/v1/invoices/${invoice.number}?format=html`, { key: consumer.key });
  const pdf = await fetch(`${gw.url}/v1/invoices/${invoice.number}?format=pdf`, { headers: { authorization: `Bearer ${consumer.key}` } });
  const text = (await pdfText(new Uint8Array(await pdf.arrayBuffer()))).replace(/\s+/g, ' ');
  for (const figure of ['Subtotal: 25.00 USD', 'Tax (USt 19%): 4.75 USD', 'Total paid: 29.75 USD', 'USt 19% (DE), added to the prices.'])
    assert.ok(text.includes(figure) && html.text.includes(figure.split(': ').at(-1)!), `"${figure}" is not in both the PDF and the HTML: ${text}`);
});

flow('a business in France with a checked VAT number is reverse-charged: no tax, and the invoice says so', async () => {
  const paid = await admin(gw, `/accounts/${business.accountId}/payments`, { reference: 'WIRE-FR', amount: 2500, currency: 'USD', plan_id: business.planId });
  assert.is(paid.status, 201, paid.text);
  assert.is((paid.json as { tax: number }).tax, 0);
  const [invoice] = await documentsOf(business.accountId, 1);
  assert.equal([invoice.subtotal, invoice.tax, invoice.total], [2500, 0, 2500]);
  assert.equal(invoice.tax_treatment, { country: 'FR', name: 'Reverse charge', rate: '0%', prices_include_tax: true, reverse_charge: true });
  assert.match(invoice.notes.join(' '), /Reverse charge/);
  const pdf = await fetch(`${gw.url}/v1/invoices/${invoice.number}?format=pdf`, { headers: { authorization: `Bearer ${business.key}` } });
  assert.match((await pdfText(new Uint8Array(await pdf.arrayBuffer()))).replace(/\s+/g, ' '), /Reverse charge: no tax is charged/);
});

flow('Checkout charges the same tax through a fixed tax rate: a pack and a recurring plan, each booked with the tax Stripe took', async () => {
  const session = await call(gw, '/v1/checkout/sessions', { key: consumer.key, body: { pack_id: 'p300' } });
  assert.is(session.status, 201, session.text);
  assert.equal([session.json.amount, session.json.tax], [357, 57]);
  const [rate] = [...stripe.taxRates.values()];
  assert.equal([rate.displayName, rate.percentage, rate.inclusive, rate.country], ['USt', 19, false, 'DE']);
  const completed = stripe.pay(session.json.id);
  assert.equal([completed.amount_total, (completed.total_details as { amount_tax: number }).amount_tax], [357, 57]);
  assert.is((await deliver(stripe.event('checkout.session.completed', completed))).json.outcome, 'recorded');
  // A second checkout of the same treatment reuses Stripe's rate.
  const again = await call(gw, '/v1/checkout/sessions', { key: consumer.key, body: { plan_id: consumer.planId } });
  assert.is(again.status, 201, again.text);
  assert.equal([again.json.amount, again.json.tax, stripe.taxRates.size], [2975, 475, 1]);
  const subscribed = stripe.pay(again.json.id);
  assert.is((await deliver(stripe.event('checkout.session.completed', subscribed))).json.outcome, 'recorded');
  const docs = await documentsOf(consumer.accountId, 4);
  const byTotal = (total: number) => docs.find((d) => d.object === 'invoice' && d.total === total && d.number !== consumerInvoice.number);
  assert.equal([byTotal(357)?.subtotal, byTotal(357)?.tax], [300, 57]);
  assert.equal([byTotal(2975)?.subtotal, byTotal(2975)?.tax], [2500, 475]);
  // A business abroad gets no tax rate at all.
  const reverse = await call(gw, '/v1/checkout/sessions', { key: business.key, body: { pack_id: 'p300' } });
  assert.equal([reverse.json.amount, reverse.json.tax, stripe.sessions.get(reverse.json.id)!.taxRate], [300, 0, null]);
});

flow(
  'the books: tax columns in the report, tax payable in the journal (hledger agrees), a reconciliation without difference, the same after a rebuild',
  async () => {
    await gw.ledger.caughtUp();
    const window = `from=${today}&to=${today}`;
    const report = await admin(gw, `/finance/report?${window}`);
    assert.is(report.status, 200, report.text);
    const t = report.json.totals as Record<string, number>;
    const rows = report.json.rows as Array<Record<string, number | string>>;
    const sum = (accountId: string, column: string) => rows.filter((r) => r.account_id === accountId).reduce((n, r) => n + Number(r[column]), 0);
    // The consumer's collected: 4.75 (transfer) + 0.57 (pack) + 4.75 (plan); given back: 1.90. The business's: none.
    assert.equal([sum(consumer.accountId, 'tax'), sum(consumer.accountId, 'tax_refunded')], [475 + 57 + 475, 190]);
    assert.equal([sum(business.accountId, 'tax'), sum(business.accountId, 'payments')], [0, 2500]);
    assert.is(
      t.tax,
      rows.reduce((n, r) => n + Number(r.tax), 0),
    );
    const csv = await admin(gw, `/finance/report?${window}&format=csv`);
    assert.ok(csv.text.split('\n')[0].includes(',tax,tax_refunded,'), csv.text.split('\n')[0]);

    const rec = await admin(gw, `/finance/reconciliation?${window}`);
    assert.is(rec.status, 200, rec.text);
    assert.is(rec.json.total.difference, 0, JSON.stringify(rec.json.total));
    assert.equal([rec.json.total.tax, rec.json.total.tax_refunded], [t.tax, t.tax_refunded]);

    const j = await admin(gw, `/finance/journal?${window}&format=json`);
    const balances = j.json.balances as Record<string, number>;
    assert.is(balances['liabilities:tax-payable'], -(t.tax - t.tax_refunded));
    assert.is(
      Object.values(balances).reduce((s, v) => s + v, 0),
      0,
    );
    const read = await hledgerBalances((await admin(gw, `/finance/journal?${window}`)).text, 'tax.test');
    if (read) assert.is(read['liabilities:tax-payable'], -(t.tax - t.tax_refunded), JSON.stringify(read));
    const before = await dumpReadModels(gw.ledger.readModels.db, gw.ledger.rmSchema);
    await rebuildReadModels(gw.ledger.readModels.db, gw.ledger.events, gw.ledger.rmSchema);
    const after = await dumpReadModels(gw.ledger.readModels.db, gw.ledger.rmSchema);
    for (const table of ['book_days', 'book_entries', 'book_lots', 'documents']) assert.equal(after[table], before[table], table);
    assert.equal((await admin(gw, `/finance/report?${window}`)).json.totals, t);
  },
);

flow.run();
