// Exchange rates into the settlement currency: the decider refusing each bad input by its name,
// the rate of a day (or of the latest day before it), conversions exact to the minor unit, and the
// operator's API and CLI over real HTTP (on PostgreSQL: set on one gateway, read on another).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { exchangeRatesDecider, rateOn, requireRateOn, type ExchangeRatesCommand, type ExchangeRatesState } from '../src/money/exchange-rates.ts';
import { convertMoney, convertedPart } from '../src/money/money.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { streams } from '../src/ledger/events.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/http.ts';

const NOW = new Date('2026-03-15T12:00:00Z');
const command = (over: Partial<ExchangeRatesCommand> = {}): ExchangeRatesCommand => ({
  type: 'SetRate',
  currency: 'EUR',
  settlement: 'USD',
  rate: '1.0523',
  day: '2026-03-15',
  source: 'ECB reference rate',
  now: NOW,
  ...over,
});

/** The refusal of a command: its code and the param it names (fails if the command is decided). */
function refusal(over: Partial<ExchangeRatesCommand>, state = exchangeRatesDecider.initialState()): { code: string; param: unknown } {
  try {
    exchangeRatesDecider.decide(command(over), state);
  } catch (err) {
    assert.instance(err, DomainError);
    return { code: (err as DomainError).code, param: (err as DomainError).facts.param };
  }
  assert.unreachable(`decided ${JSON.stringify(over)}`);
  throw new Error('unreachable');
}

/** The state after deciding and evolving each command in turn. */
function stateAfter(...commands: Partial<ExchangeRatesCommand>[]): ExchangeRatesState {
  let s = exchangeRatesDecider.initialState();
  for (const c of commands) for (const e of exchangeRatesDecider.decide(command(c), s)) s = exchangeRatesDecider.evolve(s, e);
  return s;
}

const pure = suite('exchange rates: the decider and the conversions');

pure('every bad input is refused naming its param', () => {
  const invalid = (param: string) => ({ code: 'invalid', param });
  assert.equal(refusal({ currency: 'EUX' }), invalid('currency'));
  assert.equal(refusal({ currency: 'eur' }), invalid('currency'));
  assert.equal(refusal({ currency: 'USD' }), invalid('currency'), 'the settlement currency itself');
  for (const rate of ['0', '0.000', '-1', '1,05', '', ' 1.05', '01.05', '1.05e2', '1.0000000000001', 1.05, null, undefined])
    assert.equal(refusal({ rate }), invalid('rate'), `rate ${JSON.stringify(rate)}`);
  for (const day of ['2026-02-30', '2026-03-16', '2027-01-01', 'yesterday', '2026-3-1', '2026-03-15T00:00:00Z', 20260315])
    assert.equal(refusal({ day }), invalid('day'), `day ${JSON.stringify(day)}`);
  for (const source of ['', '   ', 'x'.repeat(201), 42, undefined]) assert.equal(refusal({ source }), invalid('source'), `source ${JSON.stringify(source)}`);
  assert.equal(refusal({ settlement: null }).code, 'conflict', 'no settlement currency yet');
});

pure('good input: 12 decimals, a past day, today by default, the source trimmed', () => {
  const [e] = exchangeRatesDecider.decide(
    command({ rate: '0.000000000001', day: '2024-02-29', source: '  the processor  ' }),
    exchangeRatesDecider.initialState(),
  );
  assert.equal(e, {
    type: 'ExchangeRateSet',
    data: { currency: 'EUR', settlement: 'USD', rate: '0.000000000001', day: '2024-02-29', source: 'the processor' },
  });
  assert.is(exchangeRatesDecider.decide(command({ day: undefined }), exchangeRatesDecider.initialState())[0].data.day, '2026-03-15');
  assert.is(exchangeRatesDecider.decide(command({ rate: '151.37', currency: 'JPY' }), exchangeRatesDecider.initialState())[0].data.rate, '151.37');
});

