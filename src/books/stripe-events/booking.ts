// What the handlers share: a Stripe payment booked (or kept as unmatched when it names no known
// account, plan or pack, or another currency), a paid Checkout Session or subscription invoice, and
// the Tollgate payment a charge-level notice is about. Every booking is idempotent by Stripe's ids
// (the payment id derives from the PaymentIntent's or the invoice's), so a notice run again books
// nothing twice.
import type Stripe from 'stripe';
import { metadataFor } from '../../ledger/ledger.ts';
import { streams } from '../../ledger/events.ts';
import { DomainError } from '../../ledger/errors.ts';
import { unmatchedDecider } from '../unmatched.ts';
import { paymentIdFor, purchaseOf, type Purchase } from '../payments.ts';
import { earlierPaidInvoices, invoiceIntentId, invoiceOfIntent, paidInvoiceOf, type PaidInvoice } from '../stripe-subscriptions.ts';
import { ACTOR, idOf, intent, type Outcome, type StripeContext } from './context.ts';
import { accountState } from '../../accounts/index.ts';

async function unmatched(ctx: StripeContext, processorPaymentId: string, amount: number, currency: string, reason: string, details: Record<string, string>) {
  await ctx.ledger.command(
    unmatchedDecider,
    streams.unmatchedPayments(),
    { type: 'Record', payment: { processor: 'stripe', processorPaymentId, amount, currency: currency.slice(0, 10), reason, details } },
    metadataFor(ACTOR),
  );
  ctx.log.warn({ processorPaymentId, reason }, 'stripe payment unmatched: recorded for the operator');
  return 'unmatched' as const;
}

/** Why a payment cannot be granted (null: it can), checked before anything is appended. */
async function mismatch(ctx: StripeContext, accountId: string | undefined, purchase: () => Purchase, currency: string): Promise<string | null> {
  if (!accountId || !(await accountState(ctx.ledger, accountId).catch(() => null))?.opened) return 'no known account';
  try {
    await ctx.payments.resolve(purchase());
  } catch (err) {
    if (err instanceof DomainError) return `no known plan or pack (${err.message})`;
    throw err;
  }
  // Another currency is matched when the item is offered in it (booked at the day's exchange rate).
  const settlement = (await ctx.payments.priceList()).currency;
  if (currency !== settlement && !(await ctx.payments.resolve(purchase(), currency).catch(() => null))?.listPrice)
    return `paid in ${currency}, which the item is not offered in (the ledger settles in ${settlement})`;
  return null;
}

async function pay(
  ctx: StripeContext,
  input: {
    processorPaymentId: string;
    amount: number;
    currency: string;
    metadata: Record<string, string>;
    fee: number | null;
    /** The fee's currency when Stripe says (its balance's): null, the payment's. */
    feeCurrency?: string | null;
    reference: string;
    /** When the grant starts (a subscription invoice: the start of the period it paid for). */
    at?: Date;
  },
): Promise<Outcome> {
  const { metadata } = input;
  const purchase = () => purchaseOf(metadata.plan_id, metadata.pack_id);
  const why = await mismatch(ctx, metadata.account_id, purchase, input.currency);
  if (why) return unmatched(ctx, input.processorPaymentId, input.amount, input.currency, why, { ...metadata, reference: input.reference });
  const res = await ctx.payments.recordPayment({
    accountId: metadata.account_id,
    processor: 'stripe',
    processorPaymentId: input.processorPaymentId,
    amount: input.amount,
    currency: input.currency,
    fee: input.fee,
    feeCurrency: input.feeCurrency ?? null,
    reference: input.reference,
    purchase: purchase(),
    actor: ACTOR,
    now: input.at,
  });
  return res.recorded ? 'recorded' : 'already_recorded';
}

const feeOf = async (ctx: StripeContext, piId: string) => {
  const { fee, feeCurrency } = await intent(ctx, piId);
  return { fee, feeCurrency };
};

