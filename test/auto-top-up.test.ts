// Auto top-up (issue 43, item 5): a card saved through Stripe Checkout in setup mode, a threshold
// and a pack; the charge that takes the tokens left below the threshold starts one top-up (100
// calls at once, over two gateways on PostgreSQL: exactly one), charged off session to the saved
// card through the official `stripe` client against the double, and booked as a payment with its
// invoice. A declined card fails it once, notifies, and is not tried again. Bad input is refused
// naming the field, and writes nothing.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { saveCard as saveCardFor, startStripeDouble, startStripeShop, type StripeDouble } from './support/stripe-double.ts';
import type { TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { streams } from '../src/ledger/events.ts';
import { NOTIFICATION_KINDS } from '../src/webhooks/kinds.ts';
import { accountState } from '../src/accounts/index.ts';
import { initialAccountState } from '../src/accounts/account-state.ts';
import { decideAutoTopUp, topUpOnCharge } from '../src/accounts/auto-top-up.ts';
import { documentsOf } from './support/documents.ts';

const ADMIN = 'tg_admin_auto_top_up_test_token_0123456789';
const accountId = 'acct_topup';
let stripe: StripeDouble;
let gw: TestGateway;
let gw2: TestGateway | null;
let stopAll: () => Promise<void>;
let key: string;

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });
const topUp = (g: TestGateway, method: string, body?: unknown, k = key) => call(g, '/v1/auto-top-up', { key: k, body, method });
const accountEvents = async (type: string) => (await gw.ledger.events.readStream(streams.account(accountId))).filter((e) => e.type === type);

