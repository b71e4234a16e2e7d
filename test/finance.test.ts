// Revenue recognised as tokens are used, over real HTTP, with exact figures: a plan bought and
// partly used then renewed with tokens left (breakage), two packs used oldest first, a pack bought
// with a code, a multiplier correction over calls that took from two lots, a partial refund after
// use and a lost dispute. The finance report, the money reconciliation (zero differences), the
// journal read back by the real hledger (its balances are the report's), the same figures after a
// rebuild from zero, and the invariant checks catching a lot that does not sum and an unbalanced journal.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { hledgerBalances } from './support/hledger.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, chat, userMessage } from './support/http.ts';
import { subscriptionOf, useMainPlanUntil } from './support/money.ts';
import { assertLot, type Lot } from '../src/books/lot-book.ts';
import { assertBalanced, type JournalEntry } from '../src/books/finance-journal.ts';
import { valueOf } from '../src/money/money.ts';

const ADMIN = 'tg_admin_finance_test_token_0123456789abcdef';
const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });
const MODEL = 'cx/gen-6-luna';
const accountId = 'acct_fin';
let gw: TestGateway;
let key: string;
const today = () => new Date().toISOString().slice(0, 10);
const window = () => `from=${today()}&to=${today()}`;

async function ok(path: string, body?: unknown, method?: string) {
  const r = await admin(path, body, method);
  assert.ok(r.status < 300, `${path}: ${r.status} ${r.text}`);
  return r.json;
}

const ids: Record<string, string> = {};
let usedFirstPeriod = 0;

test.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  await ok('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 10_000, models: ['*'] });
  await ok('/plans/pro/price', { amount: 2000 }, 'PUT');
  await ok('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT');
  await ok('/accounts', { account_id: accountId, name: 'Books' });
  key = (await ok(`/accounts/${accountId}/keys`, { name: 'app' })).key;
});
test.after(async () => {
  await gw?.stop();
});

const pay = async (reference: string, fee: number, item: { plan_id: string } | { pack_id: string }, amount: number) =>
  (await ok(`/accounts/${accountId}/payments`, { reference, amount, currency: 'USD', fee, ...item })).id as string;

/** Calls until the extra pool has used at least `tokens`. */
async function useExtraUntil(tokens: number): Promise<void> {
  for (;;) {
    const sub = await subscriptionOf(gw, key);
    if (sub.extra_tokens.used >= tokens) return;
    const r = await chat(gw, key, { model: MODEL, messages: userMessage('Tell me about toll roads.'), max_tokens: 80 });
    assert.is(r.status, 200, r.text);
  }
}

const lotsOf = async (): Promise<Lot[]> => (await ok(`/finance/lots?${window()}`)).data;

test('the scenario: a plan renewed with tokens left, two packs oldest first, a code pack, a correction over two lots, a refund and a lost dispute', async () => {
  ids.plan1 = await pay('INV-1', 88, { plan_id: 'pro' }, 2000);
  usedFirstPeriod = await useMainPlanUntil(gw, key, 400);
  // Renewed with 1000 - used tokens left: their value ($20.00 / 1000 = 2 cents each) is breakage.
  ids.plan2 = await pay('INV-2', 88, { plan_id: 'pro' }, 2000);
  ids.packA = await pay('INV-3', 0, { pack_id: 'p300' }, 300);
  ids.packB = await pay('INV-4', 0, { pack_id: 'p300' }, 300);
  const batch = await ok('/code-batches', { count: 1, pack_id: 'p300', amount: 250 });
  const redeemed = await call(gw, '/v1/redemptions', { key, body: { code: batch.codes[0] } });
  assert.is(redeemed.status, 201, redeemed.text);
  ids.code = redeemed.json.payment.id;
  await useMainPlanUntil(gw, key, 1000);
  const from = new Date(Date.now() - 1).toISOString();
  await useExtraUntil(400);
  const to = new Date().toISOString();
  let lots = await lotsOf();
  const lot = (paymentId: string) => lots.find((l) => l.paymentId === paymentId)!;
  // Oldest first: pack A used up before pack B is touched, the code pack untouched.
  assert.is(lot(ids.packA).used, 300);
  assert.ok(lot(ids.packB).used > 0 && lot(ids.packB).used < 300);
  assert.is(lot(ids.code).used, 0);
  // Half the multiplier over the extra calls: half their tokens go back to the lots they came from (A and B).
  const c = await ok('/corrections', { model: MODEL, from, to, multiplier: 0.5, reason: 'price typo' });
  assert.ok(c.correctionId);
  lots = await lotsOf();
  assert.ok(lot(ids.packA).used < 300, 'tokens went back to pack A');
  // A partial refund of pack B after use: its own unused tokens first (deferred), nothing from the others.
  const refund = await ok(`/accounts/${accountId}/payments/${ids.packB}/refunds`, { amount: 100, refund_id: 're_fin_1' });
  assert.is(refund.tokensWithdrawn, Math.min(100, 300 - lot(ids.packB).used));
  assert.is(refund.fromDeferred, refund.tokensWithdrawn);
  // A lost dispute over pack A.
  await ok(`/accounts/${accountId}/payments/${ids.packA}/disputes`, { dispute_id: 'dp_fin', amount: 300 });
  await ok(`/accounts/${accountId}/disputes/dp_fin/close`, { outcome: 'lost', fee: 1500 });
});