pure('rateOn: the exact day, else the latest earlier day, else null; a rate set again for a day replaces it', () => {
  const s = stateAfter(
    { day: '2026-03-10', rate: '1.08', source: 'ECB reference rate' },
    { day: '2026-03-01', rate: '1.05', source: 'ECB reference rate' },
    { currency: 'GBP', day: '2026-03-12', rate: '1.27', source: 'BoE' },
  );
  assert.equal(rateOn(s, 'EUR', '2026-03-10'), { rate: '1.08', day: '2026-03-10', source: 'ECB reference rate' });
  assert.equal(rateOn(s, 'EUR', '2026-03-09'), { rate: '1.05', day: '2026-03-01', source: 'ECB reference rate' });
  assert.equal(rateOn(s, 'EUR', '2026-03-15'), { rate: '1.08', day: '2026-03-10', source: 'ECB reference rate' });
  assert.is(rateOn(s, 'EUR', '2026-02-28'), null);
  assert.is(rateOn(s, 'GBP', '2026-03-11'), null);
  assert.is(rateOn(s, 'CHF', '2026-03-15'), null);
  try {
    requireRateOn(s, 'CHF', '2026-03-15');
    assert.unreachable('a booking without a rate');
  } catch (err) {
    assert.instance(err, DomainError);
    assert.is((err as DomainError).code, 'conflict');
    assert.is((err as DomainError).facts.param, 'currency');
  }

  const again = stateAfter(
    { day: '2026-03-10', rate: '1.08', source: 'ECB reference rate' },
    { day: '2026-03-01', rate: '1.05', source: 'ECB reference rate' },
    { day: '2026-03-10', rate: '1.0815', source: 'the processor' },
  );
  assert.equal(rateOn(again, 'EUR', '2026-03-10'), { rate: '1.0815', day: '2026-03-10', source: 'the processor' });
  assert.equal(Object.keys(again.rates.EUR).sort(), ['2026-03-01', '2026-03-10'], 'one rate per day');
});

pure('convertMoney is exact to the minor unit, rounded half up', () => {
  assert.equal(convertMoney({ amount: 1000, currency: 'EUR' }, 'USD', '1.0523'), { amount: 1052, currency: 'USD' }); // 10.523
  assert.equal(convertMoney({ amount: 250_000, currency: 'VND' }, 'USD', '0.0000393'), { amount: 983, currency: 'USD' }); // 9.825, half up
  assert.equal(convertMoney({ amount: 1999, currency: 'USD' }, 'JPY', '151.37'), { amount: 3026, currency: 'JPY' }); // 3025.8863
  assert.equal(convertMoney({ amount: 12_345, currency: 'KWD' }, 'USD', '3.25'), { amount: 4012, currency: 'USD' }); // 12.345 KWD = 40.12125
  assert.equal(convertMoney({ amount: 3, currency: 'KWD' }, 'USD', '5'), { amount: 2, currency: 'USD' }); // 0.003 KWD = 0.015, half up
  assert.equal(convertMoney({ amount: 1234, currency: 'USD' }, 'KWD', '0.307'), { amount: 3788, currency: 'KWD' }); // 3.78838
  assert.equal(convertMoney({ amount: 1, currency: 'EUR' }, 'USD', '0.000000000001'), { amount: 0, currency: 'USD' });
});

pure('convertedPart: three refunds of a payment add up to the conversion of the whole', () => {
  const rate = '1.0523';
  const eur = (amount: number) => ({ amount, currency: 'EUR' });
  const refunds = [3333, 3333, 3334];
  let before = 0;
  const parts = refunds.map((r) => {
    const part = convertedPart(eur(before), eur(before + r), 'USD', rate);
    before += r;
    return part;
  });
  assert.equal(parts, [3507, 3508, 3508]);
  assert.is(
    parts.reduce((a, b) => a + b, 0),
    convertMoney(eur(10_000), 'USD', rate).amount,
  );
  assert.is(convertMoney(eur(10_000), 'USD', rate).amount, 10_523);
  // Each refund converted alone would lose a cent: 3507 + 3507 + 3508.
  assert.is(
    refunds.map((r) => convertMoney(eur(r), 'USD', rate).amount).reduce((a, b) => a + b, 0),
    10_522,
  );
});

pure.run();

const ADMIN = 'exchange-rates-admin-token-0123456789abcdef';
const served = suite(`exchange rates over the admin API and the CLI (${process.env.DATABASE_URL ? 'postgres, two gateways' : 'pglite'})`);
let gw: TestGateway;
let other: TestGateway;

const admin = (g: TestGateway, path: string, body?: unknown, method?: string) =>
  call(g, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': 'ops-fx' } });
const utcDay = (daysAgo = 0) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);

