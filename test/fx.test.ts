// Prices in several currencies (issue 43, item 4), performed against an `npm start` process whose
// ledger settles in euros, with Stripe through the official client pointed at the local double: a
// pack offered in US dollars too, exchange rates recorded with their source and day, a German
// consumer paying in dollars through Checkout (booked in euros at the day's rate, invoiced in
// dollars with what it was booked as), part of it refunded at the payment's rate after the rate
// moved (the difference booked as an FX gain), a bank transfer in dollars, an upstream cost rate
// given in dollars, and what is refused: a currency not offered, a payment without a rate. Every
// figure is exact to the minor unit, the journal balances in hledger, and a rebuild from zero gives
// the same books.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { call } from './support/http.ts';
import { startStripeDouble, stripeEnv, type StripeDouble } from './support/stripe-double.ts';
import { adminApi, deliverStripe } from './support/money.ts';
import { documentsOf } from './support/documents.ts';
import { pdfText } from './support/pdf-text.ts';
import { hledgerBalances } from './support/hledger.ts';

const ADMIN = 'tg_admin_fx_two_currencies_0123456789abcd';
const TODAY = new Date().toISOString().slice(0, 10);
const WINDOW = `from=${TODAY}&to=${TODAY}`;

interface Doc {
  object: 'invoice' | 'credit_note';
  number: string;
  currency: string;
  total: number;
  tax: number;
  booked: { currency: string; total: number; tax: number; rate: string; day: string; source: string } | null;
  notes: string[];
}

let stripe: StripeDouble;
let proc: GatewayProcess;
let gw: { url: string };
let dollarKey = '';
let intent = '';
let paymentId = '';

const admin = (path: string, body?: unknown, method?: string) => adminApi(gw, ADMIN)(path, body, method);
async function ok(reply: Promise<{ status: number; text: string; json: any }>, status = 200) {
  const r = await reply;
  assert.is(r.status, status, r.text);
  return r.json;
}
async function refused(reply: Promise<{ status: number; text: string; json: any }>, status: number, param: string) {
  const r = await reply;
  assert.is(r.status, status, r.text);
  assert.is(r.json.error.param, param, r.text);
}
const eventCount = async () => (await admin('/events')).text.split('\n').filter(Boolean).length;
async function accountEvents(accountId: string, type: string): Promise<any[]> {
  return (await admin('/events')).text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.stream === `account-${accountId}` && e.type === type)
    .map((e) => e.data);
}
const docs = (accountId: string, count: number) => documentsOf<Doc>(gw, ADMIN, accountId, count);

test.before(async () => {
  stripe = await startStripeDouble();
  proc = await spawnGateway({
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    TOLLGATE_CURRENCY: 'EUR',
    ...stripeEnv(stripe),
    TOLLGATE_TAX_TABLE: JSON.stringify({ DE: { name: 'USt', rate: '19' } }),
    TOLLGATE_SELLER_COUNTRY: 'IE',
    TOLLGATE_SELLER_NAME: 'Tollgate Reseller Ltd',
  });
  gw = { url: proc.baseUrl.replace(/\/v1$/, '') };
  await ok(admin('/plans', { plan_id: 'access', name: 'Access', quota: 0, validity_days: 365, requests_per_minute: 1000, models: ['*'] }), 201);
  await ok(admin('/packs/p1000', { name: '1,000 tokens', tokens: 1000, amount: 950 }, 'PUT'));
  for (const [id, name] of [
    ['dollar', 'Dollar Kunde'],
    ['wire', 'Wire Ltd'],
  ]) {
    await ok(admin('/accounts', { account_id: id, name }), 201);
    await ok(admin(`/accounts/${id}/subscription`, { plan_id: 'access' }));
  }
  dollarKey = (await ok(admin('/accounts/dollar/keys', { name: 'app' }), 201)).key;
  await ok(
    admin(
      '/accounts/dollar/billing-profile',
      { legal_name: 'Dollar Kunde', address_lines: ['Hauptstraße 5'], city: 'Berlin', country: 'DE', invoice_email: 'ap@buyer.test' },
      'PUT',
    ),
  );
});
test.after(async () => {
  await proc?.stop();
  await stripe?.close();
});