test('every lot is exact: revenue at its rate by the rounding rule, breakage, deferred = value of unused tokens', async () => {
  const lots = await lotsOf();
  const sub = await subscriptionOf(gw, key);
  const lot = (paymentId: string) => lots.find((l) => l.paymentId === paymentId)!;
  const p1 = lot(ids.plan1);
  assert.equal([p1.recognised, p1.breakage, p1.deferred, p1.ended], [2 * usedFirstPeriod, 2 * (1000 - usedFirstPeriod), 0, true]);
  const p2 = lot(ids.plan2);
  assert.equal([p2.used, p2.recognised, p2.deferred], [sub.quota.used, 2 * sub.quota.used, 2 * (1000 - sub.quota.used)]);
  // The lots' use of extra tokens is the account's (the decider's own count).
  assert.is(
    lots.filter((l) => l.pool === 'extra').reduce((s, l) => s + l.used, 0),
    sub.extra_tokens.used,
  );
  for (const l of lots) {
    assert.is(l.recognised + l.breakage + l.refunded + l.carriedOut + l.deferred, l.paid + l.carriedIn, l.lotId);
    // Deferred = the value of the unused tokens: the whole less the rounded value of the used ones.
    if (!l.ended && l.refunded === 0) assert.is(l.deferred, valueOf(l.rate, l.tokens) - valueOf(l.rate, l.used), l.lotId);
  }
  const code = lot(ids.code);
  assert.equal([code.source, code.paid, code.recognised], ['code', 250, valueOf({ amount: 250, per: 300 }, code.used)]);
});

test('upstream cost, and a cost rate fixed after the fact re-prices it: margin = revenue - cost', async () => {
  const rows = (await ok(`/finance/report?${window()}`)).rows.filter((r: any) => r.model === MODEL);
  const channels = [...new Set(rows.map((r: any) => r.channel as string))];
  assert.ok(channels.length > 0);
  assert.ok(
    rows.every((r: any) => r.upstream_cost === 0 && r.unpriced_calls > 0),
    'no rate yet: unpriced, never free',
  );
  const rate = async (input: string, output: string) => {
    for (const channel of channels) await ok('/cost-rates', { channel, effective_at: '2000-01-01T00:00:00Z', input, output });
  };
  await rate('1000', '2000');
  const first = (await ok(`/finance/report?${window()}`)).totals;
  assert.ok(first.upstream_cost > 0 && first.unpriced_calls === 0, JSON.stringify(first));
  // Fixed later for the same effective time: the same calls re-priced at twice the rate.
  await rate('2000', '4000');
  const fixed = (await ok(`/finance/report?${window()}`)).totals;
  assert.ok(Math.abs(fixed.upstream_cost - 2 * first.upstream_cost) <= channels.length * 2, `${fixed.upstream_cost} vs ${first.upstream_cost}`);
  assert.is(fixed.margin, fixed.revenue - fixed.upstream_cost);
  // The cost read model's own figure.
  const costs = await ok(`/upstream-costs?${window()}`);
  assert.is(
    costs.data.reduce((sum: number, c: any) => sum + Number(c.cost_minor), 0),
    fixed.upstream_cost,
  );
});

