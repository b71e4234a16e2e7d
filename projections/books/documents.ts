// Invoices and credit notes, one row per document to issue: a payment's invoice from its payment
// on, a refund's credit note from its refund on, each filled in once its document is issued. The
// rows still without a number are the issuer's work (src/books/document-issuer.ts); the others
// are what the API, /app and the CLI list and download.
import type { Queryable } from '../../src/eventstore/db.ts';
import { defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { fromTable, q } from '../runner/sql.ts';

export interface DocumentRow extends Row {
  kind: 'invoice' | 'credit_note';
  account_id: string;
  payment_id: string;
  refund_id: string | null;
  /** Where what it documents is in the log: documents are issued in that order. */
  source_position: number;
  /** What it documents: the payment's or refund's facts. */
  source: Record<string, unknown>;
  number: string | null;
  issued_at: string | null;
  /** The issued event's data, as it was issued. */
  document: Record<string, unknown> | null;
}

export const invoiceKey = (paymentId: string): string => `invoice:${paymentId}`;
export const creditNoteKey = (paymentId: string, refundId: string): string => `credit_note:${paymentId}:${refundId}`;

/** Payments of redemption codes are left out: the code was sold, and invoiced, where it was sold. */
const invoiced = (processor: unknown) => processor !== 'code';

export const documents = defineProjection<DocumentRow>({
  name: 'documents',
  table: 'documents',
  columns: `kind text NOT NULL, account_id text NOT NULL, payment_id text NOT NULL, refund_id text, source_position bigint NOT NULL,
    source jsonb NOT NULL, number text, issued_at timestamptz, document jsonb`,
  // The issuer's look-up of the work left reads only the rows without a number.
  indexes: ['account_id, issued_at', 'issued_at', 'number', 'source_position WHERE number IS NULL'],
  handles: new Set(['PaymentReceived', 'PaymentRefunded', 'InvoiceIssued', 'CreditNoteIssued']),
  keysOf(e) {
    const d = e.data as { paymentId: string; refundId?: string; processor?: string };
    if (e.type === 'PaymentReceived') return invoiced(d.processor) ? [invoiceKey(d.paymentId)] : [];
    if (e.type === 'InvoiceIssued') return [invoiceKey(d.paymentId)];
    return [creditNoteKey(d.paymentId, d.refundId!)];
  },
  evolve(row, e) {
    if (e.type === 'PaymentReceived') {
      const d = eventData<'PaymentReceived'>(e);
      return { ...blank('invoice', d.accountId, d.paymentId, null, e.position), ...row, source: { ...d } };
    }
    if (e.type === 'PaymentRefunded') {
      const d = eventData<'PaymentRefunded'>(e);
      // A refund of a payment that has no invoice (a redemption code's) has no credit note either.
      return { ...blank('credit_note', d.accountId, d.paymentId, d.refundId, e.position), ...row, source: { ...d } };
    }
    const d = eventData<'InvoiceIssued'>(e);
    const base = row ?? blank(e.type === 'InvoiceIssued' ? 'invoice' : 'credit_note', d.accountId, d.paymentId, null, e.position);
    return { ...base, number: d.number, issued_at: d.issuedAt, document: { ...d } };
  },
});

function blank(kind: DocumentRow['kind'], accountId: string, paymentId: string, refundId: string | null, position: number): DocumentRow {
  return {
    kind,
    account_id: accountId,
    payment_id: paymentId,
    refund_id: refundId,
    source_position: position,
    source: {},
    number: null,
    issued_at: null,
    document: null,
  };
}

const table = (schema: string) => q(schema, documents.table);
const rows = (found: Row[]) => found.map((r) => fromTable<DocumentRow>(r));

/** Documents not issued yet, in the order of what they document. */
export async function pending(db: Queryable, schema: string, limit: number): Promise<DocumentRow[]> {
  // A refund's credit note waits for its payment's invoice; a payment that never has one (a code's) has none.
  return rows(
    await db.query(
      `SELECT * FROM ${table(schema)} d WHERE number IS NULL
         AND (kind = 'invoice' OR EXISTS (SELECT 1 FROM ${table(schema)} i WHERE i.key = 'invoice:' || d.payment_id))
       ORDER BY source_position LIMIT $1`,
      [limit],
    ),
  );
}

/** The issued invoice of a payment, if any. */
export async function invoiceOfPayment(db: Queryable, schema: string, paymentId: string): Promise<DocumentRow | null> {
  const [row] = await db.query(`SELECT * FROM ${table(schema)} WHERE key = $1 AND number IS NOT NULL`, [invoiceKey(paymentId)]);
  return row ? rows([row])[0] : null;
}

/** Issued documents, newest first: an account's, or every account's. */
export async function issued(db: Queryable, schema: string, opts: { accountId?: string; limit: number }): Promise<DocumentRow[]> {
  const where = opts.accountId === undefined ? '' : 'AND account_id = $2';
  const params: unknown[] = opts.accountId === undefined ? [opts.limit] : [opts.limit, opts.accountId];
  return rows(await db.query(`SELECT * FROM ${table(schema)} WHERE number IS NOT NULL ${where} ORDER BY issued_at DESC, number DESC LIMIT $1`, params));
}

/** One issued document by its number. */
export async function byNumber(db: Queryable, schema: string, number: string): Promise<DocumentRow | null> {
  const [row] = await db.query(`SELECT * FROM ${table(schema)} WHERE number = $1`, [number]);
  return row ? rows([row])[0] : null;
}
