// The month close as an operator does it, over real HTTP against a gateway started as a separate
// process, whose clock test/support/test-clock.ts moves (events are dated by the process's clock).
// The months are in 2099, ahead of the real time: a gateway's clock may run ahead of PostgreSQL's
// but not behind it, where the database refuses every charge as past its deadline (the deadline
// is compared on the database's clock, docs/deployment.md).
// October: a plan paid by hand, chat calls through the official openai client, a cost rate,
// and an upstream bill for one day that differs from Tollgate's cost (another day's calls not
// billed yet). On 3 November: the close refused without a reason (nothing written), then closed
// with one (the override recorded); a second close, months not over, malformed months and a reopen
// without a reason refused, the periods unchanged. October's report, journal and reconciliation
// saved as text; then in November a refund of the October payment, a correction of the October
// calls, a second bill for October, a cost rate reaching into October refused and one from
// November accepted: October's reads are byte for byte the same, November's show the refund and
// the correction. Reopened with a reason: the periods and October's report show it; the CLI lists
// it. On PGlite, and on PostgreSQL with DATABASE_URL (spawnGateway takes it from the environment).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { call } from './support/http.ts';

const ADMIN = 'tg_admin_period_close_test_0123456789abcdef';
const MODEL = 'cx/gen-6-luna';
const ACCOUNT = 'acct_close';
const CLOCK_MODULE = fileURLToPath(new URL('./support/test-clock.ts', import.meta.url));
const OCTOBER = 'from=2099-10-01&to=2099-10-31';
const NOVEMBER = 'from=2099-11-01&to=2099-11-30';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const dir = mkdtempSync(join(tmpdir(), 'tollgate-period-close-'));
const clockFile = join(dir, 'clock');
/** Moves the clock of the processes reading `file` to `at`: written whole (renamed into place), then seen within 20 ms. */
async function moveClock(file: string, at: string): Promise<void> {
  writeFileSync(`${file}.next`, String(Date.parse(at) - Date.now()));
  renameSync(`${file}.next`, file);
  await sleep(100);
}
const setClock = (at: string) => moveClock(clockFile, at);

let gw: GatewayProcess;
let origin: { url: string };
let key: string;
let channel: string;
let paymentId: string;
/** Tollgate's upstream cost of the October calls (minor units). */
let octoberCost = 0;