test('the finance report, the reconciliation and the hledger journal agree to the cent', async () => {
  const report = await ok(`/finance/report?${window()}`);
  const t = report.totals;
  assert.equal([t.payments, t.fees, t.refunds, t.disputes, t.dispute_fees], [4850, 176, 100, 300, 1500]);
  assert.is(t.breakage, 2 * (1000 - usedFirstPeriod));
  const lots = await lotsOf();
  const deferred = lots.reduce((s, l) => s + l.deferred, 0);
  assert.is(report.deferred.find((d: any) => d.account_id === accountId).deferred, deferred);
  // Usage rows carry their model; payments rows none.
  assert.ok(report.rows.some((r: any) => r.model === MODEL && r.revenue > 0));
  const csv = await admin(`/finance/report?${window()}&format=csv`);
  assert.is(
    csv.text.split('\n')[0],
    'day,account_id,model,channel,payments,fees,refunds,disputes,dispute_fees,revenue,refunded_revenue,breakage,promotional_tokens,tax,tax_refunded,fx_gain_loss,upstream_cost,unpriced_calls,margin',
  );

  const rec = await ok(`/finance/reconciliation?${window()}`);
  const line = rec.lines.find((l: any) => l.account_id === accountId);
  assert.equal([line.payments, line.refunds, line.revenue, line.breakage, line.deferred_end], [4850, 400, t.revenue, t.breakage, deferred]);
  assert.is(line.refunded_revenue, t.refunded_revenue);
  assert.equal([line.difference, rec.total.difference, line.event_ids], [0, 0, []]);
  assert.is(line.payments - line.refunds, line.revenue + line.refunded_revenue + line.breakage + line.deferred_change);

  const journal = await admin(`/finance/journal?${window()}`);
  assert.is(journal.status, 200, journal.text);
  const j = await ok(`/finance/journal?${window()}&format=json`);
  // Each upstream cost entry names the rates in force that day; each priced call of it (listed by
  // the per-call cost list) was priced by one of them, and the entry's amount is the calls' sum.
  const costEntriesOf = (j.entries as JournalEntry[]).filter((e) => e.postings.some((p) => p.account === 'expenses:upstream-cost'));
  const priced = (await ok(`/upstream-costs/calls?${window()}&limit=1000`)).data.filter((c: any) => c.priced);
  assert.ok(priced.length > 0);
  for (const c of priced.filter((c: any) => c.cost_minor !== '0')) {
    const entry = costEntriesOf.find(
      (e) => e.date === c.at.slice(0, 10) && e.memo.includes(`account ${c.account_id},`) && e.memo.includes(`channel ${c.channel},`),
    );
    assert.ok(entry && entry.eventIds.includes(c.rate_event_id), JSON.stringify(c));
  }
  const entrySum = costEntriesOf.reduce((n, e) => n + e.postings.find((p) => p.account === 'expenses:upstream-cost')!.debit, 0);
  assert.is(
    entrySum,
    priced.reduce((n: number, c: any) => n + Number(c.cost_minor), 0),
  );
  const b = j.balances;
  const expected: Record<string, number> = {
    'assets:cash': t.payments - t.fees - t.refunds - t.disputes - t.dispute_fees,
    'expenses:processor-fees': t.fees,
    'liabilities:deferred-revenue': -deferred,
    'revenue:recognised': -t.revenue,
    'revenue:breakage': -t.breakage,
    'expenses:upstream-cost': t.upstream_cost,
    'liabilities:upstream-payable': -t.upstream_cost,
  };
  for (const [account, figure] of Object.entries(expected)) assert.is(b[account] ?? 0, figure, account);
  assert.is(
    Object.values(b as Record<string, number>).reduce((s, v) => s + v, 0),
    0,
  );
  const read = await hledgerBalances(journal.text, 'finance.test');
  if (read) for (const [account, figure] of Object.entries(expected)) assert.is(read[account] ?? 0, figure, `hledger ${account}: ${JSON.stringify(read)}`);
});

test('after a rebuild from zero every figure is the same; verify checks every lot', async () => {
  const before = await ok(`/finance/report?${window()}`);
  const rec = await ok(`/finance/reconciliation?${window()}`);
  const rebuild = await admin('/rebuild', {});
  assert.ok(rebuild.text.includes('"type":"done"'), rebuild.text);
  assert.equal(await ok(`/finance/report?${window()}`), before);
  assert.equal(await ok(`/finance/reconciliation?${window()}`), rec);
  const v = await ok('/verify', {});
  assert.equal([v.ok, v.lotProblems], [true, []]);
  // The CLI's reconciliation: every line's difference zero.
  const { stdout } = await promisify(execFile)(process.execPath, ['bin/tollgate.js', 'finance', 'reconcile', '--from', today(), '--to', today()], {
    env: { ...process.env, TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN },
  });
  assert.ok(stdout.includes(`${accountId}\tpayments-refunds=4450\t`), stdout);
  assert.is(
    stdout
      .trim()
      .split('\n')
      .filter((l) => !l.includes('\tdifference=0')).length,
    0,
    stdout,
  );
  if (process.env.FINANCE_EXAMPLE)
    writeFileSync(
      process.env.FINANCE_EXAMPLE,
      JSON.stringify(
        { used: usedFirstPeriod, report: before, rec, lots: await lotsOf(), journal: (await admin(`/finance/journal?${window()}`)).text },
        null,
        1,
      ),
    );
});

test('the invariant checks catch a lot that does not sum and a journal that does not balance', () => {
  const lot: Lot = {
    lotId: 'l1',
    accountId,
    source: 'payment',
    paymentId: 'p',
    pool: 'extra',
    currency: 'USD',
    tokens: 300,
    paid: 300,
    carriedIn: 0,
    used: 100,
    withdrawn: 0,
    rate: { amount: 300, per: 300 },
    valueUsed: 100,
    recognised: 100,
    breakage: 0,
    refunded: 0,
    carriedOut: 0,
    deferred: 200,
    grantedAt: '2026-11-25T00:00:00.000Z',
    expiresAt: null,
    ended: false,
  };
  assertLot(lot);
  assert.throws(() => assertLot({ ...lot, deferred: 199 }), /lot l1: recognised 100 \+ breakage 0/);
  const entry: JournalEntry = {
    date: '2026-11-25',
    memo: 'use',
    currency: 'USD',
    eventIds: ['e1'],
    postings: [
      { account: 'liabilities:deferred-revenue', debit: 5, credit: 0 },
      { account: 'revenue:recognised', debit: 0, credit: 5 },
    ],
  };
  assertBalanced([entry]);
  assert.throws(
    () => assertBalanced([entry, { ...entry, eventIds: ['e2'], postings: [entry.postings[0], { ...entry.postings[1], credit: 4 }] }]),
    /e2 .*debits 5 != credits 4/,
  );
});

test.run();