/** Every event in the log, as the auditor's export has it. */
async function eventCount(): Promise<number> {
  const r = await admin(gw, '/events');
  assert.is(r.status, 200, r.text);
  return r.text.split('\n').filter((l) => l.trim()).length;
}

served.before(async () => {
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  other = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema }) : gw;
});
served.after(async () => {
  if (other && other !== gw) await other.close();
  await gw?.stop();
});

served('a rate set on one gateway is listed on the other, newest day first, currencies sorted, with the actor on the event', async () => {
  const empty = await admin(other, '/exchange-rates');
  assert.is(empty.status, 200, empty.text);
  assert.equal(empty.json, { object: 'list', settlement: 'USD', data: [] });

  const old = await admin(gw, '/exchange-rates/EUR', { rate: '1.0412', source: 'ECB reference rate', day: utcDay(10) }, 'PUT');
  assert.is(old.status, 200, old.text);
  assert.equal(old.json, { object: 'exchange_rate', currency: 'EUR', settlement: 'USD', rate: '1.0412', day: utcDay(10), source: 'ECB reference rate' });
  for (const [cur, rate, day] of [
    ['GBP', '1.2711', utcDay(3)],
    ['EUR', '1.0523', utcDay(3)],
    ['JPY', '0.0066', utcDay(3)],
  ]) {
    const r = await admin(gw, `/exchange-rates/${cur}`, { rate, source: 'ECB reference rate', day }, 'PUT');
    assert.is(r.status, 200, r.text);
  }
  // No day: today's (UTC), as the gateway's clock has it.
  const before = utcDay();
  const today = await admin(gw, '/exchange-rates/EUR', { rate: '1.0534', source: '  the processor ' }, 'PUT');
  assert.is(today.status, 200, today.text);
  assert.ok([before, utcDay()].includes(today.json.day), today.text);
  assert.is(today.json.source, 'the processor');

  const listed = await admin(other, '/exchange-rates');
  assert.is(listed.status, 200, listed.text);
  assert.equal(listed.json, {
    object: 'list',
    settlement: 'USD',
    data: [
      { currency: 'EUR', rate: '1.0534', day: today.json.day, source: 'the processor' },
      { currency: 'EUR', rate: '1.0523', day: utcDay(3), source: 'ECB reference rate' },
      { currency: 'EUR', rate: '1.0412', day: utcDay(10), source: 'ECB reference rate' },
      { currency: 'GBP', rate: '1.2711', day: utcDay(3), source: 'ECB reference rate' },
      { currency: 'JPY', rate: '0.0066', day: utcDay(3), source: 'ECB reference rate' },
    ],
  });
  const gbp = await admin(other, '/exchange-rates?currency=GBP');
  assert.equal(gbp.json, { object: 'list', settlement: 'USD', data: [{ currency: 'GBP', rate: '1.2711', day: utcDay(3), source: 'ECB reference rate' }] });
  const chf = await admin(other, '/exchange-rates?currency=CHF');
  assert.equal(chf.json.data, []);

  // The same day again replaces its rate.
  const replaced = await admin(other, '/exchange-rates/GBP', { rate: '1.2722', source: 'BoE', day: utcDay(3) }, 'PUT');
  assert.is(replaced.status, 200, replaced.text);
  assert.equal((await admin(gw, '/exchange-rates?currency=GBP')).json.data, [{ currency: 'GBP', rate: '1.2722', day: utcDay(3), source: 'BoE' }]);

  const events = await gw.ledger.events.readStream(streams.exchangeRates());
  assert.is(events.length, 6);
  assert.ok(
    events.every((e) => e.type === 'ExchangeRateSet' && e.metadata.actor === 'admin:ops-fx'),
    JSON.stringify(events.map((e) => e.metadata)),
  );
  assert.equal(events[0].data, { currency: 'EUR', settlement: 'USD', rate: '1.0412', day: utcDay(10), source: 'ECB reference rate' });
});

