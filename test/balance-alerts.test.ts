// Balance alerts (issue 43, item 5): the customer sets thresholds of tokens left with their key; the
// charge that takes the tokens left below one raises one alert (100 calls at once, over two
// gateways on PostgreSQL: exactly one per threshold), mailed once to the account's owners and
// billing members (not its developers) and sent to webhooks as balance.alert. Back above a
// threshold, the next crossing alerts again. A failed auto top-up is mailed the same way. Bad
// input is refused naming the field, and writes nothing.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { customerSettingsFromEnv } from '../src/config.ts';
import { streams } from '../src/ledger/events.ts';
import { initialAccountState } from '../src/accounts/account-state.ts';
import { alertsOnCharge, decideBalanceAlerts, evolveBalanceAlerts, requireAlertThresholds } from '../src/accounts/balance-alerts.ts';
import { NOTIFICATION_KINDS } from '../src/webhooks/kinds.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { saveCard, startStripeDouble, startStripeShop, type StripeDouble } from './support/stripe-double.ts';
import { signInByLink } from './support/sessions.ts';
import type { TestGateway } from './support/gateway.ts';
import { call, chat, eventually, userMessage } from './support/http.ts';

const ADMIN = 'tg_admin_balance_alerts_test_token_0123456789';
const accountId = 'acct_alerts';
const OWNER = 'owner@alerts.test';
const BILLING = 'books@alerts.test';
const DEVELOPER = 'dev@alerts.test';

const rules = suite('balance alerts: the crossing rule');

rules('a charge raises an alert for each threshold it takes the tokens left across, and none for one already below', () => {
  const s = { ...initialAccountState(), opened: true, accountId: 'a', extraGranted: 1000, balanceAlerts: [800, 500, 100] };
  const at = new Date();
  assert.equal(alertsOnCharge(s, 200, 'h1', at), [], 'at 800 exactly: not below');
  const crossed = alertsOnCharge(s, 550, 'h2', at);
  assert.equal(
    crossed.map((e) => e.data),
    [
      { accountId: 'a', alertId: 'alert_800_h2', thresholdTokens: 800, tokensLeft: 450, chargeHoldId: 'h2' },
      { accountId: 'a', alertId: 'alert_500_h2', thresholdTokens: 500, tokensLeft: 450, chargeHoldId: 'h2' },
    ],
  );
  const below = { ...s, extraUsed: 550 };
  assert.equal(
    alertsOnCharge(below, 10, 'h3', at).map((e) => e.data.thresholdTokens),
    [],
    '450 left: 800 and 500 were crossed already',
  );
  assert.equal(
    alertsOnCharge(below, 400, 'h4', at).map((e) => e.data.thresholdTokens),
    [100],
  );
  assert.equal(alertsOnCharge({ ...s, balanceAlerts: [] }, 999, 'h5', at), [], 'no thresholds: no alert');
  // Back above (a grant): the next crossing alerts again.
  assert.equal(
    alertsOnCharge({ ...below, extraGranted: 2000 }, 800, 'h6', at).map((e) => e.data.thresholdTokens),
    [800],
  );
});

rules('a notice is claimed by one mailer until the claim lapses, and recorded as mailed once', () => {
  let s = evolveBalanceAlerts(
    { ...initialAccountState(), opened: true, accountId: 'a' },
    alertsOnCharge({ ...initialAccountState(), accountId: 'a', extraGranted: 10, balanceAlerts: [5] }, 9, 'h', null)[0],
  );
  const now = new Date('2026-11-30T10:00:00Z');
  const claimed = decideBalanceAlerts({ type: 'ClaimNotice', noticeId: 'alert_5_h', by: 'gw-a', now }, s);
  assert.is(claimed.length, 1);
  s = evolveBalanceAlerts(s, claimed[0]);
  assert.equal(decideBalanceAlerts({ type: 'ClaimNotice', noticeId: 'alert_5_h', by: 'gw-b', now }, s), [], 'held by another');
  assert.is(decideBalanceAlerts({ type: 'ClaimNotice', noticeId: 'alert_5_h', by: 'gw-a', now }, s).length, 1, 'its own mailer renews it');
  const later = new Date(now.getTime() + 6 * 60_000);
  assert.is(decideBalanceAlerts({ type: 'ClaimNotice', noticeId: 'alert_5_h', by: 'gw-b', now: later }, s).length, 1, 'lapsed: another takes it');
  const mailed = decideBalanceAlerts({ type: 'RecordNoticeEmailed', noticeId: 'alert_5_h', recipients: 2 }, s);
  assert.is(mailed.length, 1);
  s = evolveBalanceAlerts(s, mailed[0]);
  assert.equal(decideBalanceAlerts({ type: 'RecordNoticeEmailed', noticeId: 'alert_5_h', recipients: 2 }, s), [], 'mailed once');
  assert.equal(decideBalanceAlerts({ type: 'ClaimNotice', noticeId: 'alert_5_h', by: 'gw-b', now: later }, s), []);
});

