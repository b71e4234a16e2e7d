// Recurring plans on Stripe's side: the Stripe Price of one plan period (looked up by a lookup key
// that names the plan, its list price and its period, created the first time), and what a paid
// subscription invoice says: the account and plan (the subscription's metadata, which Stripe copies
// onto each invoice), the amount, the period it paid for, and its fee (from the balance transaction
// of the invoice's PaymentIntent). Renewals are recorded in period order: a notice that overtakes an
// earlier period's first records the earlier paid invoices, read back from Stripe.
import type Stripe from 'stripe';
import { invalid } from '../ledger/errors.ts';
import type { PlanTerms } from '../ledger/events.ts';
import type { Money } from '../money/money.ts';

/** Stripe bills a recurring price at most yearly: a plan period of up to 365 days (interval 'day'). */
export const MAX_RECURRING_DAYS = 365;

const idOf = (v: string | { id: string } | null | undefined): string | null => (typeof v === 'string' ? v : (v?.id ?? null));

/** The lookup key of a plan's recurring price: a new list price or period is a new Stripe Price, old subscriptions keep theirs. */
export const recurringLookupKey = (planId: string, price: Money, validityDays: number): string =>
  `tollgate_plan_${planId}_${price.amount}_${price.currency}_${validityDays}d`;

/** The id of the Stripe Price that bills `plan` every period at `price`. */
export async function recurringPriceId(stripe: Stripe, plan: PlanTerms, price: Money): Promise<string> {
  if (plan.validityDays > MAX_RECURRING_DAYS)
    throw invalid(`plan ${plan.planId} lasts ${plan.validityDays} days; Stripe renews at most every ${MAX_RECURRING_DAYS} days`, { param: 'plan_id' });
  const lookupKey = recurringLookupKey(plan.planId, price, plan.validityDays);
  const found = await stripe.prices.list({ lookup_keys: [lookupKey], active: true, limit: 1 });
  if (found.data[0]) return found.data[0].id;
  // The idempotency key makes two gateways creating it at once get the same Price.
  const created = await stripe.prices.create(
    {
      lookup_key: lookupKey,
      currency: price.currency.toLowerCase(),
      unit_amount: price.amount,
      recurring: { interval: 'day', interval_count: plan.validityDays },
      product_data: { name: `Plan ${plan.name} (${plan.quota} tokens every ${plan.validityDays} days)` },
      metadata: { plan_id: plan.planId },
    },
    { idempotencyKey: lookupKey },
  );
  return created.id;
}

/** What Tollgate records of a paid subscription invoice. */
export interface PaidInvoice {
  invoiceId: string;
  subscriptionId: string | null;
  metadata: Record<string, string>;
  amount: number;
  currency: string;
  /** The start of the period it paid for (ms): the plan period it grants starts there. */
  periodStart: number;
}

export function paidInvoiceOf(invoice: Stripe.Invoice): PaidInvoice {
  const details = invoice.parent?.subscription_details;
  const line = invoice.lines?.data?.[0];
  return {
    invoiceId: invoice.id ?? '',
    subscriptionId: idOf(details?.subscription),
    metadata: { ...(details?.metadata ?? {}), ...(invoice.metadata ?? {}) },
    amount: invoice.amount_paid,
    currency: invoice.currency.toUpperCase(),
    periodStart: (line?.period?.start ?? invoice.created) * 1000,
  };
}

/** The subscription's paid invoices for periods before `invoice`'s, oldest first (to be recorded before it). */
export async function earlierPaidInvoices(stripe: Stripe, invoice: PaidInvoice): Promise<PaidInvoice[]> {
  if (!invoice.subscriptionId) return [];
  const earlier: PaidInvoice[] = [];
  for await (const inv of stripe.invoices.list({ subscription: invoice.subscriptionId, status: 'paid', limit: 100 })) {
    const paid = paidInvoiceOf(inv);
    if (paid.invoiceId !== invoice.invoiceId && paid.periodStart < invoice.periodStart) earlier.push(paid);
  }
  return earlier.sort((a, b) => a.periodStart - b.periodStart);
}

/** The PaymentIntent that paid an invoice (null: paid otherwise, e.g. from the customer's credit balance). */
export async function invoiceIntentId(stripe: Stripe, invoiceId: string): Promise<string | null> {
  const payments = await stripe.invoicePayments.list({ invoice: invoiceId, status: 'paid', limit: 1 });
  const payment = payments.data[0]?.payment;
  return payment?.type === 'payment_intent' ? idOf(payment.payment_intent) : null;
}

/** The invoice a PaymentIntent paid (for a refund or dispute of a subscription payment), or null. */
export async function invoiceOfIntent(stripe: Stripe, paymentIntentId: string): Promise<string | null> {
  const payments = await stripe.invoicePayments.list({ payment: { type: 'payment_intent', payment_intent: paymentIntentId }, limit: 1 });
  return idOf(payments.data[0]?.invoice);
}
