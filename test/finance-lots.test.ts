// The account decider (extra tokens as one pool, used oldest first) and the lot book (per lot) give
// each pack the same use, also after a correction gives back tokens of an older charge: a refund of
// the newer pack then withdraws exactly the unused tokens the lot book holds, and moves exactly the
// value the lot had deferred (before, the lot book gave the tokens back to the charge's own pack
// while the decider freed the pool's newest ones, and capped the refund's value on that lot).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { subscriptionOf, useMainPlanUntil } from './support/money.ts';
import type { Lot } from '../src/books/lot-book.ts';

const ADMIN = 'tg_admin_finance_lots_test_token_0123456789abcdef';
const MODEL = 'cx/gen-6-luna';
const accountId = 'acct_lots';
let gw: TestGateway;
let key: string;
const today = () => new Date().toISOString().slice(0, 10);

async function ok(path: string, body?: unknown, method?: string) {
  const r = await call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });
  assert.ok(r.status < 300, `${path}: ${r.status} ${r.text}`);
  return r.json;
}

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  await ok('/plans', { plan_id: 'small', name: 'Small', quota: 100, validity_days: 30, requests_per_minute: 10_000, models: ['*'] });
  await ok('/plans/small/price', { amount: 100 }, 'PUT');
  await ok('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT');
  await ok('/accounts', { account_id: accountId, name: 'Lots' });
  key = (await ok(`/accounts/${accountId}/keys`, { name: 'app' })).key;
});
test.after(async () => {
  await gw?.stop();
});

const pay = async (reference: string, item: { plan_id: string } | { pack_id: string }, amount: number) =>
  (await ok(`/accounts/${accountId}/payments`, { reference, amount, currency: 'USD', fee: 0, ...item })).id as string;

async function useExtraUntil(tokens: number): Promise<void> {
  while ((await subscriptionOf(gw, key)).extra_tokens.used < tokens) {
    const r = await chat(gw, key, { model: MODEL, messages: userMessage('Tell me about toll roads.'), max_tokens: 80 });
    assert.is(r.status, 200, r.text);
  }
}

const lotsOf = async (): Promise<Lot[]> => (await ok(`/finance/lots?from=${today()}&to=${today()}`)).data;

test('a correction of an older charge, then a refund of the newer pack: decider and lot book agree on every lot', async () => {
  await pay('INV-1', { plan_id: 'small' }, 100);
  await useMainPlanUntil(gw, key, 100);
  const packA = await pay('INV-2', { pack_id: 'p300' }, 300);
  const packB = await pay('INV-3', { pack_id: 'p300' }, 300);
  // The older calls take from pack A only; the newer ones go on into pack B.
  const from = new Date(Date.now() - 1).toISOString();
  await useExtraUntil(150);
  const to = new Date().toISOString();
  await useExtraUntil(380);
  // Half the multiplier over the older calls: tokens come back to the pool.
  await ok('/corrections', { model: MODEL, from, to, multiplier: 0.5, reason: 'price typo' });
  const used = (await subscriptionOf(gw, key)).extra_tokens.used;
  let lots = await lotsOf();
  const lot = (paymentId: string) => lots.find((l) => l.paymentId === paymentId)!;
  // The pool's rule: used oldest first, so pack A is used before any of pack B.
  assert.equal([lot(packA).used, lot(packB).used], [Math.min(300, used), Math.max(0, used - 300)], `pool used ${used}`);
  assert.ok(used < 380, 'the correction gave tokens back');

  // Refund pack B in full: the decider withdraws its unused tokens, the lot book holds exactly those.
  const unusedB = 300 - lot(packB).used;
  const deferredB = lot(packB).deferred;
  const refund = await ok(`/accounts/${accountId}/payments/${packB}/refunds`, { amount: 300, refund_id: 're_lots_1' });
  assert.equal([refund.tokensWithdrawn, refund.fromDeferred], [unusedB, deferredB]);
  lots = await lotsOf();
  const b = lot(packB);
  assert.equal([b.withdrawn, b.deferred, b.recognised, b.refunded], [unusedB, 0, 0, 300]);
  const rec = await ok(`/finance/reconciliation?from=${today()}&to=${today()}`);
  assert.equal([rec.total.difference, rec.total.event_ids], [0, []]);
  const v = await ok('/verify', {});
  assert.equal(v.lotProblems, []);
});

test.run();