test('a pack is offered in dollars beside its euro price; what cannot be priced or paid is refused naming the field, and writes nothing', async () => {
  const before = await eventCount();
  await refused(admin('/packs/p-none', { name: 'None', tokens: 1000, amount: 1000, currency: 'USD' }, 'PUT'), 409, 'currency');
  await refused(admin('/packs/p1000', { name: '1,000 tokens', tokens: 999, amount: 1000, currency: 'USD' }, 'PUT'), 400, 'tokens');
  // Not offered in dollars yet: a dollar payment or checkout is refused.
  await refused(admin('/accounts/wire/payments', { reference: 'WIRE-USD-0', amount: 1000, currency: 'USD', pack_id: 'p1000' }), 400, 'currency');
  await refused(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'USD' } }), 400, 'currency');
  assert.is(await eventCount(), before, 'nothing written');

  const offered = await ok(admin('/packs/p1000', { name: '1,000 tokens', tokens: 1000, amount: 1000, currency: 'USD' }, 'PUT'));
  assert.equal([offered.currency, offered.amount, offered.tokens], ['USD', 1000, 1000]);
  const prices = await ok(call(gw, '/v1/prices', { key: dollarKey }));
  assert.equal(prices.currencies, ['EUR', 'USD']);
  assert.equal(
    prices.packs.map((p: any) => [p.pack_id, p.amount, p.currency, p.offered]),
    [['p1000', 950, 'EUR', [{ amount: 1000, currency: 'USD', display: '10.00' }]]],
  );
  // Offered, but no exchange rate yet: a payment could not be booked, so none is taken.
  const mark = await eventCount();
  await refused(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'USD' } }), 409, 'currency');
  await refused(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'GBP' } }), 400, 'currency');
  await refused(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'usd' } }), 400, 'currency');
  assert.is(await eventCount(), mark, 'nothing written');
});

test('paid in dollars through Checkout: 11.90 USD with 1.90 of USt, booked as 11.32 EUR with 1.81 at 0.9512, invoiced in dollars', async () => {
  await ok(admin('/exchange-rates/USD', { rate: '0.9512', source: 'ECB reference rate', day: TODAY }, 'PUT'));
  const session = await ok(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'USD' } }), 201);
  assert.equal([session.currency, session.amount, session.tax], ['USD', 1190, 190]);
  const paid = stripe.pay(session.id);
  intent = String(paid.payment_intent);
  assert.is(await deliverStripe(gw, stripe, 'checkout.session.completed', paid), 'recorded');
  const [received] = await accountEvents('dollar', 'PaymentReceived');
  paymentId = received.paymentId;
  // 1190 x 0.9512 = 1131.928 -> 1132; 190 x 0.9512 = 180.728 -> 181 (half up to the cent).
  assert.equal([received.amount, received.currency, received.tax.amount], [1132, 'EUR', 181]);
  assert.equal(received.fx, {
    currency: 'USD',
    amount: 1190,
    fee: received.fx.fee,
    tax: 190,
    rate: '0.9512',
    day: TODAY,
    source: 'ECB reference rate',
  });
  if (received.fx.fee !== null) assert.is(received.fee, Math.round(received.fx.fee * 0.9512), 'the fee converted at the same rate');
  const receipt = (await ok(call(gw, '/v1/payments', { key: dollarKey }))).data[0];
  assert.equal(
    [receipt.amount, receipt.currency, receipt.paid_in.amount, receipt.paid_in.currency, receipt.paid_in.rate],
    [1132, 'EUR', 1190, 'USD', '0.9512'],
  );
  const [invoice] = await docs('dollar', 1);
  assert.equal([invoice.currency, invoice.total, invoice.tax], ['USD', 1190, 190]);
  assert.equal(invoice.booked, { currency: 'EUR', total: 1132, tax: 181, rate: '0.9512', day: TODAY, source: 'ECB reference rate' });
  const pdf = await fetch(`${gw.url}/v1/invoices/${invoice.number}?format=pdf`, { headers: { authorization: `Bearer ${dollarKey}` } });
  const text = (await pdfText(new Uint8Array(await pdf.arrayBuffer()))).replace(/\s+/g, ' ');
  assert.ok(text.includes('11.90 USD') && text.includes('Booked in EUR at 1 USD = 0.9512 EUR') && text.includes('11.32 EUR'), text);
});

test("refunded 5.95 USD after the rate moved to 0.94: 5.66 EUR back at the payment's rate, an FX gain of 0.07, a credit note in dollars", async () => {
  await ok(admin('/exchange-rates/USD', { rate: '0.94', source: 'ECB reference rate, corrected', day: TODAY }, 'PUT'));
  assert.is(await deliverStripe(gw, stripe, 'charge.refunded', stripe.refund(intent, 595)), 'refunded');
  const [refund] = await accountEvents('dollar', 'PaymentRefunded');
  // 595 x 0.9512 = 565.964 -> 566 at the payment's rate; 595 x 0.94 = 559.3 -> 559 at the day's: 7 gained.
  assert.equal([refund.amount, refund.currency, refund.taxRefunded], [566, 'EUR', 91]);
  assert.equal(refund.fx, {
    currency: 'USD',
    amount: 595,
    taxRefunded: 95,
    rate: '0.9512',
    day: TODAY,
    source: 'ECB reference rate',
    now: { rate: '0.94', day: TODAY, source: 'ECB reference rate, corrected' },
    gainLoss: 7,
  });
  const note = (await docs('dollar', 2)).find((d) => d.object === 'credit_note')!;
  assert.equal([note.currency, note.total, note.tax, note.booked?.total, note.booked?.tax], ['USD', 595, 95, 566, 91]);
  // The rest goes back at the payment's rate too: all of it is all of the conversion, 1132.
  assert.is(await deliverStripe(gw, stripe, 'charge.refunded', stripe.refund(intent, 595)), 'refunded');
  const refunds = await accountEvents('dollar', 'PaymentRefunded');
  assert.equal(
    refunds.map((r) => [r.amount, r.fx.amount, r.fx.gainLoss]),
    [
      [566, 595, 7],
      [566, 595, 7],
    ],
  );
  const receipt = (await ok(call(gw, '/v1/payments', { key: dollarKey }))).data[0];
  assert.equal([receipt.refunded, receipt.paid_in.refunded], [1132, 1190]);
  await refused(admin(`/accounts/dollar/payments/${paymentId}/refunds`, { amount: 1, refund_id: 'R-X' }), 400, 'amount');
});

