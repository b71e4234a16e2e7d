// A local Stripe double for the calls Tollgate makes through the official `stripe` client (pointed
// at it with its host, port and protocol options): creating a Checkout Session (payment or
// subscription mode), retrieving a PaymentIntent with its charge's balance transaction expanded,
// looking up and creating recurring Prices and tax rates (a line's fixed tax rate is charged as
// Stripe charges it: added to the price, or held in it when inclusive), and reading a subscription's invoices and their payments. The answers have the shape of
// Stripe's API objects (the client parses them as it would Stripe's). The test drives the rest
// (the customer paying, refunds, disputes) and gets the notices Stripe would send, as events to
// sign with the library's own test-signature helper.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { settingsFromEnv, type Settings } from '../../src/config.ts';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './gateway.ts';
import { call } from './http.ts';

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

interface DoubleSession {
  id: string;
  mode: 'payment' | 'subscription' | 'setup';
  /** Setup mode: the Customer the card is saved to, and the SetupIntent once it is. */
  customer?: string;
  setupIntent?: string | null;
  amount: number;
  currency: string;
  metadata: Record<string, string>;
  piMetadata: Record<string, string>;
  paymentIntent: string | null;
  /** Subscription mode: the recurring Price, and once paid the subscription and its first invoice. */
  price: string | null;
  subscription: string | null;
  invoice: string | null;
  /** Where Checkout sends the customer back once paid, and on cancel. */
  successUrl: string;
  cancelUrl: string | null;
  /** The line's fixed tax rate (null: untaxed) and the tax in `amount`. */
  taxRate: DoubleTaxRate | null;
  tax: number;
}
interface DoubleCard {
  paymentMethod: string;
  customer: string;
  setupIntent: string;
  brand: string;
  last4: string;
  /** A card the bank refuses off session. */
  declines: boolean;
}
interface DoubleTaxRate {
  id: string;
  displayName: string;
  percentage: number;
  inclusive: boolean;
  country: string | null;
}
interface DoublePrice {
  id: string;
  lookupKey: string | null;
  currency: string;
  unitAmount: number;
  intervalCount: number;
  metadata: Record<string, string>;
}
interface DoubleSubscription {
  id: string;
  price: DoublePrice;
  taxRate: DoubleTaxRate | null;
  metadata: Record<string, string>;
  status: 'active' | 'past_due' | 'canceled';
  invoices: string[];
  cancelAtPeriodEnd: boolean;
  canceledAt: number | null;
}
interface DoubleInvoice {
  id: string;
  subscription: DoubleSubscription;
  status: 'paid' | 'open';
  billingReason: 'subscription_create' | 'subscription_cycle';
  periodStart: number;
  paymentIntent: string | null;
  attempts: number;
}
interface DoubleIntent {
  id: string;
  amount: number;
  currency: string;
  metadata: Record<string, string>;
  chargeId: string;
  fee: number;
  refunded: number;
}