const admin = (path: string, body?: unknown, method?: string) =>
  call(origin, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': 'controller' } });
async function ok(path: string, body?: unknown, method?: string) {
  const r = await admin(path, body, method);
  assert.ok(r.status < 300, `${path}: ${r.status} ${r.text}`);
  return r.json;
}
/** A refusal: its status and error param. */
async function refused(path: string, body: unknown, status: number, param: string) {
  const r = await admin(path, body, 'POST');
  assert.is(r.status, status, `${path} ${JSON.stringify(body)}: ${r.text}`);
  assert.is(r.json.error.param, param, r.text);
  return r.json.error;
}

test.before(async () => {
  await setClock('2099-10-20T09:00:00Z');
  gw = await spawnGateway({ TOLLGATE_BOOTSTRAP: 'off', TOLLGATE_ADMIN_TOKEN: ADMIN, TEST_CLOCK_FILE: clockFile }, { nodeArgs: ['--import', CLOCK_MODULE] });
  origin = { url: gw.baseUrl.replace(/\/v1$/, '') };
});
test.after(async () => {
  await gw?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('the clock module moves new Date() and Date.now() by the offset in the file, and leaves Date with arguments alone', async () => {
  const file = join(dir, 'probe-clock');
  await moveClock(file, '2030-01-15T12:00:00Z');
  // A process that answers each line on its stdin with its idea of the time.
  const probe = `process.stdin.on('data', () => console.log(JSON.stringify({
    date: new Date().toISOString(), now: Date.now(), text: Date(), isDate: new Date() instanceof Date,
    given: new Date(0).toISOString(), parsed: new Date('2020-02-29T10:00:00Z').toISOString(), parts: new Date(2021, 5, 1).getFullYear(),
    utc: Date.UTC(2020, 0, 1), parse: Date.parse('2020-01-01T00:00:00Z') })));`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', CLOCK_MODULE, '--input-type=module', '-e', probe], {
    env: { ...process.env, TEST_CLOCK_FILE: file, TZ: 'UTC' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buffered = '';
  child.stdout!.on('data', (d) => {
    buffered += d;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    lines.push(...parts);
  });
  const ask = async () => {
    const n = lines.length;
    child.stdin!.write('\n');
    for (let i = 0; i < 2400 && lines.length === n; i++) await sleep(25);
    assert.ok(lines.length > n, 'the probe answered');
    return JSON.parse(lines[n]);
  };
  try {
    const near = (iso: string, target: string) => Math.abs(Date.parse(iso) - Date.parse(target)) < 60_000;
    const first = await ask();
    assert.ok(near(first.date, '2030-01-15T12:00:00Z'), first.date);
    assert.ok(Math.abs(first.now - Date.parse(first.date)) < 1000);
    assert.match(first.text, /^Tue Jan 15 2030 /);
    assert.is(first.isDate, true);
    assert.equal(
      [first.given, first.parsed, first.parts, first.utc, first.parse],
      ['1970-01-01T00:00:00.000Z', '2020-02-29T10:00:00.000Z', 2021, 1577836800000, 1577836800000],
    );
    // Moved back while it runs: seen after the module's next look at the file.
    await moveClock(file, '2026-10-20T09:00:00Z');
    const second = await ask();
    assert.ok(near(second.date, '2026-10-20T09:00:00Z'), second.date);
    assert.is(second.given, '1970-01-01T00:00:00.000Z');
  } finally {
    child.kill();
  }
});

test('October: a plan paid by hand, calls through the openai client, a cost rate, a bill that differs', async () => {
  await ok('/plans', { plan_id: 'pro', name: 'Pro', quota: 1000, validity_days: 30, requests_per_minute: 1000, models: ['*'] });
  await ok('/plans/pro/price', { amount: 2000 }, 'PUT');
  await ok('/accounts', { account_id: ACCOUNT, name: 'Closing customer' });
  key = (await ok(`/accounts/${ACCOUNT}/keys`, { name: 'app' })).key;
  const paid = await ok(`/accounts/${ACCOUNT}/payments`, { reference: 'INV-OCT-1', amount: 2000, currency: 'USD', fee: 0, plan_id: 'pro' });
  paymentId = paid.id;
  channel = (await ok('/channels')).data.find((c: { models: string[] }) => c.models.includes(MODEL)).id;
  const rate = await ok('/cost-rates', { channel, effective_at: '2099-10-01T00:00:00Z', input: '1000', output: '2000' });
  assert.is(rate.effective_at, '2099-10-01T00:00:00.000Z');

  const client = new OpenAI({ apiKey: key, baseURL: gw.baseUrl, maxRetries: 0 });
  for (const q of ['What is a toll plaza?', 'Who collects a bridge toll?', 'How do toll tags work?']) {
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: q }], max_tokens: 60 });
    assert.ok(r.usage!.total_tokens > 0);
  }
  await setClock('2099-10-21T15:00:00Z');
  await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Is a ferry a toll?' }], max_tokens: 60 });

  const costs = (await ok(`/upstream-costs?${OCTOBER}`)).data as Array<{ day: string; cost_minor: string; calls: number }>;
  octoberCost = costs.reduce((sum, c) => sum + Number(c.cost_minor), 0);
  const day20 = costs.find((c) => c.day === '2099-10-20')!;
  assert.equal([day20.calls, Number(day20.cost_minor) > 0], [3, true]);
  // The provider's bill for 20 October: a dollar more than Tollgate's cost.
  const bill = await ok('/upstream-bills', { provider: 'openai', channel, file: JSON.stringify(openAiBill('2099-10-20', Number(day20.cost_minor) + 100)) });
  assert.equal(bill.lines, [{ day: '2099-10-20', upstream_model: 'gen-6-luna', cost_minor: Number(day20.cost_minor) + 100 }]);
  const rec = await ok(`/upstream-bills/reconciliation?${OCTOBER}`);
  assert.equal(
    rec.lines.map((l: { day: string; status: string }) => [l.day, l.status]),
    [
      ['2099-10-20', 'differs'],
      ['2099-10-21', 'not_billed'],
    ],
  );
});

let periods: string;
/** GET /finance/periods as text, and that it is what it was. */
async function periodsUnchanged(what: string) {
  const now = (await admin('/finance/periods')).text;
  assert.is(now, periods, what);
}

