// Stripe, through the official client: Checkout Sessions for a plan period or a pack, and the
// webhook's events turned into payments, refunds and disputes. The session names the account and
// what is bought (metadata, copied onto its PaymentIntent), so every later notice finds them.
// No card data passes through Tollgate; the secret key and webhook secret are never logged.
import Stripe from 'stripe';
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { unmatchedDecider, type UnmatchedState } from '../money/unmatched.ts';
import { paymentIdFor, purchaseOf, type Payments, type Purchase } from './service.ts';
import { earlierPaidInvoices, invoiceIntentId, invoiceOfIntent, paidInvoiceOf, recurringPriceId, type PaidInvoice } from './stripe-subscriptions.ts';

export interface StripeSettings {
  /** STRIPE_SECRET_KEY: unset turns the Stripe path off. */
  secretKey?: string;
  /** STRIPE_WEBHOOK_SECRET: the endpoint's signing secret (whsec_...). */
  webhookSecret?: string;
  /** STRIPE_API_BASE: another API origin (a local double in tests), e.g. http://127.0.0.1:12111. */
  apiBase?: string;
  /** STRIPE_SUCCESS_URL / STRIPE_CANCEL_URL: where Checkout sends the customer back. */
  successUrl: string;
  cancelUrl: string;
}

const ACTOR = 'stripe:webhook';

type Outcome =
  'recorded' | 'already_recorded' | 'unmatched' | 'waiting' | 'failed' | 'cancelled' | 'resumed' | 'refunded' | 'disputed' | 'dispute_closed' | 'ignored';

