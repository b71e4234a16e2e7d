// Stripe's notices kept raw before they are handled, and run again by the operator (issue 40 item
// 4), over real HTTP against the Stripe double: a notice whose handler fails (Stripe unavailable)
// is kept, answered 500, and booked by a later replay; a notice delivered again (and to two
// gateways at once on PostgreSQL) is kept once; an unknown type is kept and acknowledged; a replay
// of every notice of a varied history (packs, a subscription with renewals, a failed renewal, a
// refund, a dispute, a cancellation taken back and ended) changes nothing in the log, through the
// admin API and `tollgate payment stripe-replay`; on PostgreSQL a notice kept through one gateway
// is replayed through the other.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { call } from './support/http.ts';
import { startStripeDouble, startStripeShop, type StripeDouble } from './support/stripe-double.ts';
import type { TestGateway } from './support/gateway.ts';
import { streams } from '../src/ledger/events.ts';

const ADMIN = 'tg_admin_stripe_notices_token_0123456789abcdef';
let stripe: StripeDouble;
let gw: TestGateway;
let gw2: TestGateway | null = null;
let stopAll: () => Promise<void>;
let key: string;
const accountId = 'acct_notices';

const admin = (path: string, body?: unknown, method?: string, to: TestGateway = gw) =>
  call(to, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

async function deliver(event: Record<string, unknown>, to: TestGateway = gw) {
  const { body, signature } = stripe.signed(event);
  return call(to, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
}

/** Delivers a notice and asserts it was answered 200; its outcome. */
async function delivered(type: string, object: Record<string, unknown>, previous?: Record<string, unknown>): Promise<string> {
  const r = await deliver(stripe.event(type, object, previous));
  assert.is(r.status, 200, r.text);
  return r.json.outcome;
}

interface NoticeRow {
  event_id: string;
  type: string;
  object_id: string | null;
  body: string;
  outcome: string | null;
  error: string | null;
}
const notices = (where = 'true', params: unknown[] = []) =>
  gw.db.query<NoticeRow>(
    `SELECT event_id, type, object_id, body, outcome, error FROM "${gw.ledger.schema}".stripe_notices WHERE ${where} ORDER BY seq`,
    params,
  );

/** Every event of the log, as (id, stream, type): what a replay must leave as it was. */
/**
 * The whole log once the documents its payments call for are issued (the issuer runs after each
 * append, so they may trail it): an invoice per payment, a credit note per refund (a lost dispute is one).
 */
async function settledLog(): Promise<string[]> {
  for (const until = Date.now() + 20_000; ;) {
    const log = await wholeLog();
    const count = (type: string) => log.filter((l) => l.endsWith(` ${type}`)).length;
    const issued = count('InvoiceIssued') === count('PaymentReceived') && count('CreditNoteIssued') === count('PaymentRefunded');
    if (issued) return log;
    if (Date.now() > until)
      assert.unreachable(`documents not issued: ${JSON.stringify(['PaymentReceived', 'InvoiceIssued', 'PaymentRefunded', 'CreditNoteIssued'].map(count))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function wholeLog(): Promise<string[]> {
  await gw.ledger.caughtUp();
  const all: string[] = [];
  for (let after = 0; ;) {
    const page = await gw.ledger.events.readAll(after, 1000);
    if (page.length === 0) return all;
    all.push(...page.map((e) => `${e.id} ${e.stream} ${e.type}`));
    after = page[page.length - 1].position;
  }
}

const paymentsOf = async (processorPaymentId: string) =>
  (await gw.ledger.events.readStream(streams.account(accountId))).filter(
    (e) => e.type === 'PaymentReceived' && e.data.processorPaymentId === processorPaymentId,
  );

/** A customer's purchase through Checkout, paid on the double; the completed session. */
async function buy(body: Record<string, unknown>, opts: { async?: boolean } = {}) {
  const session = await call(gw, '/v1/checkout/sessions', { key, body });
  assert.is(session.status, 201, session.text);
  return stripe.pay(session.json.id, opts);
}

/** `tollgate payment stripe-replay …` against the gateway: exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'payment', 'stripe-replay', ...args, '--url', gw.url, '--token', ADMIN], {
      cwd: new URL('..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ code, out }));
  });
}

test.before(async () => {
  stripe = await startStripeDouble();
  ({ gw, gw2, stopAll, key } = await startStripeShop(stripe, ADMIN, { id: accountId, name: 'Notices customer' }));
});
test.after(() => stopAll());

test('a notice is kept raw before it is handled: its handler fails (Stripe down), 500, and a replay books it', async () => {
  const session = await buy({ pack_id: 'p300' });
  const intent = session.payment_intent as string;
  const event = stripe.event('checkout.session.completed', session);
  stripe.outage(true);
  const failed = await deliver(event);
  stripe.outage(false);
  assert.is(failed.status, 500, failed.text);
  assert.is((await paymentsOf(intent)).length, 0);
  // Kept as Stripe signed it, with the error beside it.
  const [kept] = await notices('event_id = $1', [event.id]);
  assert.equal([kept.type, kept.object_id, kept.body, kept.outcome], ['checkout.session.completed', session.id, stripe.signed(event).body, null]);
  assert.match(String(kept.error), /unavailable/);

  const r = await admin('/payments/stripe/replay', { event_id: event.id });
  assert.is(r.status, 200, r.text);
  assert.equal(
    r.json.data.map((n: Record<string, unknown>) => [n.event_id, n.result, n.outcome, n.events, n.error]),
    [[event.id, 'handled', 'recorded', 2, null]],
  );
  assert.equal([r.json.handled, r.json.unchanged, r.json.failed, r.json.has_more], [1, 0, 0, false]);
  assert.is((await paymentsOf(intent)).length, 1);
  assert.equal(
    (await notices('event_id = $1', [event.id])).map((n) => [n.outcome, n.error]),
    [['recorded', null]],
  );
  // Stripe's own retry comes later: answered as any delivery again, and kept once.
  const retry = await deliver(event);
  assert.equal([retry.status, retry.json.outcome], [200, 'already_recorded']);
  assert.is((await notices('event_id = $1', [event.id])).length, 1);
});

test('the same notice delivered again (at once, and to two gateways on PostgreSQL) is kept once, answered as before', async () => {
  const session = await buy({ pack_id: 'p300' });
  const event = stripe.event('checkout.session.completed', session);
  const replies = await Promise.all([gw, gw2 ?? gw, gw, gw2 ?? gw].map((t) => deliver(event, t)));
  assert.ok(
    replies.every((r) => r.status === 200),
    replies.map((r) => r.text).join('\n'),
  );
  assert.is(replies.filter((r) => r.json.outcome === 'recorded').length, 1);
  assert.is((await notices('event_id = $1', [event.id])).length, 1);
  assert.is((await paymentsOf(session.payment_intent as string)).length, 1);
});

test('an event type without a handler is kept and acknowledged', async () => {
  const event = stripe.event('customer.created', { id: 'cus_notices', object: 'customer', metadata: {} });
  const r = await deliver(event);
  assert.equal([r.status, r.json], [200, { received: true, outcome: 'ignored' }]);
  assert.equal(
    (await notices('event_id = $1', [event.id])).map((n) => [n.type, n.object_id, n.outcome]),
    [['customer.created', 'cus_notices', 'ignored']],
  );
});

test('a replay of every notice of a varied history changes nothing in the log (admin API and CLI)', async () => {
  const since = new Date().toISOString();
  // A subscription: first period (both notices), two renewals, a failed renewal.
  const first = await call(gw, '/v1/checkout/sessions', { key, body: { plan_id: 'pro' } });
  assert.is(first.status, 201, first.text);
  const session = stripe.pay(first.json.id);
  const subscription = session.subscription as string;
  assert.is(await delivered('checkout.session.completed', session), 'recorded');
  assert.is(await delivered('invoice.paid', stripe.invoice(session.invoice as string)), 'already_recorded');
  const renewals = [stripe.renew(subscription), stripe.renew(subscription)];
  for (const renewal of renewals) assert.is(await delivered('invoice.paid', renewal), 'recorded');
  assert.is(await delivered('invoice.payment_failed', stripe.renew(subscription, { paid: false })), 'failed');
  // A pack refunded in two steps; an asynchronous payment that fails.
  const pack = await buy({ pack_id: 'p300' });
  assert.is(await delivered('checkout.session.completed', pack), 'recorded');
  assert.is(await delivered('charge.refunded', stripe.refund(pack.payment_intent as string, 100)), 'refunded');
  assert.is(await delivered('charge.refunded', stripe.refund(pack.payment_intent as string, 50)), 'refunded');
  const slow = await buy({ pack_id: 'p300' }, { async: true });
  assert.is(await delivered('checkout.session.completed', slow), 'waiting');
  assert.is(await delivered('checkout.session.async_payment_failed', slow), 'failed');
  // A renewal disputed and lost.
  const disputed = stripe.intentOfInvoice(renewals[0].id as string);
  const dispute = stripe.dispute(disputed, 2000);
  assert.is(await delivered('charge.dispute.created', dispute), 'disputed');
  assert.is(await delivered('charge.dispute.closed', stripe.dispute(disputed, 2000, 'lost', dispute.id as string)), 'dispute_closed');
  // A cancellation at period end, taken back, made again, and the subscription ended by Stripe.
  for (const on of [true, false, true]) {
    const { object, previous } = stripe.cancelAtPeriodEnd(subscription, on);
    assert.is(await delivered('customer.subscription.updated', object, previous), on ? 'cancelled' : 'resumed');
  }
  assert.is(await delivered('customer.subscription.deleted', stripe.cancel(subscription)), 'already_recorded');

  const before = await settledLog();
  const kept = await notices();
  // One page of two, then the rest from where it stopped.
  const page = await admin('/payments/stripe/replay', { limit: 2 });
  assert.is(page.status, 200, page.text);
  assert.equal([page.json.data.length, page.json.has_more], [2, true]);
  const rest = await admin('/payments/stripe/replay', { starting_after: page.json.data[1].event_id, limit: 1000 });
  assert.is(rest.json.has_more, false);
  const replayed = [...page.json.data, ...rest.json.data];
  assert.equal(
    replayed.map((n: Record<string, unknown>) => n.event_id),
    kept.map((n) => n.event_id),
  );
  assert.ok(
    replayed.every((n: Record<string, unknown>) => n.result === 'unchanged' && n.events === 0 && n.error === null),
    JSON.stringify(replayed.filter((n: Record<string, unknown>) => n.result !== 'unchanged')),
  );
  // Of the cancellation's notices only the last (the deletion) ran: each carries the whole subscription.
  assert.equal(
    replayed.filter((n: Record<string, unknown>) => String(n.type).startsWith('customer.subscription.')).map((n: Record<string, unknown>) => n.outcome),
    ['superseded', 'superseded', 'superseded', 'already_recorded'],
  );
  assert.equal(await wholeLog(), before);

  // The same from the command line, for the notices received since this test began.
  const r = await cli(['--since', since]);
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^0 handled, 16 unchanged, 0 failed$/m, r.out);
  assert.equal(await wholeLog(), before);
});

test('a notice kept through one gateway is replayed through another (PostgreSQL: two gateways on one database)', async () => {
  const other = gw2 ?? gw;
  const session = await buy({ pack_id: 'p300' });
  const event = stripe.event('checkout.session.completed', session);
  stripe.outage(true);
  assert.is((await deliver(event, gw)).status, 500);
  stripe.outage(false);
  const r = await admin('/payments/stripe/replay', { event_id: event.id }, 'POST', other);
  assert.is(r.status, 200, r.text);
  assert.equal(
    r.json.data.map((n: Record<string, unknown>) => [n.result, n.outcome]),
    [['handled', 'recorded']],
  );
  assert.is((await paymentsOf(session.payment_intent as string)).length, 1);
});

test('replay input: a bad time, event id or limit is a 400; an unknown event id replays nothing', async () => {
  for (const [body, param] of [
    [{ since: 'yesterday' }, 'since'],
    [{ event_id: 'evt with spaces' }, 'event_id'],
    [{ limit: 0 }, 'limit'],
    [{ limit: 1001 }, 'limit'],
  ] as const) {
    const r = await admin('/payments/stripe/replay', body);
    assert.is(r.status, 400, r.text);
    assert.is(r.json.error.param, param);
  }
  const none = await admin('/payments/stripe/replay', { event_id: 'evt_unknown' });
  assert.equal([none.status, none.json.data, none.json.has_more], [200, [], false]);
});

test.run();