served('bad input is a 400 naming its param, and nothing is written', async () => {
  const head = await eventCount();
  const cases: Array<[string, unknown, string]> = [
    ['EUX', { rate: '1.05', source: 'ECB' }, 'currency'],
    ['eur', { rate: '1.05', source: 'ECB' }, 'currency'],
    ['USD', { rate: '1', source: 'ECB' }, 'currency'],
    ['EUR', { rate: '0', source: 'ECB' }, 'rate'],
    ['EUR', { rate: '-1', source: 'ECB' }, 'rate'],
    ['EUR', { rate: '1,05', source: 'ECB' }, 'rate'],
    ['EUR', { rate: 1.05, source: 'ECB' }, 'rate'],
    ['EUR', { rate: '1.0000000000001', source: 'ECB' }, 'rate'],
    ['EUR', { source: 'ECB' }, 'rate'],
    ['EUR', { rate: '1.05', source: 'ECB', day: '2026-02-30' }, 'day'],
    ['EUR', { rate: '1.05', source: 'ECB', day: utcDay(-2) }, 'day'],
    ['EUR', { rate: '1.05', source: 'ECB', day: 'yesterday' }, 'day'],
    ['EUR', { rate: '1.05', source: '' }, 'source'],
    ['EUR', { rate: '1.05', source: 'x'.repeat(201) }, 'source'],
    ['EUR', { rate: '1.05' }, 'source'],
    ['EUR', { rate: '1.05', source: 'ECB', dya: utcDay(1) }, 'dya'],
  ];
  for (const [cur, body, param] of cases) {
    for (const g of new Set([gw, other])) {
      const r = await admin(g, `/exchange-rates/${cur}`, body, 'PUT');
      assert.is(r.status, 400, `${cur} ${JSON.stringify(body)}: ${r.status} ${r.text}`);
      assert.is(r.json.error.param, param, `${cur} ${JSON.stringify(body)}: ${r.text}`);
      assert.type(r.json.error.message, 'string');
    }
  }
  const notObject = await admin(gw, '/exchange-rates/EUR', ['1.05'], 'PUT');
  assert.is(notObject.status, 400, notObject.text);
  const badFilter = await admin(other, '/exchange-rates?currency=EUX');
  assert.is(badFilter.status, 400, badFilter.text);
  assert.is(badFilter.json.error.param, 'currency');
  assert.is(await eventCount(), head, 'nothing written');
});

served('the CLI: fx set and fx list, for people and as JSON; a refusal exits non-zero with its message', async () => {
  const cli = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'fx', ...args, '--url', other.url, '--token', ADMIN, '--actor', 'cli-fx'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
    });
  const set = await cli('set', 'CHF', '--rate', '1.1342', '--source', 'SNB reference rate', '--day', utcDay(2));
  assert.is(set.stdout, `rate set: CHF\t${utcDay(2)}\t1.1342 USD/CHF\tSNB reference rate\n`);
  const json = JSON.parse((await cli('set', 'CHF', '--rate', '1.1351', '--source', 'SNB reference rate', '--json')).stdout);
  assert.equal(
    { ...json, day: undefined },
    { object: 'exchange_rate', currency: 'CHF', settlement: 'USD', rate: '1.1351', day: undefined, source: 'SNB reference rate' },
  );

  const list = await cli('list', '--currency', 'CHF');
  assert.is(list.stdout, `CHF\t${json.day}\t1.1351 USD/CHF\tSNB reference rate\nCHF\t${utcDay(2)}\t1.1342 USD/CHF\tSNB reference rate\n`);
  const all = JSON.parse((await cli('list', '--json')).stdout);
  assert.is(all.object, 'list');
  assert.is(all.settlement, 'USD');
  assert.equal([...new Set(all.data.map((r: { currency: string }) => r.currency))], ['CHF', 'EUR', 'GBP', 'JPY']);
  const none = await cli('list', '--currency', 'SEK');
  assert.is(none.stdout, '(no rates)\n');

  const chf = await gw.ledger.events.readStream(streams.exchangeRates());
  assert.is(chf[chf.length - 1].metadata.actor, 'admin:cli-fx');

  const head = await eventCount();
  const refused = await cli('set', 'CHF', '--rate', '1,13', '--source', 'SNB').then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  assert.ok(refused && refused.code === 1 && /400: rate must be a positive decimal/.test(refused.stderr), refused?.stderr);
  const missing = await cli('set', 'CHF', '--rate', '1.13').then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  assert.ok(missing && missing.code === 2 && /Missing --source/.test(missing.stderr), missing?.stderr);
  assert.is(await eventCount(), head, 'nothing written');
});

served.run();
