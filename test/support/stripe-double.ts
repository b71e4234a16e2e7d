// A local Stripe double for the calls Tollgate makes through the official `stripe` client (pointed
// at it with its host, port and protocol options): creating a Checkout Session and retrieving a
// PaymentIntent with its charge's balance transaction expanded. The answers have the shape of
// Stripe's API objects (the client parses them as it would Stripe's). The test drives the rest
// (the customer paying, refunds, disputes) and gets the notices Stripe would send, as events to
// sign with the library's own test-signature helper.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

interface DoubleSession {
  id: string;
  amount: number;
  currency: string;
  metadata: Record<string, string>;
  piMetadata: Record<string, string>;
  paymentIntent: string | null;
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
  /** The requests the client made (method and path), to show which calls Tollgate made. */
  requests: string[];
  /** The customer pays a session: the PaymentIntent, its charge and fee exist from now on; returns the session object as completed. */
  pay(sessionId: string, opts?: { async?: boolean }): Record<string, unknown>;
  refund(paymentIntent: string, amount: number): Record<string, unknown>;
  dispute(paymentIntent: string, amount: number, status?: 'needs_response' | 'won' | 'lost', disputeId?: string): Record<string, unknown>;
  /** An event envelope as Stripe posts it. */
  event(type: string, object: Record<string, unknown>): Record<string, unknown>;
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

export async function startStripeDouble(): Promise<StripeDouble> {
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
  const sessions = new Map<string, DoubleSession>();
  const intents = new Map<string, DoubleIntent>();
  const requests: string[] = [];
  const signer = new Stripe(secretKey);

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
      currency: s.currency,
      client_reference_id: s.metadata.account_id ?? null,
      metadata: s.metadata,
      mode: 'payment',
      payment_intent: s.paymentIntent,
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

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://double');
    requests.push(`${req.method} ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${secretKey}`) return error(res, 401, 'Invalid API Key provided.');
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const form = parseForm(Buffer.concat(chunks).toString('utf8')) as any;
      const item = form.line_items?.['0'];
      if (!item?.price_data?.unit_amount || !item.price_data.currency || !form.success_url) return error(res, 400, 'line_items and success_url are required');
      const s: DoubleSession = {
        id: id('cs_test'),
        amount: Number(item.price_data.unit_amount) * Number(item.quantity ?? 1),
        currency: item.price_data.currency,
        metadata: form.metadata ?? {},
        piMetadata: form.payment_intent_data?.metadata ?? {},
        paymentIntent: null,
      };
      sessions.set(s.id, s);
      return send(res, 200, sessionObject(s, 'open', 'unpaid'));
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

  const envelope = (type: string, object: Record<string, unknown>) => ({
    id: id('evt'),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  });

  return {
    url,
    secretKey,
    webhookSecret,
    sessions,
    requests,
    pay(sessionId, opts = {}) {
      const s = sessions.get(sessionId);
      if (!s) throw new Error(`no session ${sessionId}`);
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
    refund(paymentIntent, amount) {
      const pi = intents.get(paymentIntent)!;
      pi.refunded += amount;
      // The charge as charge.refunded carries it: amount_refunded is the running total.
      return { ...(intentObject(pi, true).latest_charge as Record<string, unknown>), balance_transaction: id('txn') };
    },
    dispute(paymentIntent, amount, status = 'needs_response', disputeId = id('dp')) {
      const pi = intents.get(paymentIntent)!;
      return {
        id: disputeId,
        object: 'dispute',
        amount,
        currency: pi.currency,
        charge: pi.chargeId,
        payment_intent: pi.id,
        status,
        balance_transactions:
          status === 'lost' ? [{ id: id('txn'), object: 'balance_transaction', amount: -amount - 1500, fee: 1500, currency: pi.currency }] : [],
      };
    },
    event: envelope,
    signed(event, secret = webhookSecret) {
      const body = JSON.stringify(event);
      return { body, signature: signer.webhooks.generateTestHeaderString({ payload: body, secret }) };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