export interface StripeDouble {
  /** http://127.0.0.1:<port>, for STRIPE_API_BASE. */
  url: string;
  secretKey: string;
  webhookSecret: string;
  sessions: Map<string, DoubleSession>;
  /** Recurring Prices created through the API, by id. */
  prices: Map<string, DoublePrice>;
  /** Tax rates created through the API, by id. */
  taxRates: Map<string, DoubleTaxRate>;
  /** Cards saved through setup-mode sessions, by PaymentMethod id. */
  cards: Map<string, DoubleCard>;
  /** PaymentIntents created through the API (off-session charges), in order, by idempotency key. */
  offSession: Array<{ id: string; idempotencyKey: string | null; amount: number; metadata: Record<string, string> }>;
  /** The customer saves a card in a setup-mode session (`declines`: the bank refuses it off session); returns the session as completed. */
  saveCard(sessionId: string, opts?: { brand?: string; last4?: string; declines?: boolean }): Record<string, unknown>;
  /** The requests the client made (method and path), to show which calls Tollgate made. */
  requests: string[];
  /** The customer pays a session: the PaymentIntent, its charge and fee exist from now on; returns the session object as completed. */
  pay(sessionId: string, opts?: { async?: boolean }): Record<string, unknown>;
  refund(paymentIntent: string, amount: number): Record<string, unknown>;
  /** The next period of a subscription, paid (`paid: false`: the charge failed); returns the invoice object. */
  renew(subscriptionId: string, opts?: { paid?: boolean }): Record<string, unknown>;
  /** The invoice object as it is now (e.g. to deliver a late notice for it). */
  invoice(invoiceId: string): Record<string, unknown>;
  /** The PaymentIntent that paid an invoice. */
  intentOfInvoice(invoiceId: string): string;
  /** The subscription ends now: the subscription object as customer.subscription.deleted carries it. */
  cancel(subscriptionId: string): Record<string, unknown>;
  /**
   * The customer asks to stop at the period's end (`on: false`: takes it back): the object and
   * previous attributes as customer.subscription.updated carries them.
   */
  cancelAtPeriodEnd(subscriptionId: string, on?: boolean): { object: Record<string, unknown>; previous: Record<string, unknown> };
  /**
   * A dispute as Stripe's notices carry it, with Stripe's balance transactions: the withdrawal from
   * its opening (gross -amount, the dispute fee, net -(amount + fee)) and, once won, the
   * reinstatement (gross +amount), whose fee is minus the fee Stripe gives back (`feeReturned`,
   * the default) or 0 where Stripe keeps it.
   */
  dispute(
    paymentIntent: string,
    amount: number,
    status?: 'needs_response' | 'won' | 'lost',
    disputeId?: string,
    opts?: { feeReturned?: boolean },
  ): Record<string, unknown>;
  /** An event envelope as Stripe posts it (`previous`: an update's previous_attributes). */
  event(type: string, object: Record<string, unknown>, previous?: Record<string, unknown>): Record<string, unknown>;
  /**
   * While on, every API call is answered 503 (Stripe unavailable, and not to be retried), so a
   * handler that reads Stripe fails: test/payments-stripe-notices.test.ts.
   */
  outage(on: boolean): void;
  /** The body and Stripe-Signature header for an event (signed with the webhook secret, or another). */
  signed(event: Record<string, unknown>, secret?: string): { body: string; signature: string };
  close(): Promise<void>;
}

/** Stripe's form encoding (a[b][0][c]=v) back into nested objects. */
function parseForm(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const parts = key.split(/[[\]]+/).filter(Boolean);
    let node: Record<string, unknown> = out;
    parts.forEach((p, i) => {
      if (i === parts.length - 1) node[p] = value;
      else node = (node[p] ??= {}) as Record<string, unknown>;
    });
  }
  return out;
}

const feeOf = (amount: number) => Math.round(amount * 0.029) + 30;
/** What a line of `base` costs under a fixed tax rate, as Stripe charges it: tax added to the price, or held in it (rounded half up). */
function taxed(base: number, rate: DoubleTaxRate | null): { total: number; tax: number } {
  if (!rate) return { total: base, tax: 0 };
  if (rate.inclusive) return { total: base, tax: base - Math.round((base * 100) / (100 + rate.percentage)) };
  const tax = Math.round((base * rate.percentage) / 100);
  return { total: base + tax, tax };
}
/** Stripe's dispute fee in the US (15.00), withdrawn with the disputed amount. */
const DISPUTE_FEE = 1500;