test("a bank transfer in dollars is converted at the day's rate; one in pounds is refused; a Stripe payment in pounds is kept unmatched", async () => {
  const wire = await ok(admin('/accounts/wire/payments', { reference: 'WIRE-USD-1', amount: 1000, currency: 'USD', pack_id: 'p1000' }), 201);
  // No billing profile: untaxed. 1000 x 0.94 = 940.
  assert.equal([wire.amount, wire.currency, wire.paid_in.amount, wire.paid_in.currency, wire.paid_in.rate], [940, 'EUR', 1000, 'USD', '0.94']);
  await refused(admin('/accounts/wire/payments', { reference: 'WIRE-GBP-1', amount: 1000, currency: 'GBP', pack_id: 'p1000' }), 400, 'currency');
  // A Checkout payment that came in pounds (a session in dollars, its notice saying gbp): not offered, so kept for the operator.
  const session = await ok(call(gw, '/v1/checkout/sessions', { key: dollarKey, body: { pack_id: 'p1000', currency: 'USD' } }), 201);
  const paid = { ...stripe.pay(session.id), currency: 'gbp' };
  assert.is(await deliverStripe(gw, stripe, 'checkout.session.completed', paid), 'unmatched');
  const unmatched = (await ok(admin('/unmatched-payments'))).data;
  assert.equal(
    unmatched.map((u: any) => [u.currency, u.reason]),
    [['GBP', 'paid in GBP, which the item is not offered in (the ledger settles in EUR)']],
  );
});

test('an upstream cost rate given in dollars is converted at the rate of its day, and keeps what was given', async () => {
  const channel = (await ok(admin('/channels'))).data[0].id;
  const rate = await ok(admin('/cost-rates', { channel, input: '3', output: '15', cache_read: '0.3', currency: 'USD' }), 201);
  assert.equal([rate.currency, rate.input, rate.output, rate.cache_read], ['EUR', '2.82', '14.1', '0.282']);
  assert.equal(rate.given_in, {
    currency: 'USD',
    rate: '0.94',
    day: TODAY,
    source: 'ECB reference rate, corrected',
    input: '3',
    cacheRead: '0.3',
    cacheWrite5m: '3',
    cacheWrite1h: '3',
    output: '15',
    image: null,
  });
  await refused(admin('/cost-rates', { channel, input: '3', output: '15', currency: 'JPY' }), 409, 'currency');
});

test('the books: the FX gain in the report, the reconciliation at zero, the journal balanced (hledger agrees); the same after a rebuild from zero', async () => {
  const report = await ok(admin(`/finance/report?${WINDOW}`));
  assert.equal(
    [report.totals.payments, report.totals.refunds, report.totals.tax, report.totals.tax_refunded, report.totals.fx_gain_loss],
    [1132 + 940, 1132, 181, 181, 14],
  );
  const reconciliation = await ok(admin(`/finance/reconciliation?${WINDOW}`));
  assert.equal([reconciliation.total.difference, reconciliation.total.fx_gain_loss], [0, 14]);
  const journal = await ok(admin(`/finance/journal?${WINDOW}&format=json`));
  assert.is(journal.balances['revenue:fx-gain-loss'], -14);
  assert.is(
    Object.values(journal.balances as Record<string, number>).reduce((s, v) => s + v, 0),
    0,
  );
  const hledger = await hledgerBalances((await admin(`/finance/journal?${WINDOW}`)).text, 'fx');
  if (hledger) assert.is(hledger['revenue:fx-gain-loss'], -14, JSON.stringify(hledger));
  const lots = (await ok(admin(`/finance/lots?${WINDOW}`))).data;
  const rebuild = await admin('/rebuild', {});
  assert.ok(rebuild.text.includes('"type":"done"'), rebuild.text);
  assert.equal((await ok(admin(`/finance/report?${WINDOW}`))).totals, report.totals);
  assert.equal((await ok(admin(`/finance/lots?${WINDOW}`))).data, lots);
});

test.run();