rules('thresholds: whole numbers of tokens, at least 1, distinct, at most five; kept highest first', () => {
  assert.equal(requireAlertThresholds([100, 5000, 20]), [5000, 100, 20]);
  assert.equal(requireAlertThresholds([]), []);
  for (const bad of [null, 5, [0], [-1], [1.5], ['10'], [10, 10], [1, 2, 3, 4, 5, 6]]) assert.throws(() => requireAlertThresholds(bad), /thresholds_tokens/);
});

rules('a webhook gets balance.alert with the alert and the balance after it', () => {
  const kind = NOTIFICATION_KINDS.find((k) => k.type === 'balance.alert')!;
  const s = { ...initialAccountState(), opened: true, accountId: 'a', extraGranted: 1000, balanceAlerts: [500] };
  const event = alertsOnCharge(s, 600, 'h1', null)[0];
  const after = { ...s, extraUsed: 600 };
  const notices = kind.onEvent!(
    { before: s, logged: { id: 'ev1', timestamp: '2026-11-30T10:00:00.000Z', event }, after },
    { thresholds: [], expiringDays: 7, registeredAt: '' },
  );
  assert.is(notices.length, 1);
  assert.equal(
    [notices[0].type, notices[0].data.alert_id, notices[0].data.threshold_tokens, notices[0].data.tokens_left],
    ['balance.alert', 'alert_500_h1', 500, 400],
  );
});

rules.run();

const test = suite('balance alerts');
let stripe: StripeDouble;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let gw: TestGateway;
let gw2: TestGateway | null;
let stopAll: () => Promise<void>;
let key: string;

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { key: ADMIN, body, method: method ?? (body === undefined ? 'GET' : 'POST') });
const alerts = (g: TestGateway, method: string, body?: unknown) => call(g, '/v1/balance-alerts', { key, body, method });
const accountEvents = async (type: string) => (await gw.ledger.events.readStream(streams.account(accountId))).filter((e) => e.type === type);
const oneCall = (g: TestGateway) => chat(g, key, { model: 'cx/gen-6-luna', messages: userMessage('Toll roads?'), max_tokens: 20 });
const mailsAbout = (text: string) => smtp.mails.filter((m) => m.subject.includes(text));

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const v = await eventually(read, ok, 20_000);
  if (!ok(v)) assert.unreachable(`${what}: ${JSON.stringify(v)}`);
  return v;
}

/** Calls, 100 at a time over both gateways, until the tokens left are below `below`. */
async function spendBelow(below: number) {
  for (let calls = 0; (await alerts(gw, 'GET')).json.tokens_left >= below; calls += 100) {
    if (calls >= 1000) assert.unreachable(`1,000 calls did not take the tokens left below ${below}`);
    const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => oneCall(i % 2 && gw2 ? gw2 : gw)));
    assert.equal(
      replies.filter((r) => r.status !== 200).map((r) => r.text),
      [],
    );
  }
}

test.before(async () => {
  stripe = await startStripeDouble();
  smtp = await startSmtpServer();
  ({ gw, gw2, stopAll, key } = await startStripeShop(
    stripe,
    ADMIN,
    { id: accountId, name: 'Alerted customer' },
    { customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url } },
  ));
  assert.is((await admin('/packs/p20k', { name: '20,000 tokens', tokens: 20_000, amount: 2000 }, 'PUT')).status, 200);
  assert.is((await admin(`/accounts/${accountId}/payments`, { reference: 'WIRE-0', amount: 2000, currency: 'USD', plan_id: 'pro' })).status, 201);
  assert.is((await admin(`/accounts/${accountId}/payments`, { reference: 'WIRE-1', amount: 2000, currency: 'USD', pack_id: 'p20k' })).status, 201);
  for (const [email, role] of [
    [OWNER, 'owner'],
    [BILLING, 'billing'],
    [DEVELOPER, 'developer'],
  ])
    assert.is((await admin(`/accounts/${accountId}/members`, { email, role })).status, 201);
  // Each joins by signing in once (an invitation alone is not mailed notices).
  for (const email of [OWNER, BILLING, DEVELOPER]) await signInByLink(gw, smtp, email);
});
test.after(async () => {
  await stopAll();
  await smtp.close();
});