/** A paid invoice of a recurring plan, by the invoice's id; the fee from its PaymentIntent's balance transaction. */
async function payInvoice(ctx: StripeContext, invoice: PaidInvoice): Promise<Outcome> {
  const piId = await invoiceIntentId(ctx.stripe, invoice.invoiceId);
  return pay(ctx, {
    processorPaymentId: invoice.invoiceId,
    amount: invoice.amount,
    currency: invoice.currency,
    metadata: invoice.metadata,
    ...(piId ? await feeOf(ctx, piId) : { fee: null }),
    reference: invoice.subscriptionId ? `${invoice.subscriptionId} ${invoice.invoiceId}` : invoice.invoiceId,
    // A period that Stripe dates ahead of this clock starts now: the plan is usable once paid.
    at: new Date(Math.min(invoice.periodStart, Date.now())),
  });
}

/** A paid invoice, after every earlier paid period of its subscription (a renewal notice may overtake the one before). */
export async function paidInvoice(ctx: StripeContext, invoice: PaidInvoice): Promise<Outcome> {
  for (const earlier of await earlierPaidInvoices(ctx.stripe, invoice)) await payInvoice(ctx, earlier);
  return payInvoice(ctx, invoice);
}

/** A paid Checkout Session: a pack or one period by its PaymentIntent, a subscription's first period by its invoice. */
export async function paidSession(ctx: StripeContext, session: Stripe.Checkout.Session): Promise<Outcome> {
  // A subscription's first period is its first invoice, which invoice.paid also announces: one payment, by the invoice's id.
  const invoiceId = session.mode === 'subscription' ? idOf(session.invoice) : null;
  if (invoiceId) return paidInvoice(ctx, paidInvoiceOf(await ctx.stripe.invoices.retrieve(invoiceId)));
  const piId = idOf(session.payment_intent);
  const { fee, feeCurrency, metadata } = piId ? await intent(ctx, piId) : { fee: null, feeCurrency: null, metadata: {} };
  return pay(ctx, {
    processorPaymentId: piId ?? session.id,
    amount: session.amount_total ?? 0,
    currency: (session.currency ?? '').toUpperCase(),
    metadata: { ...metadata, ...(session.metadata ?? {}) },
    fee,
    feeCurrency,
    reference: session.id,
  });
}

type Found = { accountId: string; paymentId: string } | null;

const hasPayment = async (ctx: StripeContext, accountId: string | undefined, paymentId: string) =>
  !!accountId && !!(await accountState(ctx.ledger, accountId).catch(() => null))?.payments.has(paymentId);

/**
 * The account and Tollgate payment a charge-level notice is about (by its PaymentIntent). A notice
 * that overtakes the payment's own (Stripe does not promise order) records the payment first,
 * from the PaymentIntent, which names the same account and purchase.
 */
export async function paymentOfIntent(ctx: StripeContext, piId: string | null): Promise<Found> {
  if (!piId) return null;
  const pi = await intent(ctx, piId);
  if (!pi.metadata.account_id) return paymentOfInvoice(ctx, await invoiceOfIntent(ctx.stripe, piId));
  const paymentId = paymentIdFor('stripe', piId);
  const accountId = pi.metadata.account_id;
  if (!(await hasPayment(ctx, accountId, paymentId)) && pi.succeeded)
    await pay(ctx, {
      processorPaymentId: piId,
      amount: pi.amount,
      currency: pi.currency,
      metadata: pi.metadata,
      fee: pi.fee,
      feeCurrency: pi.feeCurrency,
      reference: piId,
    });
  return (await hasPayment(ctx, accountId, paymentId)) ? { accountId, paymentId } : null;
}

/** The same for a subscription's payment: its PaymentIntent names no account, its invoice does (and is the payment's id). */
async function paymentOfInvoice(ctx: StripeContext, invoiceId: string | null): Promise<Found> {
  if (!invoiceId) return null;
  const invoice = paidInvoiceOf(await ctx.stripe.invoices.retrieve(invoiceId));
  const accountId = invoice.metadata.account_id;
  const paymentId = paymentIdFor('stripe', invoiceId);
  if (accountId && !(await hasPayment(ctx, accountId, paymentId))) await paidInvoice(ctx, invoice);
  return (await hasPayment(ctx, accountId, paymentId)) ? { accountId, paymentId } : null;
}
