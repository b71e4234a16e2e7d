// Stripe end to end: the official client against a local Stripe double, webhook notices signed with
// the library's own test helper. A purchase, the same notice twice and out of order (and to two
// gateways at once on PostgreSQL), bad signatures and bodies refused with nothing written, an
// asynchronous payment that fails, a partial refund after use, disputes won and lost, unmatched
// payments kept for the operator; every amount exact to the cent.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { eventsIn, subscriptionOf, useMainPlanUntil } from './support/money.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { startStripeDouble, startStripeShop, type StripeDouble } from './support/stripe-double.ts';
import { streams } from '../src/ledger/events.ts';
import { issueKey } from '../src/keys/index.ts';
import { openAccount } from '../src/accounts/index.ts';

const ADMIN = 'tg_admin_stripe_test_token_0123456789abcdef';
let stripe: StripeDouble;
let gw: TestGateway;
let gw2: TestGateway | null = null;
let stopAll: () => Promise<void>;
let key: string;
const accountId = 'acct_stripe';

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

async function deliver(event: Record<string, unknown>, to: TestGateway = gw, secret?: string) {
  const { body, signature } = stripe.signed(event, secret);
  return call(to, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
}

async function accountEvents(type: string) {
  return (await gw.ledger.events.readStream(streams.account(accountId))).filter((e) => e.type === type);
}

/** Everything a refused notice could have written to: the account, the unmatched payments. */
const eventCount = () => eventsIn(gw.ledger.events, [streams.account(accountId), streams.unmatchedPayments()]);

/** A customer's purchase through Checkout, paid on the double; the completed session. */
async function buy(body: Record<string, unknown>, opts: { async?: boolean } = {}) {
  const session = await call(gw, '/v1/checkout/sessions', { key, body });
  assert.is(session.status, 201, session.text);
  assert.ok(String(session.json.url).startsWith('https://'));
  return stripe.pay(session.json.id, opts);
}

test.before(async () => {
  stripe = await startStripeDouble();
  ({ gw, gw2, stopAll, key } = await startStripeShop(stripe, ADMIN, { id: accountId, name: 'Card customer' }));
});
test.after(() => stopAll());

let planIntent: string;

test('a plan bought through Checkout: payment and grant in one append, the fee from the balance transaction', async () => {
  // One period paid once (recurring plans: test/payments-subscriptions.test.ts).
  const session = await buy({ plan_id: 'pro', recurring: false });
  assert.is(session.mode, 'payment');
  assert.ok(stripe.requests.includes('POST /v1/checkout/sessions'));
  planIntent = session.payment_intent as string;
  const r = await deliver(stripe.event('checkout.session.completed', session));
  assert.is(r.status, 200, r.text);
  assert.is(r.json.outcome, 'recorded');
  assert.ok(stripe.requests.includes(`GET /v1/payment_intents/${planIntent}`));
  const paid = await accountEvents('PaymentReceived');
  assert.is(paid.length, 1);
  // $20.00, Stripe's fee 2.9% + 30 cents = 58 + 30 = 88 cents.
  assert.equal(
    [paid[0].data.processor, paid[0].data.processorPaymentId, paid[0].data.amount, paid[0].data.currency, paid[0].data.fee],
    ['stripe', planIntent, 2000, 'USD', 88],
  );
  const events = await gw.ledger.events.readStream(streams.account(accountId));
  assert.is(events[paid[0].revision + 1].type, 'SubscriptionStarted');
  assert.is(events[paid[0].revision + 1].data.paymentId, paid[0].data.paymentId);
  assert.is((await subscriptionOf(gw, key)).quota.total, 1000);
});

test('the same notice twice, at once (and to two gateways on PostgreSQL), grants once', async () => {
  const session = await buy({ pack_id: 'p300' });
  const event = stripe.event('checkout.session.completed', session);
  const targets = [gw, gw2 ?? gw, gw, gw2 ?? gw];
  const replies = await Promise.all(targets.map((t) => deliver(event, t)));
  assert.ok(
    replies.every((r) => r.status === 200),
    replies.map((r) => r.text).join('\n'),
  );
  assert.is(replies.filter((r) => r.json.outcome === 'recorded').length, 1);
  assert.is((await accountEvents('ExtraTokensGranted')).length, 1);
  const again = await deliver(stripe.event('checkout.session.completed', session));
  assert.is(again.json.outcome, 'already_recorded');
});

test('out of order: a refund notice before the payment notice records the payment first, once', async () => {
  const session = await buy({ pack_id: 'p300' });
  const intent = session.payment_intent as string;
  const refunded = await deliver(stripe.event('charge.refunded', stripe.refund(intent, 100)));
  assert.is(refunded.json.outcome, 'refunded', refunded.text);
  const late = await deliver(stripe.event('checkout.session.completed', session));
  assert.is(late.json.outcome, 'already_recorded');
  const paid = (await accountEvents('PaymentReceived')).filter((e) => e.data.processorPaymentId === intent);
  assert.is(paid.length, 1);
  const refunds = (await accountEvents('PaymentRefunded')).filter((e) => e.data.paymentId === paid[0].data.paymentId);
  // $1.00 of $3.00 bought 100 of the 300 tokens; none used yet: all withdrawn, all from deferred.
  assert.equal(
    [refunds.length, refunds[0].data.amount, refunds[0].data.tokensWithdrawn, refunds[0].data.fromDeferred, refunds[0].data.refundedRevenue],
    [1, 100, 100, 100, 0],
  );
});

test('bad signatures and bodies: 400, nothing written', async () => {
  const before = await eventCount();
  const session = await buy({ pack_id: 'p300' });
  const event = stripe.event('checkout.session.completed', session);
  const { body, signature } = stripe.signed(event);
  const cases = [
    await call(gw, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json' } }),
    await deliver(event, gw, 'whsec_not_the_secret'),
    await call(gw, '/webhooks/stripe', {
      raw: body.replace('"amount_total":300', '"amount_total":30000'),
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
    }),
    await call(gw, '/webhooks/stripe', { raw: 'x'.repeat(600 * 1024), headers: { 'content-type': 'application/json', 'stripe-signature': signature } }),
  ];
  const garbage = stripe.signed({} as Record<string, unknown>);
  cases.push(await call(gw, '/webhooks/stripe', { raw: 'not json', headers: { 'content-type': 'application/json', 'stripe-signature': garbage.signature } }));
  for (const r of cases) {
    assert.is(r.status, 400, r.text);
    assert.ok(r.json.error.message);
    assert.not.ok(r.text.includes(stripe.webhookSecret) || r.text.includes(stripe.secretKey));
  }
  assert.is(await eventCount(), before);
});

test('an asynchronous payment waits, and one that fails grants nothing', async () => {
  const before = (await accountEvents('PaymentReceived')).length;
  const failing = await buy({ pack_id: 'p300' }, { async: true });
  assert.is((await deliver(stripe.event('checkout.session.completed', failing))).json.outcome, 'waiting');
  assert.is((await deliver(stripe.event('checkout.session.async_payment_failed', failing))).json.outcome, 'failed');
  assert.is((await accountEvents('PaymentReceived')).length, before);
  const succeeding = await buy({ pack_id: 'p300' }, { async: true });
  assert.is((await deliver(stripe.event('checkout.session.completed', succeeding))).json.outcome, 'waiting');
  assert.is((await deliver(stripe.event('checkout.session.async_payment_succeeded', succeeding))).json.outcome, 'recorded');
  assert.is((await accountEvents('PaymentReceived')).length, before + 1);
});

test('a partial refund after part of the plan was used withdraws only unused tokens', async () => {
  const used = await useMainPlanUntil(gw, key, 800);
  // $5.00 of $20.00 bought 250 tokens; only 1000 - used (< 250) are unused.
  const r = await deliver(stripe.event('charge.refunded', stripe.refund(planIntent, 500)));
  assert.is(r.json.outcome, 'refunded', r.text);
  const [refund] = (await accountEvents('PaymentRefunded')).filter((e) => String(e.data.refundId).endsWith(':500'));
  const unused = 1000 - used;
  assert.equal(
    [refund.data.amount, refund.data.tokensWithdrawn, refund.data.fromDeferred, refund.data.refundedRevenue],
    [500, unused, 2 * unused, 500 - 2 * unused],
  );
  // Replayed: the same running total is the same refund.
  assert.is((await deliver(stripe.event('charge.refunded', stripe.refund(planIntent, 0)))).json.outcome, 'already_recorded');
  const sub = await subscriptionOf(gw, key);
  assert.equal([sub.quota.total, sub.quota.remaining], [used, 0]);
});

/** What the journal books as dispute losses for one event (a DisputeClosed: the fee Stripe kept). */
async function disputeLossesOf(eventId: string): Promise<number> {
  await gw.ledger.caughtUp();
  const day = new Date().toISOString().slice(0, 10);
  const j = await admin(`/finance/journal?from=${day}&to=${day}&format=json`);
  assert.is(j.status, 200, j.text);
  return (j.json.entries as Array<{ eventIds: string[]; postings: Array<{ account: string; debit: number; credit: number }> }>)
    .filter((e) => e.eventIds.includes(eventId))
    .flatMap((e) => e.postings)
    .filter((p) => p.account === 'expenses:dispute-losses')
    .reduce((sum, p) => sum + p.debit - p.credit, 0);
}

const closeOf = async (disputeId: unknown) => (await accountEvents('DisputeClosed')).find((e) => e.data.disputeId === disputeId)!;

test('a dispute suspends the keys until it is won; a lost one refunds and books its fee', async () => {
  const session = await buy({ pack_id: 'p300' });
  const intent = session.payment_intent as string;
  await deliver(stripe.event('checkout.session.completed', session));
  const won = stripe.dispute(intent, 300);
  assert.is((await deliver(stripe.event('charge.dispute.created', won))).json.outcome, 'disputed');
  assert.is((await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('hi'), max_tokens: 5 })).status, 403);
  // Won, and Stripe gave the fee back: the reinstatement's fee is -1500, so Stripe kept nothing.
  const wonClosed = stripe.dispute(intent, 300, 'won', won.id as string);
  assert.equal(
    (wonClosed.balance_transactions as Array<{ fee: number }>).map((bt) => bt.fee),
    [1500, -1500],
  );
  assert.is((await deliver(stripe.event('charge.dispute.closed', wonClosed))).json.outcome, 'dispute_closed');
  assert.is((await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('hi'), max_tokens: 5 })).status, 200);
  const wonEvent = await closeOf(won.id);
  assert.equal([wonEvent.data.outcome, wonEvent.data.fee], ['won', 0]);
  assert.is(await disputeLossesOf(wonEvent.id), 0, 'a returned fee is no loss');

  // Won, but Stripe kept its fee (the reinstatement's fee is 0): the fee is a loss all the same.
  const kept = stripe.dispute(intent, 300);
  await deliver(stripe.event('charge.dispute.created', kept));
  await deliver(stripe.event('charge.dispute.closed', stripe.dispute(intent, 300, 'won', kept.id as string, { feeReturned: false })));
  const keptEvent = await closeOf(kept.id);
  assert.equal([keptEvent.data.outcome, keptEvent.data.fee], ['won', 1500]);
  assert.is(await disputeLossesOf(keptEvent.id), 1500);

  const lost = stripe.dispute(intent, 300, 'needs_response');
  await deliver(stripe.event('charge.dispute.created', lost));
  const closed = await deliver(stripe.event('charge.dispute.closed', stripe.dispute(intent, 300, 'lost', lost.id as string)));
  assert.is(closed.json.outcome, 'dispute_closed');
  const close = await closeOf(lost.id);
  assert.equal([close.data.outcome, close.data.fee], ['lost', 1500]);
  assert.is(await disputeLossesOf(close.id), 1500);
  const [refund] = (await accountEvents('PaymentRefunded')).filter((e) => e.data.refundId === lost.id);
  assert.equal(
    [refund.data.reason, refund.data.amount, (refund.data.fromDeferred as number) + (refund.data.refundedRevenue as number)],
    ['dispute_lost', 300, 300],
  );
});