test('3 November: closing October is refused without a reason (nothing written), then closed with one', async () => {
  await setClock('2099-11-03T10:00:00Z');
  periods = (await admin('/finance/periods')).text;
  assert.equal(JSON.parse(periods), { object: 'list', data: [] });
  // The money reconciles; the bill for the 20th does not (the 21st, not billed yet, is no difference).
  assert.is((await ok(`/finance/reconciliation?${OCTOBER}`)).total.difference, 0);
  const error = await refused('/finance/periods/2099-10/close', {}, 409, 'reason');
  assert.match(error.message, /1 lines of its upstream bills differ/);
  await periodsUnchanged('a refused close writes nothing');
  const reason = 'OpenAI bill for 20 October disputed with the provider';
  const response = await admin('/finance/periods/2099-10/close', { reason });
  assert.is(response.status, 200, response.text);
  const closed = response.json;
  assert.equal(
    [closed.period, closed.status, closed.closed_by, closed.override_reason, closed.reconciliation_difference, closed.bill_lines_differing],
    ['2099-10', 'closed', 'admin:controller', reason, 0, 1],
  );
  assert.is(closed.closed_at.slice(0, 10), '2099-11-03', 'dated by the gateway clock');
  assert.equal(
    closed.history.map((h: { action: string; by: string; reason: string }) => [h.action, h.by, h.reason]),
    [['closed', 'admin:controller', reason]],
  );
  periods = (await admin('/finance/periods')).text;
  assert.equal(JSON.parse(periods).data, [closed]);
});

test('closing again, months not over and malformed months are refused; a reopen needs a reason; the periods unchanged', async () => {
  for (const [path, body, status, param] of [
    ['/finance/periods/2099-10/close', { reason: 'again' }, 409, 'period'],
    ['/finance/periods/2099-11/close', { reason: 'early' }, 409, 'period'],
    ['/finance/periods/2099-12/close', {}, 409, 'period'],
    ['/finance/periods/2099-13/close', {}, 400, 'period'],
    ['/finance/periods/oct/close', { reason: 'typo' }, 400, 'period'],
    ['/finance/periods/2099-10/reopen', {}, 400, 'reason'],
    ['/finance/periods/2099-10/reopen', { reason: '  ' }, 400, 'reason'],
    ['/finance/periods/2099-09/reopen', { reason: 'never closed' }, 409, 'period'],
  ] as const) {
    await refused(path, body, status, param);
    await periodsUnchanged(`${path} ${JSON.stringify(body)}`);
  }
});

const OCTOBER_READS = [
  `/finance/report?${OCTOBER}`,
  `/finance/report?${OCTOBER}&format=csv`,
  `/finance/journal?${OCTOBER}`,
  `/finance/journal?${OCTOBER}&format=csv`,
  `/finance/journal?${OCTOBER}&format=json`,
  `/finance/reconciliation?${OCTOBER}`,
];
const saved = new Map<string, string>();

