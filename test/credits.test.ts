// Credits with terms (issue 43, item 5): grants of extra tokens with an expiry, a priority and a
// scope of models. First the draw-down rule and the account decider, pure, with exact numbers on a
// clock the commands carry; the lot book booking the decider's splits and an expiry's breakage.
// Then an operator and a customer over real HTTP against `npm start` processes (two on one
// PostgreSQL with DATABASE_URL; one on PGlite), whose clock test/support/test-clock.ts moves:
// bad terms refused naming the field; a scoped pack and an expiring grant drawn in order through
// the official openai client; a hold that only the scoped lot could cover refused for another
// model; a refund withdrawing from the pack's own lot; the clock moved past each expiry, both
// gateways sweeping at once and each lot closed once; the breakage in the lots, the report and the
// journal (hledger agrees); the same figures after a rebuild from zero.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { availableTokens, balanceOf, type AccountState } from '../src/accounts/account-state.ts';
import { drawCredits, drawOrder, grantedLot, requireCreditTerms, type CreditLot } from '../src/accounts/credits.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { emptyLotBook } from '../src/books/lot-book.ts';
import { LotFold } from '../src/books/lot-fold.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import { reserveCommand, runAccount } from './support/account-commands.ts';
import { dropSchemas, spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { call, eventually } from './support/http.ts';
import { hledgerBalances } from './support/hledger.ts';
import { uniqueSchema } from './support/db.ts';

const LUNA = 'cx/gen-6-luna';
const TERRA = 'cx/gen-6-terra';

// ---------------------------------------------------------------- the rule, pure

const rule = suite('credits: the draw-down rule');

const lot = (n: number, tokens: number, terms: Partial<CreditLot> = {}): CreditLot => ({ ...grantedLot(n, tokens), ...terms });

rule('scoped lots first, then priority, then the earliest expiry, then the oldest; expired and closed lots are not drawn', () => {
  const lots = [
    lot(0, 100), // the pool's kind: no terms
    lot(1, 100, { priority: 10 }),
    lot(2, 100, { expiresAt: '2027-03-01T00:00:00.000Z' }),
    lot(3, 100, { expiresAt: '2027-02-01T00:00:00.000Z' }),
    lot(4, 100, { models: [LUNA], priority: 90 }),
    lot(5, 100, { models: [TERRA] }),
    lot(6, 100, { expiresAt: '2027-01-01T00:00:00.000Z' }),
    lot(7, 100, { closed: true }),
  ];
  const jan15 = new Date('2027-01-15T00:00:00Z');
  assert.equal(
    drawOrder(lots, LUNA, jan15).map((i) => lots[i].lot),
    [4, 1, 3, 2, 0],
  );
  assert.equal(
    drawOrder(lots, TERRA, jan15).map((i) => lots[i].lot),
    [5, 1, 3, 2, 0],
  );
  // Without a time (a correction), expiry is not counted; without a model, every scope is.
  assert.equal(
    drawOrder(lots, null, null).map((i) => lots[i].lot),
    [5, 4, 1, 6, 3, 2, 0],
  );
});

rule('a use fills the lots in order; a return goes back in the reverse order; what no lot takes is the rest', () => {
  const lots = [lot(0, 100, { used: 40 }), lot(1, 50, { priority: 1 }), lot(2, 30, { models: [LUNA] })];
  assert.equal(drawCredits(lots, 100, LUNA, null), {
    draws: [
      { lot: 2, tokens: 30 },
      { lot: 1, tokens: 50 },
      { lot: 0, tokens: 20 },
    ],
    rest: 0,
  });
  // Another model's use may not take the scoped lot, until the others are empty.
  assert.equal(drawCredits(lots, 120, TERRA, null), {
    draws: [
      { lot: 1, tokens: 50 },
      { lot: 0, tokens: 60 },
      { lot: 2, tokens: 10 },
    ],
    rest: 0,
  });
  const used = [lot(0, 100, { used: 40 }), lot(1, 50, { priority: 1, used: 50 }), lot(2, 30, { models: [LUNA], used: 30 })];
  assert.equal(drawCredits(used, -75, LUNA, null), {
    draws: [
      { lot: 0, tokens: -40 },
      { lot: 1, tokens: -35 },
    ],
    rest: 0,
  });
  assert.equal(drawCredits([lot(0, 10)], 15, LUNA, null), { draws: [{ lot: 0, tokens: 10 }], rest: 5 });
});

rule('terms as the operator gives them: checked, each refusal naming its field', () => {
  const now = new Date('2026-12-01T00:00:00Z');
  assert.equal(requireCreditTerms({ expires_in_days: 30, priority: 5, models: [LUNA] }, now), {
    expiresAt: '2026-12-31T00:00:00.000Z',
    priority: 5,
    models: [LUNA],
  });
  assert.equal(requireCreditTerms({}, now), {});
  for (const [body, param] of [
    [{ expires_at: '2026-11-30T00:00:00Z' }, 'expires_at'],
    [{ expires_at: 'tomorrow' }, 'expires_at'],
    [{ expires_at: '2027-01-01T00:00:00Z', expires_in_days: 3 }, 'expires_at'],
    [{ expires_in_days: 0 }, 'expires_in_days'],
    [{ expires_in_days: 1.5 }, 'expires_in_days'],
    [{ priority: 0 }, 'priority'],
    [{ priority: 101 }, 'priority'],
    [{ models: [] }, 'models'],
    [{ models: [LUNA, LUNA] }, 'models'],
    [{ models: 'all' }, 'models'],
  ] as const) {
    try {
      requireCreditTerms(body as Record<string, unknown>, now);
      assert.unreachable(JSON.stringify(body));
    } catch (err) {
      assert.instance(err, DomainError, JSON.stringify(body));
      assert.is((err as DomainError).facts.param, param, JSON.stringify(body));
    }
  }
});

rule.run();

// ---------------------------------------------------------------- the account decider, pure

const decider = suite('credits: the account decider');
const t0 = new Date('2026-12-01T12:00:00Z');
const days = (n: number) => new Date(t0.getTime() + n * 86_400_000);

const run = runAccount;
const plan = { planId: 'access', name: 'Access', quota: 0, validityDays: 365, requestsPerMinute: 10_000, models: ['*'] };
const reserve = (holdId: string, amount: number, model: string, now = t0): AccountCommand => reserveCommand(holdId, amount, model, now);
const settle = (holdId: string, promptTokens: number): AccountCommand => ({
  type: 'SettleChat',
  holdId,
  multiplierMilli: 1000,
  promptTokens,
  completionTokens: 0,
  reasoningEffort: null,
  api: 'chat.completions',
  streamed: false,
  aborted: false,
});

/** An account with 300 pool tokens, 500 expiring in 7 days (lot 1), and 1,000 for luna only at priority 10 (lot 2). */
function funded(): AccountState {
  let s = run(accountDecider.initialState(), { type: 'Open', accountId: 'acme', name: 'Acme' }).state;
  s = run(s, { type: 'Subscribe', accountId: 'acme', plan, now: t0 }).state;
  s = run(s, { type: 'GrantExtra', accountId: 'acme', amount: 300, reason: 'pool' }).state;
  s = run(s, { type: 'GrantExtra', accountId: 'acme', amount: 500, reason: 'promo', terms: { expiresAt: days(7).toISOString() } }).state;
  return run(s, { type: 'GrantExtra', accountId: 'acme', amount: 1000, reason: 'luna', terms: { priority: 10, models: [LUNA] } }).state;
}
const usedOf = (s: AccountState) => [s.extraUsed, ...s.credits.map((l) => l.used)];

decider('a hold fits only in what its model may draw; each charge records its lots, the pool taking the rest', () => {
  let s = funded();
  assert.equal([s.extraGranted, s.credits.length, s.extraLots], [300, 2, 3], 'grants without terms stay the pool');
  assert.is(availableTokens(s, t0, LUNA), 1800);
  assert.is(availableTokens(s, t0, TERRA), 800);
  try {
    run(s, reserve('h0', 801, TERRA));
    assert.unreachable('a terra hold past what terra may draw');
  } catch (err) {
    assert.is((err as DomainError).code, 'insufficient_quota');
  }
  s = run(s, reserve('h1', 600, TERRA)).state;
  const terra = run(s, settle('h1', 600));
  assert.equal(terra.events[0].data, { ...terra.events[0].data, fromExtra: 600, credits: [{ lot: 1, tokens: 500 }] }, 'the expiring lot first, then the pool');
  s = terra.state;
  assert.equal(usedOf(s), [100, 500, 0]);
  s = run(s, reserve('h2', 1100, LUNA)).state;
  const luna = run(s, settle('h2', 1100));
  assert.equal((luna.events[0].data as { credits: unknown }).credits, [{ lot: 2, tokens: 1000 }], 'the scoped lot first; the pool is implied');
  assert.equal(usedOf(luna.state), [200, 500, 1000]);
  assert.equal(balanceOf(luna.state).extraUsed, 200);
});

decider('a lot expires at its expiry on the clock the sweep carries: not before, not while a hold let in before it is open, once', () => {
  let s = funded();
  s = run(s, reserve('h1', 200, TERRA)).state;
  s = run(s, settle('h1', 200)).state;
  assert.equal(run(s, { type: 'ExpireCredits', now: days(6.9) }).events, [], 'not yet');
  assert.is(availableTokens(s, days(7), TERRA), 300, 'at its expiry, the lot no longer counts for a new hold');
  // A hold let in before the expiry may still be charged to the lot: the lot waits for it.
  s = run(s, reserve('h2', 100, TERRA, days(6.99))).state;
  assert.equal(run(s, { type: 'ExpireCredits', now: days(7) }).events, []);
  s = run(s, settle('h2', 100)).state;
  assert.equal(usedOf(s), [0, 300, 0], 'charged to the lot after its expiry');
  const expired = run(s, { type: 'ExpireCredits', now: days(7) });
  assert.equal(
    expired.events.map((e) => e.data),
    [{ accountId: 'acme', lot: 1, tokens: 200, expiresAt: days(7).toISOString() }],
  );
  assert.equal(run(expired.state, { type: 'ExpireCredits', now: days(8) }).events, [], 'closed once');
  assert.equal(expired.state.credits[0], { ...expired.state.credits[0], tokens: 300, used: 300, expired: 200, closed: true });
  assert.is(availableTokens(expired.state, days(8), TERRA), 300);
});

decider("a pack's refund withdraws from its own lot; a correction gives tokens back to the lots in the reverse order", () => {
  let s = funded();
  s = run(s, reserve('h1', 700, LUNA)).state;
  const charged = run(s, settle('h1', 700));
  s = charged.state;
  assert.equal(usedOf(s), [0, 0, 700]);
  const refund = run(s, {
    type: 'Adjust',
    correctionId: 'c1',
    chargeEventId: 'ev1',
    requestId: 'r-h1',
    model: LUNA,
    chargedAt: t0.toISOString(),
    billedBefore: 700,
    billedCorrected: 400,
    multiplierMilliBefore: 1000,
    multiplierMilliCorrected: 1000,
    fromQuotaBefore: 0,
    adjustmentsSeen: 0,
    lastAdjustment: '',
  } as AccountCommand);
  const adjusted = refund.events[0].data as { extraDelta: number; credits?: unknown };
  assert.equal([adjusted.extraDelta, adjusted.credits], [-300, [{ lot: 2, tokens: -300 }]]);
  assert.equal(usedOf(refund.state), [0, 0, 400]);
});

decider.run();

// ---------------------------------------------------------------- the lot book, pure

const books = suite('credits: the lot book');

books("the lot book books the decider's split on each lot, and a lot's expiry books its unused value as breakage", () => {
  const book = emptyLotBook();
  const lots = new LotFold(book, '9999-12-31T00:00:00.000Z');
  let position = 0;
  const at = (d: Date) => d.toISOString();
  const fold = (type: string, data: Record<string, unknown>, when = t0) =>
    lots.add({ id: `e${++position}`, position, stream: 'account-acme', type, data, timestamp: at(when), metadata: {} } as unknown as ProjectedEvent);
  fold('PaymentReceived', {
    accountId: 'acme',
    paymentId: 'pay1',
    processor: 'manual',
    processorPaymentId: 'W1',
    amount: 1000,
    currency: 'USD',
    fee: 0,
    item: { kind: 'pack', packId: 'p', tokens: 1000 },
    receivedAt: at(t0),
  });
  fold('ExtraTokensGranted', { accountId: 'acme', amount: 1000, reason: 'pack p', paymentId: 'pay1', expiresAt: at(days(30)), models: [LUNA] });
  fold('ChatCharged', { accountId: 'acme', model: LUNA, holdId: 'h', fromQuota: 0, fromExtra: 333, billed: 333, credits: [{ lot: 0, tokens: 333 }] });
  const [l] = [...book.lots.values()];
  assert.equal([l.used, l.recognised, l.deferred], [333, 333, 667]);
  fold('CreditsExpired', { accountId: 'acme', lot: 0, tokens: 667, expiresAt: at(days(30)) }, days(30));
  assert.equal([l.ended, l.breakage, l.deferred, l.recognised], [true, 667, 0, 333]);
  const breakage = book.bookings.filter((b) => b.kind === 'breakage');
  assert.equal(
    breakage.map((b) => [b.amount, b.at]),
    [[667, at(days(30))]],
  );
});

books.run();

// ---------------------------------------------------------------- over HTTP, on a moved clock

const http = suite('credits: an operator and a customer over HTTP');
const ADMIN = 'tg_admin_credits_with_terms_0123456789abcd';
const CLOCK_MODULE = fileURLToPath(new URL('./support/test-clock.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tollgate-credits-'));
const clockFile = join(dir, 'clock');
const ACCOUNT = 'acct_credits';
const shared = process.env.DATABASE_URL ? uniqueSchema('cr') : '';
const gateways: GatewayProcess[] = [];
let origins: Array<{ url: string }> = [];
let key = '';
let packPayment = '';
/** Where the test's clock is, ahead of the real time (a gateway's clock may run ahead of the database's, never behind). */
let clock = Date.now() + 86_400_000;
const started = clock;
/** The report's window: from the real day before the test to a day past its last clock. */
const window = () =>
  `from=${new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)}&to=${new Date(started + 40 * 86_400_000).toISOString().slice(0, 10)}`;

async function setClock(at: number) {
  clock = at;
  writeFileSync(`${clockFile}.next`, String(at - Date.now()));
  renameSync(`${clockFile}.next`, clockFile);
  await new Promise((r) => setTimeout(r, 100));
}
const admin = (path: string, body?: unknown, method?: string, gw = origins[0]) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });
async function ok(reply: Promise<{ status: number; text: string; json: any }>, status = 200) {
  const r = await reply;
  assert.is(r.status, status, r.text);
  return r.json;
}
const subscription = async (gw = origins[0]) =>
  (
    await eventually(
      () => call(gw, '/v1/subscription', { key }),
      (r) => r.status !== 503,
      20_000,
    )
  ).json;
