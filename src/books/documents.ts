// Invoices and credit notes: what each says, and how it is numbered. Pure.
//
// A series and year is one stream (`documents-TG-2026`) whose revision is the number: the next
// document is decided on the stream's state and appended at the revision it was decided on, so
// two gateways issuing at once cannot take one number twice or skip one (the loser decides again
// on the newer state). A document's event id comes from what it documents (the payment, the
// refund): a second issue of the same document is refused by the store, whatever its number or
// year would have been, and refused appends take no number.
import type { Decider } from '../ledger/decider.ts';
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { uuidFrom } from '../ledger/event-ids.ts';
import type { TaxApplied, TaxTreatment } from '../money/tax.ts';

export type InvoiceData = EventDataByType['InvoiceIssued'];
export type CreditNoteData = EventDataByType['CreditNoteIssued'];
export type Seller = InvoiceData['seller'];
export type Buyer = InvoiceData['buyer'];
export type DocumentLine = InvoiceData['lines'][number];

/** What is numbered when issued; the rest the document says is decided before. */
type Numbering = 'number' | 'series' | 'year' | 'sequence';
export type UnnumberedInvoice = Omit<InvoiceData, Numbering>;
export type UnnumberedCreditNote = Omit<CreditNoteData, Numbering>;

/** A series is 1–10 capitals and digits, starting with a capital (TG); its credit notes are `TG-CN`. */
export const SERIES_PATTERN = /^[A-Z][A-Z0-9]{0,9}$/;
export const creditNoteSeries = (series: string): string => `${series}-CN`;

export function documentNumber(series: string, year: number, sequence: number): string {
  return `${series}-${year}-${String(sequence).padStart(6, '0')}`;
}

/** The id of the one event that may document a payment (its invoice) or a refund (its credit note). */
export const invoiceEventId = (paymentId: string): string => uuidFrom(`invoice|${paymentId}`);
export const creditNoteEventId = (paymentId: string, refundId: string): string => uuidFrom(`credit-note|${paymentId}|${refundId}`);

export interface SeriesState {
  /** Documents in this series and year so far: the last number's sequence. */
  issued: number;
}

export type SeriesCommand =
  | { type: 'IssueInvoice'; series: string; year: number; invoice: UnnumberedInvoice }
  | { type: 'IssueCreditNote'; series: string; year: number; creditNote: UnnumberedCreditNote };

export const documentSeriesDecider: Decider<SeriesState, SeriesCommand, StreamEvents['documents']> = {
  initialState: () => ({ issued: 0 }),
  decide(c, s) {
    const sequence = s.issued + 1;
    const numbering = { number: documentNumber(c.series, c.year, sequence), series: c.series, year: c.year, sequence };
    if (c.type === 'IssueInvoice') return [{ type: 'InvoiceIssued', data: { ...numbering, ...c.invoice } }];
    return [{ type: 'CreditNoteIssued', data: { ...numbering, ...c.creditNote } }];
  },
  evolve: (s, e) => {
    // Numbers follow the stream: a document out of order would mean a second writer without the revision check.
    if (e.data.sequence !== s.issued + 1) throw new Error(`document ${e.data.number} out of sequence after ${s.issued}`);
    return { issued: e.data.sequence };
  },
};

/** One line of a document: `net` before tax, and the tax on it at the payment's rate (no treatment: untaxed). */
export function documentLine(description: string, net: number, tax: number, treatment: TaxTreatment | null): DocumentLine {
  return { description, quantity: 1, unitAmount: net, amount: net, taxRateBasisPoints: treatment?.rateBasisPoints ?? 0, tax };
}

/** The totals of some lines: subtotal before tax, tax, and what is due. */
export function totalsOf(lines: DocumentLine[]): { subtotal: number; tax: number; total: number } {
  const subtotal = lines.reduce((sum, l) => sum + l.amount, 0);
  const tax = lines.reduce((sum, l) => sum + l.tax, 0);
  return { subtotal, tax, total: subtotal + tax };
}

export interface PaymentFacts {
  accountId: string;
  paymentId: string;
  amount: number;
  currency: string;
  /** What the payment bought, as a line's text (the plan's or pack's name and its tokens). */
  description: string;
  /** The tax the amount held, as the payment recorded it (null: untaxed). */
  tax: TaxApplied | null;
  /** In another currency than the settlement currency: as booked in that one. */
  booked?: InvoiceData['booked'];
}

/** A treatment without its amount, as a document states it. */
const treatmentOf = (t: TaxApplied | null | undefined): TaxTreatment | null =>
  t ? { country: t.country, name: t.name, rateBasisPoints: t.rateBasisPoints, inclusive: t.inclusive, reverseCharge: t.reverseCharge } : null;

/** The invoice of a payment: one line, the amount paid less its tax, and the tax; the total is what was paid. */
export function invoiceOf(payment: PaymentFacts, parties: { seller: Seller; buyer: Buyer }, issuedAt: Date): UnnumberedInvoice {
  const tax = payment.tax?.amount ?? 0;
  const treatment = treatmentOf(payment.tax);
  const lines = [documentLine(payment.description, payment.amount - tax, tax, treatment)];
  return {
    accountId: payment.accountId,
    paymentId: payment.paymentId,
    issuedAt: issuedAt.toISOString(),
    seller: parties.seller,
    buyer: parties.buyer,
    lines,
    ...totalsOf(lines),
    currency: payment.currency,
    ...(treatment ? { taxTreatment: treatment } : {}),
    ...(payment.booked ? { booked: payment.booked } : {}),
  };
}

export interface RefundFacts {
  paymentId: string;
  refundId: string;
  amount: number;
  currency: string;
  reason: 'refund' | 'dispute_lost';
  /** The payment's tax given back with it (0: none). */
  taxRefunded: number;
  /** In another currency than the settlement currency: as booked in that one. */
  booked?: InvoiceData['booked'];
}

/** The credit note of a refund on an invoiced payment: the amount given back, against that invoice, to the parties it names, taxed as the invoice was. */
export function creditNoteOf(
  refund: RefundFacts,
  invoice: Pick<InvoiceData, 'number' | 'accountId' | 'seller' | 'buyer' | 'taxTreatment'>,
  issuedAt: Date,
): UnnumberedCreditNote {
  const what = refund.reason === 'refund' ? 'Refund' : 'Lost dispute';
  const treatment = invoice.taxTreatment ?? null;
  const lines = [documentLine(`${what} on invoice ${invoice.number}`, refund.amount - refund.taxRefunded, refund.taxRefunded, treatment)];
  return {
    accountId: invoice.accountId,
    paymentId: refund.paymentId,
    refundId: refund.refundId,
    invoiceNumber: invoice.number,
    reason: refund.reason,
    issuedAt: issuedAt.toISOString(),
    seller: invoice.seller,
    buyer: invoice.buyer,
    lines,
    ...totalsOf(lines),
    currency: refund.currency,
    ...(treatment ? { taxTreatment: treatment } : {}),
    ...(refund.booked ? { booked: refund.booked } : {}),
  };
}