test('November books a refund, a correction and a second bill of October; October reads the same, byte for byte', async () => {
  for (const path of OCTOBER_READS) {
    const r = await admin(path);
    assert.is(r.status, 200, r.text);
    saved.set(path, r.text);
  }
  const october = JSON.parse(saved.get(OCTOBER_READS[0])!);
  assert.equal(october.periods, JSON.parse(periods).data, 'the report lists the month closed');
  assert.equal([october.totals.payments, october.totals.refunds, october.totals.upstream_cost], [2000, 0, octoberCost]);
  assert.is(JSON.parse(saved.get(`/finance/reconciliation?${OCTOBER}`)!).total.difference, 0);

  const refund = await ok(`/accounts/${ACCOUNT}/payments/${paymentId}/refunds`, { amount: 500, refund_id: 're_nov_1' });
  // $5.00 of a plan at 2 cents a token: 250 unused tokens withdrawn, all from deferred revenue.
  assert.equal([refund.tokensWithdrawn, refund.fromDeferred, refund.refundedRevenue], [250, 500, 0]);
  const correction = await ok('/corrections', {
    model: MODEL,
    from: '2099-10-01T00:00:00Z',
    to: '2099-11-01T00:00:00Z',
    multiplier: 0.5,
    reason: 'luna was priced double in October',
  });
  const c = correction.totals;
  assert.equal([c.charges, c.billedOriginally, c.difference < 0], [4, october.totals.revenue / 2, true]);
  const cost21 = (await ok('/upstream-costs?from=2099-10-21&to=2099-10-21')).data[0].cost_minor;
  await ok('/upstream-bills', { provider: 'openai', channel, file: JSON.stringify(openAiBill('2099-10-21', Number(cost21))) });
  const rates = (await admin('/cost-rates')).text;
  const back = await refused('/cost-rates', { channel, effective_at: '2099-10-10T00:00:00Z', input: '500', output: '1000' }, 409, 'effective_at');
  assert.is(back.code, 'period_closed');
  assert.is((await admin('/cost-rates')).text, rates, 'nothing written');
  const fromNovember = await admin('/cost-rates', { channel, effective_at: '2099-11-01T00:00:00Z', input: '500', output: '1000' });
  assert.is(fromNovember.status, 201, fromNovember.text);

  for (const path of OCTOBER_READS) assert.is((await admin(path)).text, saved.get(path), path);

  // November holds the refund and the correction: the tokens given back are revenue taken back, at 2 cents each.
  const november = await ok(`/finance/report?${NOVEMBER}`);
  const rows = november.rows.map((r: Record<string, unknown>) => [r.day, r.model, r.refunds, r.revenue]);
  assert.equal(rows, [
    ['2099-11-03', '', 500, 0],
    ['2099-11-03', MODEL, 0, 2 * c.difference],
  ]);
  assert.equal([november.totals.refunds, november.totals.revenue, november.periods], [500, 2 * c.difference, []]);
  const rec = (await ok(`/finance/reconciliation?${NOVEMBER}`)).total;
  const octoberEnd = JSON.parse(saved.get(`/finance/reconciliation?${OCTOBER}`)!).total.deferred_end;
  assert.equal([rec.deferred_start, rec.deferred_end, rec.difference], [octoberEnd, octoberEnd - 500 - 2 * c.difference, 0]);
});

test('October reopened with a reason: the periods and October report show it with both events', async () => {
  const reason = 'the provider corrected its October bill';
  const reopened = await ok('/finance/periods/2099-10/reopen', { reason });
  assert.equal(
    [reopened.status, reopened.reopen_reason, reopened.reopened_by, reopened.reopened_at.slice(0, 10)],
    ['reopened', reason, 'admin:controller', '2099-11-03'],
  );
  const listed = (await ok('/finance/periods')).data;
  assert.equal(listed, [reopened]);
  assert.equal(
    listed[0].history.map((h: { action: string; by: string; reason: string }) => [h.action, h.by, h.reason]),
    [
      ['closed', 'admin:controller', 'OpenAI bill for 20 October disputed with the provider'],
      ['reopened', 'admin:controller', reason],
    ],
  );
  // The close as it was, kept beside the reopen.
  assert.equal([listed[0].override_reason, listed[0].bill_lines_differing], ['OpenAI bill for 20 October disputed with the provider', 1]);
  assert.equal((await ok(`/finance/report?${OCTOBER}`)).periods, listed);
  assert.equal((await ok(`/finance/reconciliation?${OCTOBER}`)).periods, listed);
});

test('the CLI lists the month and its status', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'period', 'list', '--url', origin.url, '--token', ADMIN],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
    },
  );
  const lines = stdout.trim().split('\n');
  assert.is(lines.length, 1, stdout);
  assert.match(
    lines[0],
    /^2099-10\treopened\tclosed 2099-11-03T[0-9:.]+Z by admin:controller \(override: OpenAI bill for 20 October disputed with the provider\)\treopened: the provider corrected its October bill$/,
  );
});

/** One day of an OpenAI Costs API page for the channel's upstream model, `minor` cents. */
function openAiBill(day: string, minor: number) {
  const start = Date.parse(`${day}T00:00:00Z`) / 1000;
  return {
    object: 'page',
    data: [
      {
        object: 'bucket',
        start_time: start,
        end_time: start + 86_400,
        results: [{ object: 'organization.costs.result', amount: { value: minor / 100, currency: 'usd' }, line_item: 'gen-6-luna, input', project_id: null }],
      },
    ],
    has_more: false,
    next_page: null,
  };
}

test.run();