async function events(type: string): Promise<Array<{ data: any }>> {
  const r = await admin('/events');
  return r.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.type === type && e.stream === `account-${ACCOUNT}`);
}
/** Chat calls on both gateways in turn through the official client: their billed tokens. */
async function chatBilled(model: string, calls: number): Promise<number> {
  let billed = 0;
  for (let i = 0; i < calls; i++) {
    const client = new OpenAI({ apiKey: key, baseURL: `${origins[i % origins.length].url}/v1`, maxRetries: 0 });
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Which road has no toll?' }], max_tokens: 20 });
    billed += (r.usage as unknown as { billed_tokens: number }).billed_tokens;
  }
  return billed;
}

http.before(async () => {
  await setClock(clock);
  const env = { TOLLGATE_BOOTSTRAP: 'off', TOLLGATE_ADMIN_TOKEN: ADMIN, TEST_CLOCK_FILE: clockFile, TOLLGATE_SWEEP_INTERVAL_MS: '3600000' };
  // Two gateways on one PostgreSQL schema; on PGlite (a database of one process) one.
  for (let i = 0; i < (shared ? 2 : 1); i++)
    gateways.push(await spawnGateway(shared ? { ...env, TOLLGATE_SCHEMA: shared } : env, { nodeArgs: ['--import', CLOCK_MODULE] }));
  origins = gateways.map((g) => ({ url: g.baseUrl.replace(/\/v1$/, '') }));
  await ok(admin('/plans', { plan_id: 'access', name: 'Access', quota: 0, validity_days: 365, requests_per_minute: 10_000, models: ['*'] }), 201);
  await ok(admin('/accounts', { account_id: ACCOUNT, name: 'Credits' }), 201);
  await ok(admin(`/accounts/${ACCOUNT}/subscription`, { plan_id: 'access' }));
  key = (await ok(admin(`/accounts/${ACCOUNT}/keys`, { name: 'app' }), 201)).key;
});
http.after(async () => {
  for (const g of gateways) await g.stop();
  if (shared) await dropSchemas(process.env.DATABASE_URL!, shared);
  rmSync(dir, { recursive: true, force: true });
});