test('a payment naming no known account is kept for the operator, granted nothing', async () => {
  const session = await buy({ pack_id: 'p300' });
  const stray = { ...session, metadata: { account_id: 'acct_nobody', pack_id: 'p300' } };
  const r = await deliver(stripe.event('checkout.session.completed', stray));
  assert.is(r.json.outcome, 'unmatched', r.text);
  assert.is((await deliver(stripe.event('checkout.session.completed', stray))).json.outcome, 'unmatched');
  const list = await admin('/unmatched-payments');
  const mine = list.json.data.filter((u: any) => u.reason === 'no known account');
  assert.is(mine.length, 1);
  assert.is(mine[0].amount, 300);
});

test('Stripe off: checkout says so, the webhook path is not there', async () => {
  const off = await startTestGateway({ bootstrap: false });
  try {
    const acct = await openAccount(off.ledger, { accountId: 'acct_off', name: 'x' }, 'admin:test');
    const k = await issueKey(off.ledger, acct, 'k', 'admin:test');
    const r = await call(off, '/v1/checkout/sessions', { key: k.secret, body: { pack_id: 'p300' } });
    assert.is(r.status, 400);
    assert.is(r.json.error.code, 'stripe_off');
    assert.is(
      (await call(off, '/webhooks/stripe', { raw: '{}', headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=x' } })).status,
      404,
    );
  } finally {
    await off.stop();
  }
});

test.run();
