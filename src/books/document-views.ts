// An issued invoice or credit note as the API answers it (JSON), as a printable page (HTML) and as
// a PDF. All three are made from the issued event alone, so they say the same figures and never
// change after issue.
import PDFDocument from 'pdfkit';
import { formatMoney } from '../money/money.ts';
import type { CreditNoteData, InvoiceData } from './documents.ts';

export type IssuedDocument = ({ kind: 'invoice' } & InvoiceData) | ({ kind: 'credit_note' } & CreditNoteData);

const amount = (minor: number, currency: string) => `${formatMoney({ amount: minor, currency })} ${currency}`;
const rate = (basisPoints: number) => `${(basisPoints / 100).toFixed(2).replace(/\.?0+$/, '')}%`;

/** The document as the API answers it. */
export function documentBody(d: IssuedDocument) {
  const profile = d.buyer.profile;
  return {
    object: d.kind,
    number: d.number,
    issued_at: d.issuedAt,
    account_id: d.accountId,
    payment_id: d.paymentId,
    ...(d.kind === 'credit_note' ? { refund_id: d.refundId, invoice_number: d.invoiceNumber, reason: d.reason } : {}),
    seller: { name: d.seller.name, address_lines: d.seller.addressLines, country: d.seller.country, tax_id: d.seller.taxId, email: d.seller.email },
    buyer: {
      account_id: d.buyer.accountId,
      name: profile?.legalName ?? d.buyer.name,
      address_lines: profile?.addressLines ?? [],
      city: profile?.city ?? null,
      postal_code: profile?.postalCode ?? null,
      region: profile?.region ?? null,
      country: profile?.country ?? null,
      tax_id: profile?.taxId ?? null,
      invoice_email: profile?.invoiceEmail ?? null,
    },
    lines: d.lines.map((l) => ({
      description: l.description,
      quantity: l.quantity,
      unit_amount: l.unitAmount,
      amount: l.amount,
      tax_rate: rate(l.taxRateBasisPoints),
      tax: l.tax,
    })),
    subtotal: d.subtotal,
    tax: d.tax,
    total: d.total,
    currency: d.currency,
    tax_treatment: d.taxTreatment
      ? {
          country: d.taxTreatment.country,
          name: d.taxTreatment.name,
          rate: rate(d.taxTreatment.rateBasisPoints),
          prices_include_tax: d.taxTreatment.inclusive,
          reverse_charge: d.taxTreatment.reverseCharge,
        }
      : null,
    // Another currency than the settlement currency: the total and tax as booked, and the rate.
    booked: d.booked ?? null,
    notes: notesOf(d),
    display: {
      subtotal: formatMoney({ amount: d.subtotal, currency: d.currency }),
      tax: formatMoney({ amount: d.tax, currency: d.currency }),
      total: formatMoney({ amount: d.total, currency: d.currency }),
    },
  };
}

/** What the document must say beside the figures: its tax (the reverse charge stated as such), and what another currency was booked as. */
function notesOf(d: IssuedDocument): string[] {
  return [...taxNotes(d), ...bookedNotes(d)];
}

function taxNotes(d: IssuedDocument): string[] {
  const t = d.taxTreatment;
  if (!t) return [];
  if (t.reverseCharge) return ['Reverse charge: no tax is charged; the buyer accounts for it (VAT reverse charge).'];
  return [`${t.name} ${rate(t.rateBasisPoints)} (${t.country}), ${t.inclusive ? 'included in the prices' : 'added to the prices'}.`];
}

function bookedNotes(d: IssuedDocument): string[] {
  const b = d.booked;
  if (!b) return [];
  return [
    `Booked in ${b.currency} at 1 ${d.currency} = ${b.rate} ${b.currency} (${b.source}, ${b.day}): total ${amount(b.total, b.currency)}, of which tax ${amount(b.tax, b.currency)}.`,
  ];
}

const title = (d: IssuedDocument) => `${d.kind === 'invoice' ? 'Invoice' : 'Credit note'} ${d.number}`;

