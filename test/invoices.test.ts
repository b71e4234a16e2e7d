// Invoices and credit notes (issue 43, item 2): every payment issues an invoice and every refund a
// credit note, numbered per series and year with no gap and no duplicate, even with 200 payments
// at once over two gateways (on PostgreSQL; one on PGlite); each copies the seller's details and
// the buyer's billing profile as they were at issue, and never changes after; JSON, HTML and a PDF
// whose text (read back by PDF.js) carries the same figures; a key sees only its own account's;
// a rebuild from zero gives the same documents; bad input is refused naming the field.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { documentNumber, documentSeriesDecider, invoiceOf, creditNoteOf } from '../src/books/documents.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';
import { pdfText } from './support/pdf-text.ts';
import { documentsOf as waitForDocuments } from './support/documents.ts';
import { dumpReadModels, rebuildReadModels } from '../projections/runner/rebuild.ts';
import { settingsFromEnv } from '../src/config.ts';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ADMIN = 'tg_admin_invoices_test_token_0123456789abcd';
const YEAR = new Date().getUTCFullYear();
const seller = {
  name: 'Tollgate Reseller Ltd',
  addressLines: ['1 Market Street', 'Dublin'],
  country: 'IE',
  taxId: 'IE6388047V',
  email: 'billing@reseller.test',
};
const buyer = { accountId: 'acme', name: 'Acme', profile: null };

const rules = suite('invoices: numbering and contents');

rules('numbers are the series, the year and a six-digit sequence; each document takes the next one of its stream', () => {
  assert.is(documentNumber('TG', 2026, 123), 'TG-2026-000123');
  assert.is(documentNumber('TG-CN', 2026, 7), 'TG-CN-2026-000007');
  const invoice = invoiceOf(
    { accountId: 'acme', paymentId: 'pay_1', amount: 2500, currency: 'EUR', description: 'Pro plan', tax: null },
    { seller, buyer },
    new Date('2026-03-01T00:00:00Z'),
  );
  const [first] = documentSeriesDecider.decide({ type: 'IssueInvoice', series: 'TG', year: 2026, invoice }, { issued: 0 });
  assert.is(first.data.number, 'TG-2026-000001');
  assert.equal([first.data.subtotal, first.data.tax, first.data.total], [2500, 0, 2500]);
  const after = documentSeriesDecider.evolve({ issued: 0 }, first);
  assert.is(documentSeriesDecider.decide({ type: 'IssueInvoice', series: 'TG', year: 2026, invoice }, after)[0].data.number, 'TG-2026-000002');
  // A document out of sequence means a writer without the revision check: never folded silently.
  assert.throws(() => documentSeriesDecider.evolve({ issued: 5 }, first), /out of sequence/);
  const note = creditNoteOf(
    { paymentId: 'pay_1', refundId: 're_1', amount: 700, currency: 'EUR', reason: 'refund', taxRefunded: 0 },
    first.data,
    new Date('2026-03-02T00:00:00Z'),
  );
  assert.equal([note.invoiceNumber, note.total, note.buyer, note.seller], ['TG-2026-000001', 700, buyer, seller]);
});

rules('a series that cannot make a valid number stops the start', () => {
  assert.throws(() => settingsFromEnv({ TOLLGATE_INVOICE_SERIES: 'tg-1' }), /TOLLGATE_INVOICE_SERIES/);
  assert.throws(() => settingsFromEnv({ TOLLGATE_SELLER_COUNTRY: 'Ireland' }), /TOLLGATE_SELLER_COUNTRY/);
  const s = settingsFromEnv({ TOLLGATE_SELLER_NAME: 'R Ltd', TOLLGATE_SELLER_ADDRESS: '1 Market Street; Dublin ;', TOLLGATE_SELLER_COUNTRY: 'IE' });
  assert.equal(s.payments.documents, {
    series: 'TG',
    seller: { name: 'R Ltd', addressLines: ['1 Market Street', 'Dublin'], country: 'IE', taxId: null, email: null },
  });
});

rules.run();

const flow = suite('invoices: issued, listed and downloaded');
let gw: TestGateway;
let other: TestGateway;
let acme: TestAccount;
let rival: TestAccount;