export async function startStripeDouble(): Promise<StripeDouble> {
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
  const sessions = new Map<string, DoubleSession>();
  const prices = new Map<string, DoublePrice>();
  const taxRates = new Map<string, DoubleTaxRate>();
  const cards = new Map<string, DoubleCard>();
  const customers = new Map<string, { id: string; metadata: Record<string, string> }>();
  /** Answers already given to an Idempotency-Key, as Stripe replays them. */
  const idempotent = new Map<string, { status: number; body: unknown }>();
  const offSession: StripeDouble['offSession'] = [];
  const subscriptions = new Map<string, DoubleSubscription>();
  const invoices = new Map<string, DoubleInvoice>();
  const intents = new Map<string, DoubleIntent>();
  const requests: string[] = [];
  const signer = new Stripe(secretKey);
  let down = false;

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req') });
    res.end(JSON.stringify(body));
  };
  const error = (res: ServerResponse, status: number, message: string) => send(res, status, { error: { type: 'invalid_request_error', message } });

  function sessionObject(s: DoubleSession, status: 'open' | 'complete', paymentStatus: 'paid' | 'unpaid') {
    return {
      id: s.id,
      object: 'checkout.session',
      amount_total: s.amount,
      amount_subtotal: s.amount - (s.taxRate?.inclusive ? 0 : s.tax),
      total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: s.tax },
      currency: s.currency,
      client_reference_id: s.metadata.account_id ?? null,
      metadata: s.metadata,
      mode: s.mode,
      customer: s.customer ?? null,
      setup_intent: s.setupIntent ?? null,
      payment_intent: s.paymentIntent,
      subscription: s.subscription,
      invoice: s.invoice,
      payment_status: paymentStatus,
      status,
      url: status === 'open' ? `https://checkout.stripe.test/c/pay/${s.id}` : null,
      livemode: false,
    };
  }
  function intentObject(pi: DoubleIntent, expandCharge: boolean) {
    const bt = { id: id('txn'), object: 'balance_transaction', amount: pi.amount, currency: pi.currency, fee: pi.fee, net: pi.amount - pi.fee };
    const charge = {
      id: pi.chargeId,
      object: 'charge',
      amount: pi.amount,
      amount_refunded: pi.refunded,
      currency: pi.currency,
      payment_intent: pi.id,
      refunded: pi.refunded >= pi.amount,
      balance_transaction: expandCharge ? bt : bt.id,
      metadata: {},
    };
    return {
      id: pi.id,
      object: 'payment_intent',
      amount: pi.amount,
      currency: pi.currency,
      status: 'succeeded',
      metadata: pi.metadata,
      latest_charge: expandCharge ? charge : pi.chargeId,
    };
  }

  const now = () => Math.floor(Date.now() / 1000);
  const list = (path: string, data: unknown[]) => ({ object: 'list', data, has_more: false, url: path });
  function priceObject(p: DoublePrice) {
    return {
      id: p.id,
      object: 'price',
      active: true,
      currency: p.currency,
      unit_amount: p.unitAmount,
      lookup_key: p.lookupKey,
      metadata: p.metadata,
      recurring: { interval: 'day', interval_count: p.intervalCount, usage_type: 'licensed', meter: null, trial_period_days: null },
      type: 'recurring',
      livemode: false,
    };
  }
  function taxRateObject(r: DoubleTaxRate) {
    return {
      id: r.id,
      object: 'tax_rate',
      active: true,
      country: r.country,
      display_name: r.displayName,
      percentage: r.percentage,
      effective_percentage: r.percentage,
      inclusive: r.inclusive,
      jurisdiction: null,
      tax_type: 'vat',
      livemode: false,
      metadata: {},
    };
  }
  function subscriptionObject(sub: DoubleSubscription) {
    const last = sub.invoices.length ? invoices.get(sub.invoices.at(-1)!)! : null;
    // Since API version 2025-03-31 the current period lives on the subscription's items.
    const periodEnd = last ? last.periodStart + sub.price.intervalCount * 86_400 : null;
    return {
      id: sub.id,
      object: 'subscription',
      status: sub.status,
      metadata: sub.metadata,
      livemode: false,
      latest_invoice: sub.invoices.at(-1) ?? null,
      cancel_at_period_end: sub.cancelAtPeriodEnd,
      cancel_at: sub.cancelAtPeriodEnd ? periodEnd : null,
      canceled_at: sub.canceledAt,
      ended_at: sub.status === 'canceled' ? sub.canceledAt : null,
      items: list(`/v1/subscription_items?subscription=${sub.id}`, [
        { id: `si_${sub.id}`, object: 'subscription_item', current_period_start: last?.periodStart ?? null, current_period_end: periodEnd, quantity: 1 },
      ]),
    };
  }
  function invoiceObject(inv: DoubleInvoice) {
    const { price } = inv.subscription;
    const period = { start: inv.periodStart, end: inv.periodStart + price.intervalCount * 86_400 };
    const due = taxed(price.unitAmount, inv.subscription.taxRate);
    const paid = inv.status === 'paid' ? due.total : 0;
    return {
      id: inv.id,
      object: 'invoice',
      amount_due: due.total,
      amount_paid: paid,
      amount_remaining: due.total - paid,
      total_taxes: due.tax ? [{ amount: due.tax, tax_behavior: inv.subscription.taxRate!.inclusive ? 'inclusive' : 'exclusive' }] : [],
      attempt_count: inv.attempts,
      billing_reason: inv.billingReason,
      created: inv.periodStart,
      currency: price.currency,
      livemode: false,
      metadata: {},
      parent: {
        type: 'subscription_details',
        quote_details: null,
        subscription_details: { subscription: inv.subscription.id, metadata: inv.subscription.metadata },
      },
      lines: list(`/v1/invoices/${inv.id}/lines`, [
        { id: id('il'), object: 'line_item', amount: price.unitAmount, currency: price.currency, invoice: inv.id, metadata: {}, period, quantity: 1 },
      ]),
      period_start: period.start,
      period_end: period.start,
      status: inv.status,
    };
  }
  /** Values of a GET list parameter, however the client spelled it (a[]=v or a[0]=v). */
  const listParam = (url: URL, name: string) =>
    [...url.searchParams].filter(([k]) => k === `${name}[]` || new RegExp(`^${name}\\[\\d+\\]$`).test(k)).map(([, v]) => v);

  /** A paid invoice for the next period of a subscription, with its PaymentIntent (and fee). */
  function newInvoice(sub: DoubleSubscription, paid: boolean): DoubleInvoice {
    const last = sub.invoices.length ? invoices.get(sub.invoices.at(-1)!)! : null;
    const inv: DoubleInvoice = {
      id: id('in'),
      subscription: sub,
      status: paid ? 'paid' : 'open',
      billingReason: last ? 'subscription_cycle' : 'subscription_create',
      // A test cannot wait a period: the first is dated a minute ago, each renewal a second after the
      // one before (or a few seconds ago), so every period has started by the time its notice comes.
      periodStart: last ? Math.max(last.periodStart + 1, now() - 5) : now() - 60,
      paymentIntent: null,
      attempts: 1,
    };
    if (paid) {
      const { total } = taxed(sub.price.unitAmount, sub.taxRate);
      const pi: DoubleIntent = {
        id: id('pi'),
        amount: total,
        currency: sub.price.currency,
        metadata: {},
        chargeId: id('ch'),
        fee: feeOf(total),
        refunded: 0,
      };
      intents.set(pi.id, pi);
      inv.paymentIntent = pi.id;
    } else sub.status = 'past_due';
    invoices.set(inv.id, inv);
    sub.invoices.push(inv.id);
    return inv;
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://double');
    requests.push(`${req.method} ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${secretKey}`) return error(res, 401, 'Invalid API Key provided.');
    if (down) {
      res.writeHead(503, { 'content-type': 'application/json', 'stripe-should-retry': 'false' });
      return res.end(JSON.stringify({ error: { type: 'api_error', message: 'Stripe is unavailable (an outage of the double).' } }));
    }
    if (req.method === 'POST' && url.pathname === '/v1/customers') {
      const key = String(req.headers['idempotency-key'] ?? '');
      const seen = key && idempotent.get(`customer|${key}`);
      if (seen) return send(res, seen.status, seen.body);
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const c = { id: id('cus'), metadata: form.metadata ?? {} };
      customers.set(c.id, c);
      const body = { id: c.id, object: 'customer', metadata: c.metadata, livemode: false };
      if (key) idempotent.set(`customer|${key}`, { status: 200, body });
      return send(res, 200, body);
    }
    const setupIntent = /^\/v1\/setup_intents\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && setupIntent) {
      const card = [...cards.values()].find((c) => c.setupIntent === setupIntent[1]);
      if (!card) return error(res, 404, `No such setupintent: '${setupIntent[1]}'`);
      const expand = [...url.searchParams].filter(([k]) => k.startsWith('expand')).map(([, v]) => v);
      const method = {
        id: card.paymentMethod,
        object: 'payment_method',
        type: 'card',
        customer: card.customer,
        card: { brand: card.brand, last4: card.last4 },
      };
      return send(res, 200, {
        id: card.setupIntent,
        object: 'setup_intent',
        status: 'succeeded',
        customer: card.customer,
        usage: 'off_session',
        payment_method: expand.includes('payment_method') ? method : card.paymentMethod,
        livemode: false,
      });
    }
    if (req.method === 'POST' && url.pathname === '/v1/payment_intents') {
      const key = String(req.headers['idempotency-key'] ?? '');
      const seen = key && idempotent.get(`pi|${key}`);
      if (seen) return send(res, seen.status, seen.body);
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const card = cards.get(form.payment_method);
      const amount = Number(form.amount);
      if (!card || card.customer !== form.customer) return error(res, 400, `No such PaymentMethod: '${form.payment_method}' for customer '${form.customer}'`);
      if (form.off_session !== 'true' || form.confirm !== 'true' || !(amount > 0) || !form.currency)
        return error(res, 400, 'the double charges saved cards off session only: amount, currency, off_session=true and confirm=true');
      const pi: DoubleIntent = {
        id: id('pi'),
        amount,
        currency: form.currency,
        metadata: form.metadata ?? {},
        chargeId: id('ch'),
        fee: feeOf(amount),
        refunded: 0,
      };
      offSession.push({ id: pi.id, idempotencyKey: key || null, amount, metadata: pi.metadata });
      let answer: { status: number; body: unknown };
      if (card.declines)
        answer = {
          status: 402,
          body: {
            error: {
              type: 'card_error',
              code: 'card_declined',
              decline_code: 'insufficient_funds',
              message: 'Your card has insufficient funds.',
              payment_intent: { id: pi.id, object: 'payment_intent', status: 'requires_payment_method', amount, currency: pi.currency },
            },
          },
        };
      else {
        intents.set(pi.id, pi);
        answer = { status: 200, body: intentObject(pi, false) };
      }
      if (key) idempotent.set(`pi|${key}`, answer);
      return send(res, answer.status, answer.body);
    }
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions' && /(^|&)mode=setup(&|$)/.test(Buffer.concat(chunks).toString('utf8'))) {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      if (!form.success_url) return error(res, 400, 'success_url is required');
      if (!customers.has(form.customer)) return error(res, 400, `No such customer: '${form.customer}'`);
      if (!form.currency) return error(res, 400, 'currency is required in setup mode');
      const s: DoubleSession = {
        id: id('cs_test'),
        mode: 'setup',
        customer: form.customer,
        setupIntent: null,
        taxRate: null,
        tax: 0,
        amount: 0,
        currency: form.currency,
        metadata: form.metadata ?? {},
        piMetadata: form.setup_intent_data?.metadata ?? {},
        paymentIntent: null,
        price: null,
        subscription: null,
        invoice: null,
        successUrl: form.success_url,
        cancelUrl: form.cancel_url ?? null,
      };
      sessions.set(s.id, s);
      return send(res, 200, sessionObject(s, 'open', 'unpaid'));
    }
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const item = form.line_items?.['0'];
      if (!form.success_url) return error(res, 400, 'success_url is required');
      const mode = form.mode === 'subscription' ? 'subscription' : 'payment';
      const price = mode === 'subscription' ? prices.get(item?.price) : undefined;
      if (mode === 'subscription' && !price) return error(res, 400, `No such price: '${item?.price}'`);
      if (mode === 'payment' && (!item?.price_data?.unit_amount || !item.price_data.currency)) return error(res, 400, 'line_items[0][price_data] is required');
      const rateIds = Object.values((item?.tax_rates ?? {}) as Record<string, string>);
      if (rateIds.length > 1) return error(res, 400, 'the double charges at most one tax rate a line');
      const taxRate = rateIds.length ? taxRates.get(rateIds[0]) : null;
      if (taxRate === undefined) return error(res, 400, `No such tax rate: '${rateIds[0]}'`);
      const due = taxed(price ? price.unitAmount : Number(item.price_data.unit_amount) * Number(item.quantity ?? 1), taxRate);
      const s: DoubleSession = {
        id: id('cs_test'),
        mode,
        taxRate,
        tax: due.tax,
        amount: due.total,
        currency: price ? price.currency : item.price_data.currency,
        metadata: form.metadata ?? {},
        piMetadata: (mode === 'subscription' ? form.subscription_data?.metadata : form.payment_intent_data?.metadata) ?? {},
        paymentIntent: null,
        price: price?.id ?? null,
        subscription: null,
        invoice: null,
        successUrl: form.success_url,
        cancelUrl: form.cancel_url ?? null,
      };
      sessions.set(s.id, s);
      return send(res, 200, sessionObject(s, 'open', 'unpaid'));
    }
    if (req.method === 'POST' && url.pathname === '/v1/tax_rates') {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const percentage = Number(form.percentage);
      if (!form.display_name || !Number.isFinite(percentage) || percentage < 0 || percentage > 100 || !['true', 'false'].includes(form.inclusive))
        return error(res, 400, 'display_name, percentage (0 to 100) and inclusive are required');
      const r: DoubleTaxRate = {
        id: id('txr'),
        displayName: form.display_name,
        percentage,
        inclusive: form.inclusive === 'true',
        country: form.country ?? null,
      };
      taxRates.set(r.id, r);
      return send(res, 200, taxRateObject(r));
    }
    if (req.method === 'GET' && url.pathname === '/v1/tax_rates') {
      const inclusive = url.searchParams.get('inclusive');
      const found = [...taxRates.values()].filter((r) => inclusive === null || String(r.inclusive) === inclusive);
      return send(res, 200, list('/v1/tax_rates', found.map(taxRateObject)));
    }
    if (req.method === 'POST' && url.pathname === '/v1/prices') {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const key = req.headers['idempotency-key'];
      const again = [...prices.values()].find((p) => p.lookupKey === form.lookup_key);
      if (again && key === again.lookupKey) return send(res, 200, priceObject(again));
      if (again) return error(res, 400, `A price (${again.id}) already uses that lookup key.`);
      if (form.recurring?.interval !== 'day' || !form.unit_amount || !form.currency || !form.product_data?.name)
        return error(res, 400, 'recurring, unit_amount, currency and product_data are required');
      const p: DoublePrice = {
        id: id('price'),
        lookupKey: form.lookup_key ?? null,
        currency: form.currency,
        unitAmount: Number(form.unit_amount),
        intervalCount: Number(form.recurring.interval_count ?? 1),
        metadata: form.metadata ?? {},
      };
      prices.set(p.id, p);
      return send(res, 200, priceObject(p));
    }
    if (req.method === 'GET' && url.pathname === '/v1/prices') {
      const keys = listParam(url, 'lookup_keys');
      return send(res, 200, list('/v1/prices', [...prices.values()].filter((p) => p.lookupKey && keys.includes(p.lookupKey)).map(priceObject)));
    }
    if (req.method === 'GET' && url.pathname === '/v1/invoices') {
      const sub = subscriptions.get(url.searchParams.get('subscription') ?? '');
      const status = url.searchParams.get('status');
      const found = (sub?.invoices ?? []).map((i) => invoices.get(i)!).filter((i) => !status || i.status === status);
      return send(res, 200, list('/v1/invoices', found.reverse().map(invoiceObject)));
    }
    const inv = /^\/v1\/invoices\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && inv) {
      const found = invoices.get(inv[1]);
      return found ? send(res, 200, invoiceObject(found)) : error(res, 404, `No such invoice: '${inv[1]}'`);
    }
    if (req.method === 'GET' && url.pathname === '/v1/invoice_payments') {
      const byInvoice = url.searchParams.get('invoice');
      const byIntent = url.searchParams.get('payment[payment_intent]');
      const found = [...invoices.values()].filter((i) => i.paymentIntent && (i.id === byInvoice || i.paymentIntent === byIntent));
      return send(
        res,
        200,
        list(
          '/v1/invoice_payments',
          found.map((i) => ({
            id: id('inpay'),
            object: 'invoice_payment',
            amount_paid: i.subscription.price.unitAmount,
            amount_requested: i.subscription.price.unitAmount,
            currency: i.subscription.price.currency,
            invoice: i.id,
            is_default: true,
            livemode: false,
            payment: { type: 'payment_intent', payment_intent: i.paymentIntent },
            status: 'paid',
          })),
        ),
      );
    }
    const pi = /^\/v1\/payment_intents\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && pi) {
      const found = intents.get(pi[1]);
      if (!found) return error(res, 404, `No such payment_intent: '${pi[1]}'`);
      const expand = url.searchParams.getAll('expand[]').concat(url.searchParams.getAll('expand[0]'));
      return send(res, 200, intentObject(found, expand.includes('latest_charge.balance_transaction') || expand.includes('latest_charge')));
    }
    return error(res, 404, `Unrecognized request URL (${req.method}: ${url.pathname}).`);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => error(res, 500, String(e)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const envelope = (type: string, object: Record<string, unknown>, previous?: Record<string, unknown>) => ({
    id: id('evt'),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: previous ? { object, previous_attributes: previous } : { object },
  });

  return {
    url,
    secretKey,
    webhookSecret,
    sessions,
    prices,
    taxRates,
    requests,
    cards,
    offSession,
    saveCard(sessionId, opts = {}) {
      const s = sessions.get(sessionId);
      if (!s || s.mode !== 'setup') throw new Error(`no setup session ${sessionId}`);
      const card: DoubleCard = {
        paymentMethod: id('pm'),
        customer: s.customer!,
        setupIntent: id('seti'),
        brand: opts.brand ?? 'visa',
        last4: opts.last4 ?? '4242',
        declines: opts.declines ?? false,
      };
      cards.set(card.paymentMethod, card);
      s.setupIntent = card.setupIntent;
      return { ...sessionObject(s, 'complete', 'paid'), payment_status: 'no_payment_required' };
    },
    pay(sessionId, opts = {}) {
      const s = sessions.get(sessionId);
      if (!s) throw new Error(`no session ${sessionId}`);
      if (s.mode === 'subscription') {
        const sub: DoubleSubscription = {
          id: id('sub'),
          price: prices.get(s.price!)!,
          taxRate: s.taxRate,
          metadata: s.piMetadata,
          status: 'active',
          invoices: [],
          cancelAtPeriodEnd: false,
          canceledAt: null,
        };
        subscriptions.set(sub.id, sub);
        s.subscription = sub.id;
        s.invoice = newInvoice(sub, true).id;
        return sessionObject(s, 'complete', 'paid');
      }
      const intent: DoubleIntent = {
        id: id('pi'),
        amount: s.amount,
        currency: s.currency,
        metadata: s.piMetadata,
        chargeId: id('ch'),
        fee: feeOf(s.amount),
        refunded: 0,
      };
      intents.set(intent.id, intent);
      s.paymentIntent = intent.id;
      return sessionObject(s, 'complete', opts.async ? 'unpaid' : 'paid');
    },
    renew(subscriptionId, opts = {}) {
      const sub = subscriptions.get(subscriptionId);
      if (!sub) throw new Error(`no subscription ${subscriptionId}`);
      return invoiceObject(newInvoice(sub, opts.paid !== false));
    },
    invoice: (invoiceId) => invoiceObject(invoices.get(invoiceId)!),
    intentOfInvoice: (invoiceId) => invoices.get(invoiceId)!.paymentIntent!,
    cancel(subscriptionId) {
      const sub = subscriptions.get(subscriptionId)!;
      sub.status = 'canceled';
      sub.canceledAt = now();
      return subscriptionObject(sub);
    },
    cancelAtPeriodEnd(subscriptionId, on = true) {
      const sub = subscriptions.get(subscriptionId)!;
      const previous = { cancel_at_period_end: sub.cancelAtPeriodEnd };
      sub.cancelAtPeriodEnd = on;
      sub.canceledAt = on ? now() : null;
      return { object: subscriptionObject(sub), previous };
    },
    refund(paymentIntent, amount) {
      const pi = intents.get(paymentIntent)!;
      pi.refunded += amount;
      // The charge as charge.refunded carries it: amount_refunded is the running total.
      return { ...(intentObject(pi, true).latest_charge as Record<string, unknown>), balance_transaction: id('txn') };
    },
    dispute(paymentIntent, amount, status = 'needs_response', disputeId = id('dp'), opts = {}) {
      const pi = intents.get(paymentIntent)!;
      const bt = (gross: number, fee: number) => ({
        id: id('txn'),
        object: 'balance_transaction',
        amount: gross,
        fee,
        net: gross - fee,
        currency: pi.currency,
      });
      const returned = status === 'won' && opts.feeReturned !== false ? DISPUTE_FEE : 0;
      return {
        id: disputeId,
        object: 'dispute',
        amount,
        currency: pi.currency,
        charge: pi.chargeId,
        payment_intent: pi.id,
        status,
        balance_transactions: [bt(-amount, DISPUTE_FEE), ...(status === 'won' ? [bt(amount, -returned)] : [])],
      };
    },
    event: envelope,
    outage(on) {
      down = on;
    },
    signed(event, secret = webhookSecret) {
      const body = JSON.stringify(event);
      return { body, signature: signer.webhooks.generateTestHeaderString({ payload: body, secret }) };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A gateway with the Stripe path on, pointed at the double; on PostgreSQL also a second gateway on
 * the same log (to deliver one notice to two gateways at once), else null.
 */
export async function startStripeGateways(
  stripe: StripeDouble,
  adminToken: string,
  overrides: Partial<Settings> = {},
): Promise<{ gw: TestGateway; gw2: TestGateway | null; stopAll: () => Promise<void> }> {
  const defaults = settingsFromEnv({});
  const payments = {
    ...defaults.payments,
    stripe: { ...defaults.payments.stripe, secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret, apiBase: stripe.url },
  };
  const gw = await startTestGateway({ adminToken, bootstrap: false, payments, ...overrides });
  const gw2 = process.env.DATABASE_URL ? await startTestGateway({ adminToken, bootstrap: false, payments, ...overrides, schema: gw.ledger.schema }) : null;
  const stopAll = async () => {
    if (gw2) await gw2.close();
    await gw.stop();
    await stripe.close();
  };
  return { gw, gw2, stopAll };
}

/**
 * The shop most Stripe tests start from: the gateways of startStripeGateways, plan `pro` (1000
 * tokens for 30 days) at $20.00, pack `p300` (300 tokens) at $3.00, and an open account with a key.
 */
export async function startStripeShop(stripe: StripeDouble, adminToken: string, account: { id: string; name: string }, overrides: Partial<Settings> = {}) {
  const gateways = await startStripeGateways(stripe, adminToken, overrides);
  const admin = (path: string, body: unknown, method = 'POST') => call(gateways.gw, `/admin/v1${path}`, { key: adminToken, body, method });
  assert.is((await admin('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] })).status, 201);
  assert.is((await admin('/plans/pro/price', { amount: 2000 }, 'PUT')).status, 200);
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  assert.is((await admin('/accounts', { account_id: account.id, name: account.name })).status, 201);
  const key: string = (await admin(`/accounts/${account.id}/keys`, { name: 'app' })).json.key;
  await gateways.gw.ledger.caughtUp();
  return { ...gateways, key };
}

/** A Stripe event, signed by the double, delivered to the gateway's webhook. */
export function deliverStripeEvent(gw: TestGateway, stripe: StripeDouble, event: Record<string, unknown>) {
  const { body, signature } = stripe.signed(event);
  return call(gw, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
}

/** The customer saves a card for auto top-up: a setup-mode session through `gw`, completed on the double, its notice delivered to `notified`. */
export async function saveCard(gw: TestGateway, stripe: StripeDouble, key: string, opts: { declines?: boolean; last4?: string } = {}, notified = gw) {
  const session = await call(gw, '/v1/auto-top-up/card', { key, body: {} });
  assert.is(session.status, 201, session.text);
  assert.is(session.json.mode, 'setup');
  const done = await deliverStripeEvent(notified, stripe, stripe.event('checkout.session.completed', stripe.saveCard(session.json.id, opts)));
  assert.is(done.status, 200, done.text);
  assert.is(done.json.outcome, 'recorded');
}

/** The environment that points a spawned gateway's Stripe path at the double. */
export const stripeEnv = (stripe: StripeDouble) => ({
  STRIPE_SECRET_KEY: stripe.secretKey,
  STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
  STRIPE_API_BASE: stripe.url,
});