test('bad input is refused naming the field, and writes nothing', async () => {
  const before = (await gw.ledger.events.readStream(streams.account(accountId))).length;
  for (const body of [
    {},
    { thresholds_tokens: 100 },
    { thresholds_tokens: [-5] },
    { thresholds_tokens: [0] },
    { thresholds_tokens: [1.5] },
    { thresholds_tokens: ['100'] },
    { thresholds_tokens: [100, 100] },
    { thresholds_tokens: [1, 2, 3, 4, 5, 6] },
  ]) {
    const r = await alerts(gw, 'PUT', body);
    assert.is(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.is(r.json.error.param, 'thresholds_tokens', JSON.stringify(body));
    assert.is(r.json.error.type, 'invalid_request_error');
  }
  const notJson = await call(gw, '/v1/balance-alerts', { key, method: 'PUT', raw: '[1,2]', headers: { 'content-type': 'application/json' } });
  assert.is(notJson.status, 400, notJson.text);
  assert.is((await gw.ledger.events.readStream(streams.account(accountId))).length, before);
});

test('100 calls at once over two gateways cross two thresholds: one alert each, mailed once to the owner and the billing member, listed with the key', async () => {
  const left = (await alerts(gw, 'GET')).json.tokens_left as number;
  assert.is(left, 21_000);
  const set = await alerts(gw2 ?? gw, 'PUT', { thresholds_tokens: [left - 400, left - 200] });
  assert.is(set.status, 200, set.text);
  assert.equal(set.json.thresholds_tokens, [left - 200, left - 400]);
  assert.is((await alerts(gw, 'PUT', { thresholds_tokens: [left - 400, left - 200] })).status, 200);
  assert.is((await accountEvents('BalanceAlertsSet')).length, 1, 'the same thresholds again change nothing');

  await spendBelow(left - 400);
  const crossed = await accountEvents('BalanceAlertCrossed');
  assert.equal(
    crossed.map((e) => e.data.thresholdTokens),
    [left - 200, left - 400],
    'one alert per threshold, in the order crossed',
  );
  const mailed = await until(
    'both alerts mailed',
    () => accountEvents('NoticeEmailed'),
    (e) => e.length === 2,
  );
  assert.equal(mailed.map((e) => e.data.recipients).sort(), [2, 2]);
  for (const e of crossed) {
    const threshold = (e.data.thresholdTokens as number).toLocaleString('en-US');
    const mails = mailsAbout(`fewer than ${threshold} tokens left`);
    assert.is(mails.length, 1, `one mail for the alert at ${threshold}`);
    assert.ok(mails[0].to.includes(OWNER) && mails[0].to.includes(BILLING), mails[0].to);
    assert.not.ok(mails[0].to.includes(DEVELOPER), 'a developer sees no billing');
    assert.match(mails[0].text, new RegExp(`has ${(e.data.tokensLeft as number).toLocaleString('en-US')} tokens left`));
    assert.match(mails[0].text, /\/app\/billing/);
  }
  // The sweeps of both gateways (every 5 s) find nothing more to mail.
  await new Promise((r) => setTimeout(r, 6_000));
  assert.is((await accountEvents('NoticeEmailed')).length, 2);
  assert.is((await accountEvents('NoticeClaimed')).length, 2, 'each claimed once');

  const listed = await until(
    'the alerts listed as mailed',
    async () => (await alerts(gw2 ?? gw, 'GET')).json,
    (j) => j.alerts.length === 2 && j.alerts.every((a: { emailed_at: string | null }) => a.emailed_at !== null),
  );
  assert.equal(
    listed.alerts.map((a: { threshold_tokens: number; recipients: number }) => [a.threshold_tokens, a.recipients]).sort(),
    [
      [left - 400, 2],
      [left - 200, 2],
    ].sort(),
  );
});

test('back above a threshold (a payment), the next crossing alerts again', async () => {
  const before = (await accountEvents('BalanceAlertCrossed')).length;
  const thresholds = (await alerts(gw, 'GET')).json.thresholds_tokens as number[];
  assert.is((await admin(`/accounts/${accountId}/payments`, { reference: 'WIRE-2', amount: 2000, currency: 'USD', pack_id: 'p20k' })).status, 201);
  const left = (await alerts(gw, 'GET')).json.tokens_left as number;
  assert.ok(left > thresholds[0], `${left} above ${thresholds[0]}`);
  assert.is((await alerts(gw, 'PUT', { thresholds_tokens: [left - 150] })).status, 200);
  await spendBelow(left - 150);
  const crossed = (await accountEvents('BalanceAlertCrossed')).slice(before);
  assert.equal(
    crossed.map((e) => e.data.thresholdTokens),
    [left - 150],
  );
  await until(
    'the new alert mailed',
    async () => mailsAbout(`fewer than ${(left - 150).toLocaleString('en-US')} tokens left`).length,
    (n) => n === 1,
  );
});

test('a failed auto top-up is mailed to the same people, once', async () => {
  await saveCard(gw, stripe, key, { declines: true }, gw2 ?? gw);
  const left = (await alerts(gw, 'GET')).json.tokens_left as number;
  assert.is((await call(gw, '/v1/auto-top-up', { key, method: 'PUT', body: { threshold_tokens: left - 100, pack_id: 'p300' } })).status, 200);
  await spendBelow(left - 100);
  const failed = await until(
    'the top-up failed',
    () => accountEvents('AutoTopUpFailed'),
    (e) => e.length === 1,
  );
  const topUpId = failed[0].data.topUpId as string;
  const mail = await until(
    'the failure mailed',
    async () => mailsAbout('auto top-up'),
    (m) => m.length === 1,
  );
  assert.ok(mail[0].to.includes(OWNER) && mail[0].to.includes(BILLING) && !mail[0].to.includes(DEVELOPER), mail[0].to);
  assert.match(mail[0].text, new RegExp(topUpId));
  assert.match(mail[0].text, /not tried again/);
  await until(
    'the failure recorded as mailed',
    async () => (await accountEvents('NoticeEmailed')).filter((e) => e.data.noticeId === topUpId).length,
    (n) => n === 1,
  );
});

test.run();