/** The text blocks both renderings print, in order: heading facts, parties, lines, totals. */
function blocks(d: IssuedDocument) {
  const body = documentBody(d);
  const facts: Array<[string, string]> = [
    ['Number', d.number],
    ['Issued', d.issuedAt.slice(0, 10)],
    ...(d.kind === 'credit_note' ? ([['Credits invoice', d.invoiceNumber]] as Array<[string, string]>) : []),
    ['Payment', d.paymentId],
  ];
  const seller = [
    d.seller.name,
    ...d.seller.addressLines,
    d.seller.country ?? '',
    d.seller.taxId ? `Tax id ${d.seller.taxId}` : '',
    d.seller.email ?? '',
  ].filter((l) => l);
  const b = body.buyer;
  const place = [b.postal_code, b.city].filter((l) => l).join(' ');
  const buyer = [b.name, ...b.address_lines, place, b.region ?? '', b.country ?? '', b.tax_id ? `Tax id ${b.tax_id}` : '', `Account ${b.account_id}`].filter(
    (l) => l,
  );
  const lines = d.lines.map((l) => ({
    description: l.description,
    quantity: String(l.quantity),
    unit: amount(l.unitAmount, d.currency),
    taxRate: rate(l.taxRateBasisPoints),
    tax: amount(l.tax, d.currency),
    amount: amount(l.amount, d.currency),
  }));
  const totals: Array<[string, string]> = [
    ['Subtotal', amount(d.subtotal, d.currency)],
    [
      d.taxTreatment && !d.taxTreatment.reverseCharge ? `Tax (${d.taxTreatment.name} ${rate(d.taxTreatment.rateBasisPoints)})` : 'Tax',
      amount(d.tax, d.currency),
    ],
    [d.kind === 'invoice' ? 'Total paid' : 'Total credited', amount(d.total, d.currency)],
  ];
  return { facts, seller, buyer, lines, totals, notes: body.notes };
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A printable page: no script, no style from elsewhere. */
export function documentHtml(d: IssuedDocument): string {
  const { facts, seller, buyer, lines, totals, notes } = blocks(d);
  const e = escapeHtml;
  const rows = (pairs: Array<[string, string]>) => pairs.map(([k, v]) => `<tr><th scope="row">${e(k)}</th><td>${e(v)}</td></tr>`).join('');
  const address = (who: string, ls: string[]) => `<section><h2>${who}</h2><p>${ls.map(e).join('<br>')}</p></section>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${e(title(d))}</title></head><body><h1>${e(title(d))}</h1><table>${rows(facts)}</table>${address('Seller', seller)}${address('Bill to', buyer)}<table><thead><tr><th>Description</th><th>Quantity</th><th>Unit price</th><th>Tax rate</th><th>Tax</th><th>Amount</th></tr></thead><tbody>${lines
    .map(
      (l) =>
        `<tr><td>${e(l.description)}</td><td>${l.quantity}</td><td>${e(l.unit)}</td><td>${e(l.taxRate)}</td><td>${e(l.tax)}</td><td>${e(l.amount)}</td></tr>`,
    )
    .join('')}</tbody></table><table>${rows(totals)}</table>${notes.map((n) => `<p class="note">${e(n)}</p>`).join('')}</body></html>`;
}

/** The same document as a PDF (standard fonts, so its text is extractable). */
export function documentPdf(d: IssuedDocument): Promise<Buffer> {
  const { facts, seller, buyer, lines, totals, notes } = blocks(d);
  const pdf = new PDFDocument({ size: 'A4', margin: 50, info: { Title: title(d), Author: d.seller.name }, compress: true });
  const chunks: Buffer[] = [];
  pdf.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on('end', () => resolve(Buffer.concat(chunks)));
    pdf.on('error', reject);
  });
  pdf.font('Helvetica-Bold').fontSize(18).text(title(d));
  pdf.moveDown(0.5).font('Helvetica').fontSize(10);
  for (const [k, v] of facts) pdf.text(`${k}: ${v}`);
  pdf.moveDown();
  pdf.font('Helvetica-Bold').text('Seller').font('Helvetica');
  for (const l of seller) pdf.text(l);
  pdf.moveDown();
  pdf.font('Helvetica-Bold').text('Bill to').font('Helvetica');
  for (const l of buyer) pdf.text(l);
  pdf.moveDown();
  for (const l of lines) {
    pdf.font('Helvetica-Bold').text(l.description).font('Helvetica');
    pdf.text(`Quantity: ${l.quantity}   Unit price: ${l.unit}   Tax rate: ${l.taxRate}   Tax: ${l.tax}   Amount: ${l.amount}`);
  }
  pdf.moveDown();
  for (const [k, v] of totals) pdf.text(`${k}: ${v}`);
  if (notes.length) pdf.moveDown();
  for (const n of notes) pdf.text(n);
  pdf.end();
  return done;
}