http('bad terms on a grant or a pack are refused with a 400 naming the field, and write nothing', async () => {
  const before = (await admin('/events')).text.length;
  for (const [body, param] of [
    [{ amount: 100, expires_at: new Date(clock - 60_000).toISOString() }, 'expires_at'],
    [{ amount: 100, expires_at: 'next week' }, 'expires_at'],
    [{ amount: 100, expires_in_days: 0 }, 'expires_in_days'],
    [{ amount: 100, priority: 0 }, 'priority'],
    [{ amount: 100, models: [] }, 'models'],
    [{ amount: 0, expires_in_days: 3 }, 'amount'],
  ] as const) {
    const r = await admin(`/accounts/${ACCOUNT}/extra-tokens`, body);
    assert.is(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.is(r.json.error.param, param, r.text);
  }
  const pack = await admin('/packs/bad', { name: 'Bad', tokens: 100, amount: 100, priority: 101 }, 'PUT');
  assert.equal([pack.status, pack.json.error?.param], [400, 'priority'], pack.text);
  assert.is((await admin('/events')).text.length, before, 'nothing written');
});

http('a scoped pack and an expiring grant are drawn in order, on either gateway, and the customer sees their dates', async () => {
  await ok(admin('/packs/luna1k', { name: '1,000 luna tokens', tokens: 1000, amount: 1000, expires_in_days: 30, priority: 10, models: [LUNA] }, 'PUT'));
  packPayment = (await ok(admin(`/accounts/${ACCOUNT}/payments`, { reference: 'WIRE-1', amount: 1000, currency: 'USD', pack_id: 'luna1k' }), 201)).id;
  const grant = await ok(admin(`/accounts/${ACCOUNT}/extra-tokens`, { amount: 500, reason: 'welcome', expires_in_days: 7 }));
  assert.equal([grant.granted, grant.priority, grant.models], [500, 50, null]);
  assert.ok(Math.abs(Date.parse(grant.expires_at) - (clock + 7 * 86_400_000)) < 60_000, grant.expires_at);
  await ok(admin(`/accounts/${ACCOUNT}/extra-tokens`, { amount: 300, reason: 'goodwill' }));
  let sub = await subscription();
  assert.is(sub.remaining_tokens, 1800);
  assert.equal(
    sub.extra_tokens.credits.map((c: any) => [c.granted, c.remaining, c.priority, c.models, c.status]),
    [
      [1000, 1000, 10, [LUNA], 'active'],
      [500, 500, 50, null, 'active'],
    ],
  );
  // 30 days from the payment, 7 from the grant (a few milliseconds apart).
  const apart = Date.parse(sub.extra_tokens.credits[0].expires_at) - Date.parse(sub.extra_tokens.credits[1].expires_at) - 23 * 86_400_000;
  assert.ok(Math.abs(apart) < 60_000, `${apart} ms`);
  const terra = await chatBilled(TERRA, 4);
  const luna = await chatBilled(LUNA, 4);
  sub = await subscription(origins[origins.length - 1]);
  assert.equal(
    sub.extra_tokens.credits.map((c: any) => c.used),
    [luna, terra],
    'luna from its own lot; terra from the expiring grant, before the pool',
  );
  assert.is(sub.remaining_tokens, 1800 - luna - terra);
  // A hold that only the luna lot could cover: refused for terra, let in for luna.
  const big = { messages: [{ role: 'user', content: 'Tell me everything.' }], max_tokens: 1000 };
  const refused = await call(origins[0], '/v1/chat/completions', { key, body: { ...big, model: TERRA } });
  assert.is(refused.status, 402, refused.text);
  const let_in = await call(origins[0], '/v1/chat/completions', { key, body: { ...big, model: LUNA, max_tokens: 700 } });
  assert.is(let_in.status, 200, let_in.text);
});

http("a refund withdraws from the pack's own lot", async () => {
  const before = (await subscription()).extra_tokens.credits[0];
  const refund = await ok(admin(`/accounts/${ACCOUNT}/payments/${packPayment}/refunds`, { amount: 100, refund_id: 'R-1' }), 201);
  assert.equal([refund.pool, refund.tokensWithdrawn], ['extra', 100]);
  const after = (await subscription()).extra_tokens.credits[0];
  assert.equal([after.granted, after.used, after.remaining], [before.granted - 100, before.used, before.remaining - 100]);
});

http(
  'past each expiry, both gateways sweep at once: each lot is closed once, and its unused value is breakage in the lots, the report and the journal',
  async () => {
    const lotsBefore = (await subscription()).extra_tokens.credits;
    await setClock(clock + 8 * 86_400_000);
    const sweeps = await Promise.all(origins.flatMap((gw) => [admin('/sweep', {}, 'POST', gw), admin('/sweep', {}, 'POST', gw)]));
    assert.is(
      sweeps.reduce((n, r) => n + (r.json?.credits_expired ?? 0), 0),
      1,
      sweeps.map((r) => r.text).join(' '),
    );
    let sub = await subscription();
    assert.equal(
      sub.extra_tokens.credits.map((c: any) => [c.status, c.remaining, c.granted]),
      [
        ['active', lotsBefore[0].remaining, lotsBefore[0].granted],
        ['expired', 0, lotsBefore[1].granted],
      ],
    );
    await setClock(clock + 23 * 86_400_000);
    assert.is((await ok(admin('/sweep', {}, 'POST'))).credits_expired, 1);
    sub = await subscription();
    assert.equal(
      sub.extra_tokens.credits.map((c: any) => c.status),
      ['expired', 'expired'],
    );
    assert.is(sub.remaining_tokens, 300 - (sub.extra_tokens.used - lotsBefore[0].used - lotsBefore[1].used), `only the pool is left: ${JSON.stringify(sub)}`);
    const expired = await events('CreditsExpired');
    assert.equal(
      expired.map((e) => [e.data.lot, e.data.tokens]),
      [
        [1, lotsBefore[1].remaining],
        [0, lotsBefore[0].remaining],
      ],
    );
    // The pack's lot: 1,000 tokens for 10.00, 100 of them refunded with 1.00; its unused tokens' value is breakage.
    const lots = (await ok(admin(`/finance/lots?${window()}`))).data;
    const packLot = lots.find((l: any) => l.paymentId === packPayment);
    assert.equal([packLot.ended, packLot.breakage, packLot.deferred], [true, lotsBefore[0].remaining, 0]);
    const report = await ok(admin(`/finance/report?${window()}`));
    assert.is(report.totals.breakage, lotsBefore[0].remaining);
    const journal = (await admin(`/finance/journal?${window()}`)).text;
    const balances = await hledgerBalances(journal, 'credits');
    if (balances) assert.is(balances['revenue:breakage'], -lotsBefore[0].remaining, JSON.stringify(balances));
    const reconciliation = await ok(admin(`/finance/reconciliation?${window()}`));
    const line = reconciliation.lines.find((l: any) => l.account_id === ACCOUNT);
    assert.equal([line.breakage, line.difference, reconciliation.total.difference], [lotsBefore[0].remaining, 0, 0], JSON.stringify(line));
  },
);

http('after a rebuild from zero every lot and the report are the same; verify finds nothing wrong', async () => {
  const lots = (await ok(admin(`/finance/lots?${window()}`))).data;
  const report = (await ok(admin(`/finance/report?${window()}`))).totals;
  const rebuild = await admin('/rebuild', {});
  assert.ok(rebuild.text.includes('"type":"done"'), rebuild.text);
  assert.equal((await ok(admin(`/finance/lots?${window()}`))).data, lots);
  assert.equal((await ok(admin(`/finance/report?${window()}`))).totals, report);
  const verify = await ok(admin('/verify', {}));
  assert.ok(verify.ok !== false, JSON.stringify(verify));
});

http.run();