export function createStripeGateway(settings: StripeSettings, payments: Payments, ledger: Ledger, log: Logger, opts: { disputeSuspendsKeys: boolean }) {
  if (!settings.secretKey || !settings.webhookSecret) return null;
  const base = settings.apiBase ? new URL(settings.apiBase) : null;
  const stripe = new Stripe(settings.secretKey, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    telemetry: false,
    ...(base ? { host: base.hostname, port: base.port || (base.protocol === 'http:' ? 80 : 443), protocol: base.protocol === 'http:' ? 'http' : 'https' } : {}),
  });
  const webhookSecret = settings.webhookSecret;

  const idOf = (v: string | { id: string } | null | undefined): string | null => (typeof v === 'string' ? v : (v?.id ?? null));

  /** The PaymentIntent with its charge's balance transaction: the account it names and the fee. */
  async function intent(id: string) {
    const pi = await stripe.paymentIntents.retrieve(id, { expand: ['latest_charge.balance_transaction'] });
    const charge = typeof pi.latest_charge === 'object' ? pi.latest_charge : null;
    const bt = charge && typeof charge.balance_transaction === 'object' ? charge.balance_transaction : null;
    return {
      metadata: pi.metadata ?? {},
      fee: bt ? bt.fee : null,
      amount: pi.amount_received || pi.amount,
      currency: pi.currency.toUpperCase(),
      succeeded: pi.status === 'succeeded',
    };
  }

  async function unmatched(processorPaymentId: string, amount: number, currency: string, reason: string, details: Record<string, string>) {
    await ledger.command(
      unmatchedDecider,
      streams.unmatchedPayments(),
      { type: 'Record', payment: { processor: 'stripe', processorPaymentId, amount, currency: currency.slice(0, 10), reason, details } },
      metadataFor(ACTOR),
    );
    log.warn({ processorPaymentId, reason }, 'stripe payment unmatched: recorded for the operator');
    return 'unmatched' as const;
  }

  /** Why a payment cannot be granted (null: it can), checked before anything is appended. */
  async function mismatch(accountId: string | undefined, purchase: () => Purchase, currency: string): Promise<string | null> {
    if (!accountId || !(await ledger.accountState(accountId).catch(() => null))?.opened) return 'no known account';
    try {
      await payments.resolve(purchase());
    } catch (err) {
      if (err instanceof DomainError) return `no known plan or pack (${err.message})`;
      throw err;
    }
    const settlement = (await payments.priceList()).currency;
    if (currency !== settlement) return `paid in ${currency}, the ledger settles in ${settlement}`;
    return null;
  }

  async function pay(input: {
    processorPaymentId: string;
    amount: number;
    currency: string;
    metadata: Record<string, string>;
    fee: number | null;
    reference: string;
    /** When the grant starts (a subscription invoice: the start of the period it paid for). */
    at?: Date;
  }) {
    const { metadata } = input;
    const purchase = () => purchaseOf(metadata.plan_id, metadata.pack_id);
    const why = await mismatch(metadata.account_id, purchase, input.currency);
    if (why) return unmatched(input.processorPaymentId, input.amount, input.currency, why, { ...metadata, reference: input.reference });
    const res = await payments.recordPayment({
      accountId: metadata.account_id,
      processor: 'stripe',
      processorPaymentId: input.processorPaymentId,
      amount: input.amount,
      currency: input.currency,
      fee: input.fee,
      reference: input.reference,
      purchase: purchase(),
      actor: ACTOR,
      now: input.at,
    });
    return res.recorded ? ('recorded' as const) : ('already_recorded' as const);
  }

  /** A paid invoice of a recurring plan, by the invoice's id; the fee from its PaymentIntent's balance transaction. */
  async function payInvoice(invoice: PaidInvoice): Promise<Outcome> {
    const piId = await invoiceIntentId(stripe, invoice.invoiceId);
    return pay({
      processorPaymentId: invoice.invoiceId,
      amount: invoice.amount,
      currency: invoice.currency,
      metadata: invoice.metadata,
      fee: piId ? (await intent(piId)).fee : null,
      reference: invoice.subscriptionId ? `${invoice.subscriptionId} ${invoice.invoiceId}` : invoice.invoiceId,
      // A period that Stripe dates ahead of this clock starts now: the plan is usable once paid.
      at: new Date(Math.min(invoice.periodStart, Date.now())),
    });
  }

  /** A paid invoice, after every earlier paid period of its subscription (a renewal notice may overtake the one before). */
  async function paidInvoice(invoice: PaidInvoice): Promise<Outcome> {
    for (const earlier of await earlierPaidInvoices(stripe, invoice)) await payInvoice(earlier);
    return payInvoice(invoice);
  }

  async function paidSession(session: Stripe.Checkout.Session): Promise<Outcome> {
    // A subscription's first period is its first invoice, which invoice.paid also announces: one payment, by the invoice's id.
    const invoiceId = session.mode === 'subscription' ? idOf(session.invoice) : null;
    if (invoiceId) return paidInvoice(paidInvoiceOf(await stripe.invoices.retrieve(invoiceId)));
    const piId = idOf(session.payment_intent);
    const { fee, metadata } = piId ? await intent(piId) : { fee: null, metadata: {} };
    return pay({
      processorPaymentId: piId ?? session.id,
      amount: session.amount_total ?? 0,
      currency: (session.currency ?? '').toUpperCase(),
      metadata: { ...metadata, ...(session.metadata ?? {}) },
      fee,
      reference: session.id,
    });
  }

  /**
   * The account and Tollgate payment a charge-level notice is about (by its PaymentIntent). A notice
   * that overtakes the payment's own (Stripe does not promise order) records the payment first,
   * from the PaymentIntent, which names the same account and purchase.
   */
  async function paymentOfIntent(piId: string | null): Promise<{ accountId: string; paymentId: string } | null> {
    if (!piId) return null;
    const pi = await intent(piId);
    if (!pi.metadata.account_id) return paymentOfInvoice(await invoiceOfIntent(stripe, piId));
    const paymentId = paymentIdFor('stripe', piId);
    const accountId = pi.metadata.account_id;
    if (accountId && !(await ledger.accountState(accountId).catch(() => null))?.payments.has(paymentId) && pi.succeeded)
      await pay({ processorPaymentId: piId, amount: pi.amount, currency: pi.currency, metadata: pi.metadata, fee: pi.fee, reference: piId });
    if (!accountId || !(await ledger.accountState(accountId).catch(() => null))?.payments.has(paymentId)) return null;
    return { accountId, paymentId };
  }

  /** The same for a subscription's payment: its PaymentIntent names no account, its invoice does (and is the payment's id). */
  async function paymentOfInvoice(invoiceId: string | null): Promise<{ accountId: string; paymentId: string } | null> {
    if (!invoiceId) return null;
    const invoice = paidInvoiceOf(await stripe.invoices.retrieve(invoiceId));
    const accountId = invoice.metadata.account_id;
    const paymentId = paymentIdFor('stripe', invoiceId);
    if (accountId && !(await ledger.accountState(accountId).catch(() => null))?.payments.has(paymentId)) await paidInvoice(invoice);
    if (!accountId || !(await ledger.accountState(accountId).catch(() => null))?.payments.has(paymentId)) return null;
    return { accountId, paymentId };
  }

  /** A subscription's cancellation (or its withdrawal) on the account its metadata names. */
  async function renewal(sub: Stripe.Subscription, change: 'at_period_end' | 'deleted' | 'resume'): Promise<Outcome> {
    const accountId = sub.metadata?.account_id;
    if (!accountId || !(await ledger.accountState(accountId).catch(() => null))?.opened) {
      log.warn({ subscription: sub.id }, 'stripe subscription names no known account: nothing recorded');
      return 'ignored';
    }
    const events = await payments.setRenewal(accountId, 'stripe', sub.id, change, ACTOR);
    if (events.length === 0) return 'already_recorded';
    return change === 'resume' ? 'resumed' : 'cancelled';
  }

  async function handle(event: Stripe.Event): Promise<Outcome> {
    switch (event.type) {
      case 'checkout.session.completed':
        // An asynchronous method (a bank debit) completes the session unpaid: its own event follows.
        return event.data.object.payment_status === 'unpaid' ? 'waiting' : paidSession(event.data.object);
      case 'checkout.session.async_payment_succeeded':
        return paidSession(event.data.object);
      case 'checkout.session.async_payment_failed':
        log.info({ session: event.data.object.id }, 'stripe asynchronous payment failed: nothing granted');
        return 'failed';
      case 'invoice.paid':
        return paidInvoice(paidInvoiceOf(event.data.object));
      case 'invoice.payment_failed':
        // Nothing is granted: the paid period runs out at its expiry, and Stripe retries; a later invoice.paid renews.
        log.info({ invoice: event.data.object.id, attempts: event.data.object.attempt_count }, 'stripe renewal payment failed: nothing granted');
        return 'failed';
      case 'customer.subscription.deleted':
        // Ended: no more renewals. The period already paid for stays until its expiry (its tokens were bought).
        return renewal(event.data.object, 'deleted');
      case 'customer.subscription.updated': {
        // Only the cancellation flag matters here: set, the plan ends with its paid period; cleared, it renews again.
        const sub = event.data.object;
        const before = event.data.previous_attributes as { cancel_at_period_end?: boolean } | undefined;
        if (sub.cancel_at_period_end) return renewal(sub, 'at_period_end');
        return before?.cancel_at_period_end === true ? renewal(sub, 'resume') : 'ignored';
      }
      case 'charge.refunded': {
        const charge = event.data.object;
        const found = await paymentOfIntent(idOf(charge.payment_intent));
        if (!found) return 'ignored';
        const lot = await payments.lotOf(found.accountId, found.paymentId);
        // amount_refunded is the running total: the id of this refund is that total, so a replay is the same refund.
        const amount = charge.amount_refunded - lot.refunded;
        if (amount <= 0) return 'already_recorded';
        await payments.refund(found.accountId, found.paymentId, amount, `${charge.id}:${charge.amount_refunded}`, ACTOR);
        return 'refunded';
      }
      case 'charge.dispute.created': {
        const dispute = event.data.object;
        const found = await paymentOfIntent(idOf(dispute.payment_intent));
        if (!found) return 'ignored';
        await payments.openDispute(found.accountId, found.paymentId, dispute.id, dispute.amount, opts.disputeSuspendsKeys, ACTOR);
        return 'disputed';
      }
      case 'charge.dispute.closed': {
        const dispute = event.data.object;
        const found = await paymentOfIntent(idOf(dispute.payment_intent));
        if (!found) return 'ignored';
        const fee = disputeFeeKept(dispute.balance_transactions ?? []);
        await payments.closeDispute(found.accountId, dispute.id, dispute.status === 'lost' ? 'lost' : 'won', fee, ACTOR);
        return 'dispute_closed';
      }
      default:
        return 'ignored';
    }
  }

  return {
    /**
     * A Checkout Session at the current list price: a plan as a subscription (a Stripe Price per plan
     * period, renewed by Stripe every period; `recurring: false` buys one period once), a pack once.
     */
    async checkout(accountId: string, purchase: Purchase, opts: { recurring?: boolean; returnTo?: { success: string; cancel: string } } = {}) {
      const { listPrice, item, grant } = await payments.resolve(purchase);
      if (!listPrice)
        throw new DomainError('invalid', 'that plan or pack has no price and cannot be bought', { param: 'planId' in purchase ? 'plan_id' : 'pack_id' });
      const metadata: Record<string, string> = {
        account_id: accountId,
        ...('planId' in purchase ? { plan_id: purchase.planId } : { pack_id: purchase.packId }),
      };
      const common = {
        client_reference_id: accountId,
        metadata,
        success_url: opts.returnTo?.success ?? settings.successUrl,
        cancel_url: opts.returnTo?.cancel ?? settings.cancelUrl,
      };
      const session =
        grant.kind === 'plan' && opts.recurring !== false
          ? await stripe.checkout.sessions.create({
              ...common,
              mode: 'subscription',
              line_items: [{ quantity: 1, price: await recurringPriceId(stripe, grant.plan, listPrice) }],
              subscription_data: { metadata },
            })
          : await stripe.checkout.sessions.create({
              ...common,
              mode: 'payment',
              line_items: [
                {
                  quantity: 1,
                  price_data: {
                    currency: listPrice.currency.toLowerCase(),
                    unit_amount: listPrice.amount,
                    product_data: {
                      name: item.kind === 'plan' ? `Plan ${item.planId} (${item.tokens} tokens)` : `Pack ${item.packId} (${item.tokens} tokens)`,
                    },
                  },
                },
              ],
              payment_intent_data: { metadata },
            });
      return { id: session.id, url: session.url, mode: session.mode, amount: listPrice.amount, currency: listPrice.currency };
    },
    /** Verifies the signature over the raw body (the library's own check); throws on a bad one. */
    verify: (raw: Buffer, signature: string): Stripe.Event => stripe.webhooks.constructEvent(raw, signature, webhookSecret),
    handle,
  };
}

export type StripeGateway = NonNullable<ReturnType<typeof createStripeGateway>>;

/**
 * The dispute fee Stripe kept, as its balance transactions book it: the withdrawal carries the fee
 * (positive), and the reinstatement of a won dispute gives it back as a negative fee where Stripe
 * returns it (0 where it keeps it). So the sum of the fees, never below zero; never each fee alone.
 */
export function disputeFeeKept(balanceTransactions: ReadonlyArray<{ fee: number }>): number {
  const net = balanceTransactions.reduce((sum, bt) => sum + bt.fee, 0);
  return Math.max(0, net);
}

/** The processor's payments kept as unmatched, as the log holds them now (whether Stripe is on today or not). */
export async function unmatchedPayments(ledger: Pick<Ledger, 'streamState'>) {
  return Object.values((await ledger.streamState<UnmatchedState>(unmatchedDecider as never, streams.unmatchedPayments())).byId);
}