const admin = (g: { url: string }, path: string, body?: unknown, method?: string) =>
  call(g, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

type Doc = {
  object: string;
  number: string;
  payment_id: string;
  total: number;
  currency: string;
  invoice_number?: string;
  buyer: Record<string, unknown>;
  seller: Record<string, unknown>;
  lines: Array<Record<string, unknown>>;
  display: { total: string };
};

/** The account's documents once `count` are issued. */
const documentsOf = (accountId: string, count: number, g: { url: string } = gw): Promise<Doc[]> => waitForDocuments<Doc>(g, ADMIN, accountId, count);

flow.before(async () => {
  const documents = { series: 'TG', seller };
  gw = await startTestGateway({ adminToken: ADMIN, sweepIntervalMs: 300, payments: { ...settingsFromEnv({}).payments, documents } });
  other = process.env.DATABASE_URL
    ? await startTestGateway({
        adminToken: ADMIN,
        bootstrap: false,
        schema: gw.ledger.schema,
        sweepIntervalMs: 300,
        payments: { ...settingsFromEnv({}).payments, documents },
      })
    : gw;
  acme = await openAccount(gw, { quota: 1_000 });
  rival = await openAccount(gw, { quota: 1_000 });
  assert.is((await admin(gw, `/plans/${acme.planId}/price`, { amount: 2500 }, 'PUT')).status, 200);
  assert.is((await admin(gw, '/packs/p500', { name: 'Five hundred', tokens: 500, amount: 900 }, 'PUT')).status, 200);
  const profile = {
    legal_name: 'Acme Rechenzentrum GmbH',
    address_lines: ['Hauptstraße 5'],
    city: 'Berlin',
    postal_code: '10115',
    country: 'DE',
    tax_id: 'DE123456789',
    invoice_email: 'invoices@acme.test',
  };
  assert.is((await admin(gw, `/accounts/${acme.accountId}/billing-profile`, profile, 'PUT')).status, 200);
});
flow.after(async () => {
  if (other !== gw) await other?.close();
  await gw?.stop();
});

flow(
  'a payment issues an invoice with both parties as they were; a refund issues a credit note against it; a later profile change alters neither',
  async () => {
    const paid = await admin(other, `/accounts/${acme.accountId}/payments`, { reference: 'WIRE-1', amount: 2500, currency: 'USD', plan_id: acme.planId });
    assert.is(paid.status, 201, paid.text);
    const paymentId = (paid.json as { id: string }).id;
    const [invoice] = await documentsOf(acme.accountId, 1);
    assert.ok(invoice, 'no invoice was issued');
    assert.is(invoice.object, 'invoice');
    assert.match(invoice.number, new RegExp(`^TG-${YEAR}-\\d{6}$`));
    assert.is(invoice.payment_id, paymentId);
    assert.equal([invoice.total, invoice.currency, invoice.display.total], [2500, 'USD', '25.00']);
    assert.equal(invoice.seller, { name: seller.name, address_lines: seller.addressLines, country: 'IE', tax_id: 'IE6388047V', email: seller.email });
    assert.equal(
      [invoice.buyer.name, invoice.buyer.tax_id, invoice.buyer.country, invoice.buyer.city],
      ['Acme Rechenzentrum GmbH', 'DE123456789', 'DE', 'Berlin'],
    );
    assert.match(String(invoice.lines[0].description), /plan, one period \(1,000 tokens\)/);

    const refunded = await admin(gw, `/accounts/${acme.accountId}/payments/${paymentId}/refunds`, { amount: 700, refund_id: 're_part_1' });
    assert.is(refunded.status, 201, refunded.text);
    const docs = await documentsOf(acme.accountId, 2);
    const note = docs.find((d) => d.object === 'credit_note')!;
    assert.ok(note, 'no credit note was issued');
    assert.match(note.number, new RegExp(`^TG-CN-${YEAR}-\\d{6}$`));
    assert.equal([note.invoice_number, note.total, note.payment_id], [invoice.number, 700, paymentId]);
    assert.equal(note.buyer, invoice.buyer);

    // The buyer moves: issued documents keep the address they were issued to.
    const moved = { legal_name: 'Acme Cloud AG', address_lines: ['Neue Straße 1'], city: 'München', country: 'DE', invoice_email: 'ap@acme.test' };
    assert.is((await admin(gw, `/accounts/${acme.accountId}/billing-profile`, moved, 'PUT')).status, 200);
    const again = await admin(other, `/invoices/${invoice.number}`);
    assert.is(again.status, 200, again.text);
    assert.equal(again.json, invoice);

    // The customer's key lists and downloads them; HTML and the PDF's extracted text carry the same figures.
    const listed = await call(gw, '/v1/invoices', { key: acme.key });
    assert.is(listed.status, 200, listed.text);
    assert.equal((listed.json as { data: Doc[] }).data.map((d) => d.number).sort(), [invoice.number, note.number].sort());
    const html = await call(other, `/v1/invoices/${invoice.number}?format=html`, { key: acme.key });
    assert.is(html.status, 200);
    assert.match(html.headers.get('content-type') ?? '', /text\/html/);
    const pdf = await fetch(`${gw.url}/v1/invoices/${note.number}?format=pdf`, { headers: { authorization: `Bearer ${acme.key}` } });
    assert.is(pdf.status, 200);
    assert.is(pdf.headers.get('content-type'), 'application/pdf');
    const text = (await pdfText(new Uint8Array(await pdf.arrayBuffer()))).replace(/\s+/g, ' ');
    for (const figure of [
      `Credit note ${note.number}`,
      `Credits invoice: ${invoice.number}`,
      'Total credited: 7.00 USD',
      'Acme Rechenzentrum GmbH',
      'Tax id DE123456789',
      seller.name,
    ])
      assert.ok(text.includes(figure), `the PDF's text lacks "${figure}": ${text}`);
    const invoiceText = (
      await pdfText(
        new Uint8Array(
          await (await fetch(`${gw.url}/v1/invoices/${invoice.number}?format=pdf`, { headers: { authorization: `Bearer ${acme.key}` } })).arrayBuffer(),
        ),
      )
    ).replace(/\s+/g, ' ');
    for (const figure of ['Total paid: 25.00 USD', 'Subtotal: 25.00 USD', 'Tax: 0.00 USD'])
      assert.ok(invoiceText.includes(figure) && html.text.includes(figure.split(': ')[1]), `"${figure}" is not in both the PDF and the HTML`);

    // Another account's key: that number is unknown to it.
    const foreign = await call(gw, `/v1/invoices/${invoice.number}`, { key: rival.key });
    assert.is(foreign.status, 404, foreign.text);
    assert.is((foreign.json as { error: { param: string } }).error.param, 'number');
  },
);

flow('a lost dispute issues a credit note too, for what the payer took back', async () => {
  const paid = await admin(gw, `/accounts/${rival.accountId}/payments`, { reference: 'WIRE-D', amount: 900, currency: 'USD', pack_id: 'p500' });
  assert.is(paid.status, 201, paid.text);
  const paymentId = (paid.json as { id: string }).id;
  const opened = await admin(other, `/accounts/${rival.accountId}/payments/${paymentId}/disputes`, {
    dispute_id: 'dp_lost_1',
    amount: 900,
    suspend_keys: false,
  });
  assert.is(opened.status, 200, opened.text);
  const closed = await admin(gw, `/accounts/${rival.accountId}/disputes/dp_lost_1/close`, { outcome: 'lost', fee: 1500 });
  assert.is(closed.status, 200, closed.text);
  const docs = await documentsOf(rival.accountId, 2);
  const invoice = docs.find((d) => d.object === 'invoice' && d.payment_id === paymentId)!;
  const note = docs.find((d) => d.object === 'credit_note' && d.payment_id === paymentId) as (Doc & { reason: string }) | undefined;
  assert.ok(invoice && note, JSON.stringify(docs));
  assert.equal([note.reason, note.invoice_number, note.total], ['dispute_lost', invoice.number, 900]);
  assert.match(String(note.lines[0].description), new RegExp(`Lost dispute on invoice ${invoice.number}`));
});

flow('200 payments at once over two gateways: one invoice each, numbered without gap or duplicate', async () => {
  const n = 200;
  const accounts = [acme, rival];
  const results = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      admin(i % 2 ? other : gw, `/accounts/${accounts[i % 2].accountId}/payments`, { reference: `BULK-${i}`, amount: 900, currency: 'USD', pack_id: 'p500' }),
    ),
  );
  assert.equal(
    results.filter((r) => r.status !== 201).map((r) => r.text),
    [],
  );
  const paymentIds = new Set(results.map((r) => (r.json as { id: string }).id));
  assert.is(paymentIds.size, n);
  let all: Doc[];
  for (const until = Date.now() + 60_000; ;) {
    all = ((await admin(gw, '/invoices?limit=1000')).json as { data: Doc[] }).data;
    if (all.filter((d) => paymentIds.has(d.payment_id)).length >= n || Date.now() > until) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  const invoices = all.filter((d) => d.object === 'invoice');
  const ofBulk = invoices.filter((d) => paymentIds.has(d.payment_id));
  assert.is(ofBulk.length, n, 'a payment without its invoice, or with two');
  assert.is(new Set(ofBulk.map((d) => d.payment_id)).size, n);
  // The whole series this year: 1, 2, … with nothing skipped or taken twice.
  const sequences = invoices.map((d) => Number(d.number.slice(-6))).sort((a, b) => a - b);
  assert.equal(
    sequences,
    Array.from({ length: invoices.length }, (_, i) => i + 1),
  );
});