const saveCard = (opts: { declines?: boolean; last4?: string } = {}) => saveCardFor(gw, stripe, key, opts, gw2 ?? gw);

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  for (const end = Date.now() + ms; ;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > end) assert.unreachable(`${what}: ${JSON.stringify(v)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** One small chat call through either gateway. */
const oneCall = (g: TestGateway) => chat(g, key, { model: 'cx/gen-6-luna', messages: userMessage('Toll roads?'), max_tokens: 20 });

const rules = suite('auto top-up: the crossing rule');

rules('a charge starts a top-up only when it takes the tokens left from at or above the threshold to below it', () => {
  const card = { processor: 'stripe' as const, customerId: 'cus_1', paymentMethodId: 'pm_1', brand: 'visa', last4: '4242' };
  const base = { ...initialAccountState(), opened: true, accountId: 'a', extraGranted: 1000, paymentMethod: card };
  const set = { ...base, autoTopUp: { thresholdTokens: 500, packId: 'p300', pending: null, failed: null } };
  const at = new Date();
  assert.is(topUpOnCharge(set, 499, 'h1', at), null, 'still at the threshold');
  const started = topUpOnCharge(set, 501, 'h1', at);
  assert.equal(started?.data, { accountId: 'a', topUpId: 'topup_h1', packId: 'p300', thresholdTokens: 500, tokensLeft: 499, chargeHoldId: 'h1' });
  // Already below: no crossing. Pending, failed, off, or without a card: nothing starts.
  assert.is(topUpOnCharge({ ...set, extraUsed: 600 }, 10, 'h2', at), null);
  assert.is(topUpOnCharge({ ...set, autoTopUp: { ...set.autoTopUp, pending: 'topup_h0' } }, 501, 'h3', at), null);
  assert.is(topUpOnCharge({ ...set, autoTopUp: { ...set.autoTopUp, failed: 'declined' } }, 501, 'h4', at), null);
  assert.is(topUpOnCharge(base, 999, 'h5', at), null);
  assert.is(topUpOnCharge({ ...set, paymentMethod: null }, 501, 'h6', at), null);
  // Settled once: a second settlement of the same top-up appends nothing.
  const pending = { ...set, autoTopUp: { ...set.autoTopUp, pending: 'topup_h1' } };
  assert.is(decideAutoTopUp({ type: 'SettleTopUp', topUpId: 'topup_h1', outcome: { paymentId: 'pay_1' } }, pending).length, 1);
  assert.equal(decideAutoTopUp({ type: 'SettleTopUp', topUpId: 'topup_h1', outcome: { paymentId: 'pay_1' } }, set), []);
});

rules.run();

const test = suite('auto top-up');

test.before(async () => {
  stripe = await startStripeDouble();
  ({ gw, gw2, stopAll, key } = await startStripeShop(stripe, ADMIN, { id: accountId, name: 'Top-up customer' }));
  assert.is((await admin('/packs/p20k', { name: '20,000 tokens', tokens: 20_000, amount: 2000 }, 'PUT')).status, 200);
  // A plan period (its models) and 20,000 extra tokens, paid by transfer.
  assert.is((await admin(`/accounts/${accountId}/payments`, { reference: 'WIRE-0', amount: 2000, currency: 'USD', plan_id: 'pro' })).status, 201);
  assert.is((await admin(`/accounts/${accountId}/payments`, { reference: 'WIRE-1', amount: 2000, currency: 'USD', pack_id: 'p20k' })).status, 201);
});
test.after(() => stopAll());

test('bad input is refused naming the field, and writes nothing', async () => {
  const before = (await gw.ledger.events.readStream(streams.account(accountId))).length;
  // No card saved yet: nothing can be charged.
  const noCard = await topUp(gw, 'PUT', { threshold_tokens: 100, pack_id: 'p300' });
  assert.is(noCard.status, 409, noCard.text);
  assert.is(noCard.json.error.param, 'payment_method');
  for (const [body, param] of [
    [{ threshold_tokens: -5, pack_id: 'p300' }, 'threshold_tokens'],
    [{ threshold_tokens: 0, pack_id: 'p300' }, 'threshold_tokens'],
    [{ threshold_tokens: 1.5, pack_id: 'p300' }, 'threshold_tokens'],
    [{ threshold_tokens: '100', pack_id: 'p300' }, 'threshold_tokens'],
    [{ threshold_tokens: 100, pack_id: 'no-such-pack' }, 'pack_id'],
    [{ threshold_tokens: 100 }, 'pack_id'],
  ] as const) {
    const r = await topUp(gw, 'PUT', body);
    assert.is(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.is(r.json.error.param, param, JSON.stringify(body));
  }
  assert.is((await gw.ledger.events.readStream(streams.account(accountId))).length, before);
});

test('a card saved in setup mode; 100 calls at once cross the threshold: one top-up, one charge, one payment with its invoice', async () => {
  await saveCard();
  const shown = await topUp(gw, 'GET');
  assert.equal([shown.json.card, shown.json.enabled], [{ brand: 'visa', last4: '4242' }, false]);
  const left = (await topUp(gw, 'GET')).json.tokens_left as number;
  assert.is(left, 21_000);
  const threshold = left - 200;
  const set = await topUp(gw2 ?? gw, 'PUT', { threshold_tokens: threshold, pack_id: 'p300' });
  assert.is(set.status, 200, set.text);
  assert.equal([set.json.enabled, set.json.threshold_tokens, set.json.pack_id], [true, threshold, 'p300']);

  // Stripe is unreachable while the calls run, so the top-up they start stays pending through all
  // of them: any second start would have to come from a second crossing, which pending forbids.
  stripe.outage(true);
  let t: { topUpId: string; tokensLeft: number; thresholdTokens: number };
  try {
    let calls = 0;
    while ((await topUp(gw, 'GET')).json.tokens_left >= threshold) {
      const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => oneCall(i % 2 && gw2 ? gw2 : gw)));
      assert.equal(
        replies.filter((r) => r.status !== 200).map((r) => r.text),
        [],
      );
      calls += replies.length;
      if (calls > 1000) assert.unreachable(`1,000 calls used ${left - (await topUp(gw, 'GET')).json.tokens_left} tokens`);
    }
    const triggered = await accountEvents('AutoTopUpTriggered');
    assert.is(triggered.length, 1, JSON.stringify(triggered.map((e) => e.data)));
    t = triggered[0].data as typeof t;
    assert.ok(t.tokensLeft < threshold && t.thresholdTokens === threshold);
    // A second setting while it is pending is refused.
    const busy = await topUp(gw, 'PUT', { threshold_tokens: 100, pack_id: 'p300' });
    assert.is(busy.status, 409, busy.text);
    assert.is(busy.json.error.param, 'auto_top_up');
    const stillBusy = await topUp(gw, 'DELETE');
    assert.is(stillBusy.status, 409, stillBusy.text);
    assert.is(stillBusy.json.error.param, 'auto_top_up');
  } finally {
    // Stripe back: the sweeps of both gateways charge it, with one idempotency key: one PaymentIntent.
    stripe.outage(false);
  }
  await until(
    'the top-up settled',
    () => accountEvents('AutoTopUpSucceeded'),
    (e) => e.length === 1,
  );
  const charged = new Set(stripe.offSession.filter((c) => c.metadata.auto_top_up === t.topUpId).map((c) => c.id));
  assert.is(charged.size, 1, JSON.stringify(stripe.offSession));
  assert.ok(stripe.offSession.every((c) => c.idempotencyKey === t.topUpId));
  const [pi] = charged;
  assert.is(stripe.offSession.find((c) => c.id === pi)!.amount, 300);
  const s = await accountState(gw.ledger, accountId);
  const paid = [...s.payments.values()].filter((p) => p.processorPaymentId === pi);
  assert.is(paid.length, 1);
  assert.equal([paid[0].amount, paid[0].itemId, paid[0].tokens], [300, 'p300', 300]);
  assert.is((await accountEvents('AutoTopUpSucceeded'))[0].data.paymentId, paid[0].paymentId);
  // The list of top-ups is a read model: it follows the log within moments (the settlement may be the other gateway's).
  const after = await until(
    'the top-up listed as succeeded',
    async () => (await topUp(gw, 'GET')).json,
    (v) => v.top_ups[0]?.status === 'succeeded',
  );
  assert.equal([after.pending_top_up, after.top_ups[0].payment_id, after.top_ups.length], [null, paid[0].paymentId, 1]);
  // The top-up's payment has its invoice, like any payment (the third: the two transfers have theirs).
  const docs = await documentsOf<{ payment_id: string; total: number }>(gw, ADMIN, accountId, 3);
  assert.is(docs.find((d) => d.payment_id === paid[0].paymentId)?.total, 300);
  // More sweeps charge nothing more.
  await new Promise((res) => setTimeout(res, 1000));
  assert.is(new Set(stripe.offSession.map((c) => c.id)).size, 1);
});

test('a declined card: the top-up fails once, a webhook notice says why, and nothing is charged again', async () => {
  await saveCard({ declines: true, last4: '0341' });
  const threshold = (await topUp(gw, 'GET')).json.tokens_left - 50;
  const set = await topUp(gw, 'PUT', { threshold_tokens: threshold, pack_id: 'p300' });
  assert.is(set.status, 200, set.text);
  assert.equal(set.json.card, { brand: 'visa', last4: '0341' });
  const before = stripe.offSession.length;
  while ((await topUp(gw, 'GET')).json.tokens_left >= threshold) {
    const replies = await Promise.all(Array.from({ length: 20 }, () => oneCall(gw)));
    assert.ok(replies.every((r) => r.status === 200));
  }
  const failed = await until(
    'the top-up failed',
    () => accountEvents('AutoTopUpFailed'),
    (e) => e.length === 1,
  );
  assert.match(String((failed[0].data as { reason: string }).reason), /declined/);
  const shown = await topUp(gw, 'GET');
  assert.equal([shown.json.enabled, shown.json.pending_top_up], [false, null]);
  assert.match(shown.json.failed_reason, /insufficient funds/);
  // Spending on below the threshold starts nothing more: the customer sets it again first.
  for (let i = 0; i < 5; i++) assert.is((await oneCall(gw)).status, 200);
  await new Promise((res) => setTimeout(res, 1000));
  assert.is(stripe.offSession.length, before + 1);
  assert.is((await accountEvents('AutoTopUpTriggered')).length, 2);
  // The webhook notice of the failure, from the kind the dispatcher runs.
  const kind = NOTIFICATION_KINDS.find((k) => k.type === 'auto_top_up.failed')!;
  const s = await accountState(gw.ledger, accountId);
  const notices = kind.onEvent!(
    { before: s, after: s, logged: { id: failed[0].id, timestamp: failed[0].timestamp, event: { type: 'AutoTopUpFailed', data: failed[0].data } as never } },
    { thresholds: [], expiringDays: 7, registeredAt: '2000-01-01T00:00:00Z' },
  );
  assert.is(notices.length, 1);
  assert.match(String(notices[0].data.reason), /declined/);
  // Turned off: nothing is set, and a card can be saved again.
  const off = await topUp(gw, 'DELETE');
  assert.equal([off.status, off.json.enabled, off.json.threshold_tokens], [200, false, null]);
});

test.run();
