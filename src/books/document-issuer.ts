// Issues the invoices and credit notes the log asks for: every payment's invoice, every refund's
// credit note (documents.ts says what each holds). It follows the documents read model, whose rows
// without a number are the work left, so a payment recorded by any process (a Stripe webhook on
// another gateway, a crash between payment and invoice) gets its invoice from whichever process
// runs next. Every gateway and the projector run it: two issuing the same document append it once
// (its event id comes from what it documents), and the numbers stay gap-free (documents.ts).
import type { Ledger } from '../ledger/ledger.ts';
import { serialRuns } from '../serial-runs.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import { accountState, planTerms } from '../accounts/index.ts';
import * as documentRows from '../../projections/books/documents.ts';
import { priceListDecider } from './prices.ts';
import { billingProfileDecider } from './billing-profile.ts';
import type { EventDataByType } from '../ledger/events.ts';
import {
  creditNoteEventId,
  creditNoteOf,
  creditNoteSeries,
  documentSeriesDecider,
  invoiceEventId,
  invoiceOf,
  type Buyer,
  type InvoiceData,
  type Seller,
} from './documents.ts';

export interface DocumentSettings {
  /** TOLLGATE_INVOICE_SERIES: the invoices' series (credit notes: `<series>-CN`). */
  series: string;
  /** The operator's details every document carries. */
  seller: Seller;
}

const BATCH = 100;
const ISSUER = 'system:documents';

export function createDocumentIssuer(ledger: Ledger, settings: DocumentSettings, opts: { now?: () => Date } = {}) {
  const now = opts.now ?? (() => new Date());
  const { db, schema } = ledger.readModels;

  async function buyerOf(accountId: string): Promise<Buyer> {
    const account = await accountState(ledger, accountId);
    const { profile } = await ledger.streamState(billingProfileDecider, streams.billingProfile(accountId));
    return { accountId, name: account.name, profile: profile && { ...profile } };
  }

  async function describe(item: { kind: 'plan'; planId: string; tokens: number } | { kind: 'pack'; packId: string; tokens: number }): Promise<string> {
    const tokens = item.tokens.toLocaleString('en-US');
    if (item.kind === 'plan') {
      const plan = await planTerms(ledger, item.planId).catch(() => null);
      return `${plan?.name ?? item.planId} plan, one period (${tokens} tokens)`;
    }
    const pack = (await ledger.streamState(priceListDecider, streams.priceList())).packs[item.packId];
    return `${pack?.name ?? item.packId} token pack (${tokens} tokens)`;
  }

  /** Appends one document; false when it was already issued (by this process or another). */
  async function issue(series: string, at: Date, command: Parameters<typeof documentSeriesDecider.decide>[0], eventId: string): Promise<boolean> {
    try {
      await ledger.command(documentSeriesDecider, streams.documents(series, at.getUTCFullYear()), command, metadataFor(ISSUER), () => eventId);
      return true;
    } catch (err) {
      if (err instanceof DuplicateEventError) return false;
      throw err;
    }
  }

  async function issueRow(row: documentRows.DocumentRow): Promise<boolean> {
    const at = now();
    const year = at.getUTCFullYear();
    if (row.kind === 'invoice') {
      const paid = row.source as EventDataByType['PaymentReceived'];
      // A payment in another currency is invoiced in it, with what it was booked as.
      const fx = paid.fx;
      const invoice = invoiceOf(
        {
          accountId: row.account_id,
          paymentId: row.payment_id,
          amount: fx ? fx.amount : paid.amount,
          currency: fx ? fx.currency : paid.currency,
          description: await describe(paid.item),
          tax: paid.tax ? { ...paid.tax, amount: fx ? fx.tax : paid.tax.amount } : null,
          ...(fx ? { booked: { currency: paid.currency, total: paid.amount, tax: paid.tax?.amount ?? 0, rate: fx.rate, day: fx.day, source: fx.source } } : {}),
        },
        { seller: settings.seller, buyer: await buyerOf(row.account_id) },
        at,
      );
      return issue(settings.series, at, { type: 'IssueInvoice', series: settings.series, year, invoice }, invoiceEventId(row.payment_id));
    }
    const invoiceRow = await documentRows.invoiceOfPayment(db, schema, row.payment_id);
    if (!invoiceRow?.document) return false; // its invoice is not issued yet: the next pass
    const refund = row.source as EventDataByType['PaymentRefunded'];
    const series = creditNoteSeries(settings.series);
    // A refund in another currency is credited in it, at its payment's rate as booked.
    const fx = refund.fx;
    const creditNote = creditNoteOf(
      {
        paymentId: row.payment_id,
        refundId: row.refund_id!,
        amount: fx ? fx.amount : refund.amount,
        currency: fx ? fx.currency : refund.currency,
        reason: refund.reason,
        taxRefunded: fx ? fx.taxRefunded : (refund.taxRefunded ?? 0),
        ...(fx
          ? { booked: { currency: refund.currency, total: refund.amount, tax: refund.taxRefunded ?? 0, rate: fx.rate, day: fx.day, source: fx.source } }
          : {}),
      },
      invoiceRow.document as unknown as InvoiceData,
      at,
    );
    return issue(series, at, { type: 'IssueCreditNote', series, year, creditNote }, creditNoteEventId(row.payment_id, row.refund_id!));
  }

  /** Issues what is pending, in the order of what it documents; resolves with how many this call issued. */
  async function issuePending(): Promise<number> {
    let issued = 0;
    for (;;) {
      const rows = await documentRows.pending(db, schema, BATCH);
      let progress = 0;
      for (const row of rows) if (await issueRow(row)) progress++;
      issued += progress;
      if (rows.length < BATCH || progress === 0) return issued;
      // The rows just issued leave the pending list once the read models have them.
      await ledger.readYourWrites();
    }
  }

  return {
    issuePending,
    /** Issues what is pending now, one pass at a time (serial-runs.ts). */
    run: serialRuns(issuePending),
  };
}

export type DocumentIssuer = ReturnType<typeof createDocumentIssuer>;