flow('a rebuild from position zero gives the same documents, and the same answers', async () => {
  const before = await admin(gw, '/invoices?limit=1000');
  await gw.ledger.caughtUp();
  const rows = await dumpReadModels(gw.ledger.readModels.db, gw.ledger.rmSchema);
  await rebuildReadModels(gw.ledger.readModels.db, gw.ledger.events, gw.ledger.rmSchema);
  const rebuilt = await dumpReadModels(gw.ledger.readModels.db, gw.ledger.rmSchema);
  assert.equal(rebuilt.documents, rows.documents);
  assert.equal((await admin(gw, '/invoices?limit=1000')).json, before.json);
});

flow("the CLI lists an account's documents and writes one as a PDF", async () => {
  const cli = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'invoices', ...args, '--url', other.url, '--token', ADMIN], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
    });
  const [newest] = await documentsOf(acme.accountId, 1);
  const listed = await cli('list', acme.accountId);
  assert.ok(listed.stdout.includes(`${newest.number}\t`), listed.stdout);
  const file = join(mkdtempSync(join(tmpdir(), 'tollgate-invoices-')), 'doc.pdf');
  const shown = await cli('show', newest.number, '--format', 'pdf', '--out', file);
  assert.match(shown.stdout, new RegExp(`${newest.number} written to`));
  const text = (await pdfText(readFileSync(file))).replace(/\s+/g, ' ');
  assert.ok(text.includes(newest.number) && text.includes(`${newest.display.total} ${newest.currency}`), text);
  // A PDF never goes to a terminal, and a wrong format names the flag.
  const refused = await cli('show', newest.number, '--format', 'pdf').then(
    () => null,
    (err: { stderr: string; code: number }) => err,
  );
  assert.ok(refused && refused.code === 2 && /--out/.test(refused.stderr), String(refused?.stderr));
});

flow('bad input: a malformed number, an unknown format or limit, an unknown number; each refused naming the field', async () => {
  const cases: Array<[string, number, string]> = [
    ['/v1/invoices/not-a-number', 400, 'number'],
    [`/v1/invoices/TG-${YEAR}-000001?format=docx`, 400, 'format'],
    ['/v1/invoices?limit=0', 400, 'limit'],
    ['/v1/invoices?limit=lots', 400, 'limit'],
    [`/v1/invoices/TG-${YEAR}-999999`, 404, 'number'],
  ];
  for (const [path, status, param] of cases) {
    const r = await call(gw, path, { key: acme.key });
    assert.is(r.status, status, `${path}: ${r.text}`);
    assert.is((r.json as { error: { param: string } }).error.param, param, path);
  }
  assert.is((await call(gw, '/v1/invoices')).status, 401);
});

flow.run();
