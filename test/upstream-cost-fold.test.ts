// The upstream cost read model on hand-made events: each call at the rate in force at its time,
// exact to the minor unit under the rounding rule (a day's series adds up to its rounded whole),
// an unpriced channel reported as unpriced, a rate fixed after the fact re-pricing the calls it
// covers, and the same figures after a rebuild from zero (one event at a time, and bulk replay).
// On PGlite, and on PostgreSQL with DATABASE_URL.
import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import { applyEvents, ensureReadModels } from '../projections/runner/runner.ts';
import { finishDdl } from '../projections/runner/ddl.ts';
import { ReplayMemory } from '../projections/runner/replay-memory.ts';
import { bookedCalls, pricedCalls, upstreamCostBetween, type PricedCall, type UpstreamCostRow } from '../projections/catalogue/upstream-cost.ts';
import { upstreamCalls, upstreamCostDayChanges, upstreamCostDays, upstreamCostRates } from '../projections/catalogue/cost-tables.ts';
import { upstreamCost } from '../projections/catalogue/cost-book.ts';
import { testDatabases, type TestDatabase } from './support/db.ts';
import { bookSeries, exactCost, exactMinorText, rateInForce, ratesInForceDuring } from '../src/money/upstream-cost.ts';
import { priceText, rateOf } from '../src/catalogue/cost-rates.ts';
import { createRng } from '../src/upstream/seed.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const PROJECTIONS = [upstreamCostRates, upstreamCalls, upstreamCostDays, upstreamCostDayChanges, upstreamCost];
let position = 0;
const ev = (type: string, timestamp: string, data: Record<string, unknown>): ProjectedEvent => ({ id: `ev-${++position}`, type, position, timestamp, data });
const rate = (channel: string, upstreamModel: string, effectiveAt: string, prices: Record<string, string | null>) =>
  ev('UpstreamCostRateSet', '2026-02-28T00:00:00.000Z', {
    channel,
    upstreamModel,
    currency: 'USD',
    effectiveAt,
    input: '0',
    cacheRead: '0',
    cacheWrite5m: '0',
    cacheWrite1h: '0',
    output: '0',
    image: null,
    ...prices,
  });
const chat = (at: string, accountId: string, channel: string, usage: Record<string, number>) =>
  ev('ChatCharged', at, {
    accountId,
    holdId: `h${position}`,
    requestId: `r${position}`,
    keyId: 'k',
    model: 'm',
    multiplierMilli: 1000,
    reserved: 1000,
    billed: 1,
    fromQuota: 0,
    fromExtra: 0,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed: false,
    aborted: false,
    channel,
    upstreamModel: `${channel}-up`,
    completionTokens: 0,
    ...usage,
  });

const EVENTS: ProjectedEvent[] = [
  rate('A', 'A-up', '2026-03-01T00:00:00.000Z', { input: '3', output: '15', cacheRead: '0.3', cacheWrite5m: '3.75' }),
  rate('I', 'I-up', '2026-03-01T00:00:00.000Z', { image: '0.04' }),
  // $0.0006 + $0.00018 + $0.00075 + $0.0015 = 0.303 cents: booked 0.
  chat('2026-03-01T10:00:00.000Z', 'a', 'A', { promptTokens: 1000, cachedTokens: 600, cacheWriteTokens: 200, completionTokens: 100 }),
  // 0.3 cents: the day's series is now 0.603 cents, rounded 1: booked 1.
  chat('2026-03-01T11:00:00.000Z', 'b', 'A', { promptTokens: 1000 }),
  // No rate for channel B: unpriced.
  chat('2026-03-01T12:00:00.000Z', 'a', 'B', { promptTokens: 50, completionTokens: 5 }),
  ev('ImageCharged', '2026-03-01T13:00:00.000Z', {
    accountId: 'a',
    holdId: 'hi',
    requestId: 'ri',
    keyId: 'k',
    model: 'img',
    multiplierMilli: 1000,
    reserved: 2,
    images: 2,
    tokensPerImage: 1,
    size: '1024x1024',
    edit: false,
    billed: 2,
    fromQuota: 2,
    fromExtra: 0,
    channel: 'I',
    upstreamModel: 'I-up',
  }),
  // $0.30 + $0.15 = 45 cents.
  chat('2026-03-02T09:00:00.000Z', 'a', 'A', { promptTokens: 100_000, completionTokens: 10_000 }),
];
// Fixed after the fact: output at $30 from 2 March on (the call above becomes 60 cents).
const FIX = rate('A', 'A-up', '2026-03-02T00:00:00.000Z', { input: '3', output: '30', cacheRead: '0.3', cacheWrite5m: '3.75' });

const row = (day: string, account_id: string, model: string, channel: string, calls: number, unpriced_calls: number, cost_minor: string) => ({
  day,
  account_id,
  model,
  channel,
  upstream_model: `${channel}-up`,
  calls,
  unpriced_calls,
  cost_minor,
});
const MARCH_1 = [
  row('2026-03-01', 'a', 'img', 'I', 1, 0, '8'),
  row('2026-03-01', 'a', 'm', 'A', 1, 0, '0'),
  row('2026-03-01', 'a', 'm', 'B', 1, 1, '0'),
  row('2026-03-01', 'b', 'm', 'A', 1, 0, '1'),
];

/** A history of calls on four channels over five days, with rates set now and then, many reaching back. */
function randomHistory(seed: number): ProjectedEvent[] {
  const next = createRng(seed);
  const rnd = (n: number) => Math.floor(next() * n);
  const out: ProjectedEvent[] = [];
  const base = Date.parse('2026-04-01T00:00:00.000Z');
  let clock = base;
  // Channel U is never priced.
  const channels = ['P', 'Q', 'R', 'U'];
  for (let i = 0; i < 160; i++) {
    clock += rnd(45) * 60_000;
    const at = new Date(clock).toISOString();
    const channel = channels[rnd(4)];
    if (rnd(9) === 0 && channel !== 'U') {
      // Effective from a time up to two days back (or ahead), often exactly on a day's start.
      const back = rnd(2) === 0 ? Math.floor(clock / 86_400_000) * 86_400_000 - rnd(2) * 86_400_000 : clock - (rnd(3000) - 500) * 60_000;
      const effectiveAt = new Date(Math.max(base - 86_400_000, back)).toISOString();
      const r = rate(channel, `${channel}-up`, effectiveAt, { input: `${rnd(5)}.${rnd(1000)}`, output: `${rnd(20)}.${rnd(100)}`, cacheRead: '0.1' });
      out.push({ ...r, timestamp: at });
      // Now and then a second rate at the very same effective time: the later set wins.
      if (rnd(4) === 0) out.push({ ...rate(channel, `${channel}-up`, effectiveAt, { input: `${rnd(7)}`, output: '2' }), timestamp: at });
    } else
      out.push(chat(at, ['a', 'b', 'c'][rnd(3)], channel, { promptTokens: rnd(4000), cachedTokens: rnd(3) === 0 ? rnd(200) : 0, completionTokens: rnd(900) }));
  }
  return out;
}

/** The report's rows summed from calls. */
function daysOf(calls: PricedCall[]): UpstreamCostRow[] {
  const rows = new Map<string, UpstreamCostRow & { cost: bigint }>();
  for (const c of calls) {
    const key = JSON.stringify([c.day, c.account_id, c.model, c.channel, c.upstream_model]);
    let r = rows.get(key);
    if (!r)
      rows.set(
        key,
        (r = {
          day: c.day,
          account_id: c.account_id,
          model: c.model,
          channel: c.channel,
          upstream_model: c.upstream_model,
          calls: 0,
          unpriced_calls: 0,
          cost_minor: '0',
          cost: 0n,
        }),
      );
    r.calls++;
    if (c.cost_minor === null) r.unpriced_calls++;
    else r.cost += c.cost_minor;
  }
  return [...rows.entries()]
    .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    .map(([, { cost, ...r }]) => ({ ...r, cost_minor: cost.toString() }));
}

test('pure: exact cost, the series booking and the price checks', () => {
  const r = rateOf(
    {
      type: 'SetRate',
      channel: 'A',
      upstreamModel: 'A-up',
      currency: 'USD',
      effectiveAt: '2026-03-01T00:00:00Z',
      prices: { input: '3', output: '15', cache_read: '0.3' },
    },
    'USD',
  );
  assert.is(r.cacheWrite5m, '3');
  assert.is(r.cacheWrite1h, '3');
  assert.is(r.image, null);
  const exact = exactCost(r, { input: 200, cacheRead: 600, cacheWrite5m: 200, cacheWrite1h: 0, output: 100, images: 0 });
  assert.is(exactMinorText(exact!), '0.288');
  assert.is(exactCost(r, { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, images: 1 }), null);
  // Three calls of 0.4 cents: 0, 1, 0 (the whole is 1.2 -> 1); an unpriced one leaves the total alone.
  const third = 4n * 10n ** 11n;
  // The rates in force during a day: the one at its start, then those taking effect within it (of two at one time, the later set).
  const at = (effectiveAt: string, id: string) => ({ effectiveAt, id });
  const rates = [
    at('2026-03-01T00:00:00Z', 'r1'),
    at('2026-03-02T00:00:00Z', 'r2'),
    at('2026-03-02T12:00:00Z', 'r3'),
    at('2026-03-02T12:00:00Z', 'r4'),
    at('2026-03-03T00:00:00Z', 'r5'),
  ];
  assert.equal(
    ratesInForceDuring(rates, '2026-03-02T00:00:00.000Z', '2026-03-03T00:00:00.000Z').map((r) => r.id),
    ['r2', 'r4'],
  );
  assert.equal(
    ratesInForceDuring(rates, '2026-03-01T06:00:00.000Z', '2026-03-02T00:00:00.000Z').map((r) => r.id),
    ['r1'],
  );
  assert.equal(ratesInForceDuring(rates, '2026-02-01T00:00:00.000Z', '2026-02-02T00:00:00.000Z'), []);
  assert.is(rateInForce(rates, '2026-03-02T12:00:00.000Z')?.id, 'r4');
  assert.equal(bookSeries([third, third, null, third]), [0n, 1n, null, 0n]);
  assert.is(priceText('0.00000001', 'USD', 'input'), '0.00000001');
  assert.throws(() => priceText('0.000000001', 'USD', 'input'), /more than 8 decimals/);
  assert.is(priceText('0.000001', 'JPY', 'input'), '0.000001');
  assert.throws(() => priceText('0.0000001', 'JPY', 'input'), /more than 6 decimals/);
  assert.throws(() => priceText('-1', 'USD', 'input'), /non-negative/);
  assert.throws(() => priceText(1.5, 'USD', 'input'), /non-negative/);
  assert.throws(
    () =>
      rateOf(
        { type: 'SetRate', channel: 'A', upstreamModel: 'A', currency: 'XYZ', effectiveAt: '2026-03-01T00:00:00Z', prices: { input: '1', output: '1' } },
        'USD',
      ),
    /ISO 4217/,
  );
  assert.throws(
    () =>
      rateOf(
        { type: 'SetRate', channel: 'A', upstreamModel: 'A', currency: 'EUR', effectiveAt: '2026-03-01T00:00:00Z', prices: { input: '1', output: '1' } },
        'USD',
      ),
    /no exchange rate for EUR/,
  );
});

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase }>(`upstream cost read model on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
  });
  s.after(async (ctx) => {
    for (const suffix of ['single', 'replay']) await ctx.t.db.exec(`DROP SCHEMA IF EXISTS "${ctx.t.schema}_${suffix}" CASCADE`);
    await ctx.t.cleanup();
  });

  s('each call at the rate in force, booked by the rounding rule; unpriced kept apart; a later fix re-prices', async ({ t }) => {
    const schema = `${t.schema}_rm`;
    await ensureReadModels(t.db, schema, PROJECTIONS);
    await applyEvents(t.db, schema, EVENTS, 0, PROJECTIONS);
    assert.equal(await upstreamCostBetween(t.db, schema, '2026-03-01', '2026-03-02'), [...MARCH_1, row('2026-03-02', 'a', 'm', 'A', 1, 0, '45')]);
    assert.equal(await upstreamCostBetween(t.db, schema, '2026-03-01', '2026-03-01'), MARCH_1);
    const calls = await pricedCalls(t.db, schema, '2026-03-01', '2026-03-01');
    assert.equal(
      calls.map((c) => [c.request_id, c.cost_minor === null ? null : exactMinorText(c.exact!), c.cost_minor, c.rate_event_id]),
      [
        ['r2', '0.303', 0n, 'ev-1'],
        ['r3', '0.3', 1n, 'ev-1'],
        ['r4', null, null, null],
        ['ri', '8', 8n, 'ev-2'],
      ],
    );
    // A charge from before 1-hour writes were recorded apart: every write is a 5-minute one.
    assert.equal([calls[0].usage.cacheWrite5m, calls[0].usage.cacheWrite1h], [200, 0]);
    assert.equal(await bookedCalls(t.db, schema, '2026-03-01', '2026-03-02'), await pricedCalls(t.db, schema, '2026-03-01', '2026-03-02'));
    await applyEvents(t.db, schema, [FIX], FIX.position - 1, PROJECTIONS);
    assert.equal(await upstreamCostBetween(t.db, schema, '2026-03-01', '2026-03-02'), [...MARCH_1, row('2026-03-02', 'a', 'm', 'A', 1, 0, '60')]);
    assert.equal(await bookedCalls(t.db, schema, '2026-03-01', '2026-03-02'), await pricedCalls(t.db, schema, '2026-03-01', '2026-03-02'));
  });

  s('on random histories with rates set late, early and twice at one time, the fold books every call as pricing the window now does', async ({ t }) => {
    for (let seed = 1; seed <= 4; seed++) {
      const events = randomHistory(seed);
      const expected = (schema: string) => pricedCalls(t.db, schema, '2026-04-01', '2026-04-06');
      for (const pageSize of [1, 7, 500]) {
        const schema = `${t.schema}_rand`;
        await t.db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await ensureReadModels(t.db, schema, PROJECTIONS);
        let at = 0;
        for (let i = 0; i < events.length; i += pageSize) at = await applyEvents(t.db, schema, events.slice(i, i + pageSize), at, PROJECTIONS);
        const reference = await expected(schema);
        const label = `seed ${seed}, pages of ${pageSize}`;
        assert.ok(
          reference.some((c) => c.cost_minor !== null && c.cost_minor > 0n) && reference.some((c) => c.cost_minor === null),
          `${label}: ${reference.length} calls, ${reference.filter((c) => c.cost_minor === null).length} unpriced, ${reference.filter((c) => (c.cost_minor ?? 0n) > 0n).length} with cost`,
        );
        assert.equal(await bookedCalls(t.db, schema, '2026-04-01', '2026-04-06'), reference, label);
        assert.equal(await upstreamCostBetween(t.db, schema, '2026-04-01', '2026-04-06'), daysOf(reference), label);
      }
    }
    await t.db.exec(`DROP SCHEMA IF EXISTS "${t.schema}_rand" CASCADE`);
  });

  s('a rebuild from zero, one event at a time or in bulk, gives the same figures', async ({ t }) => {
    const expected = await upstreamCostBetween(t.db, `${t.schema}_rm`, '2026-03-01', '2026-03-02');
    const all = [...EVENTS, FIX];
    const single = `${t.schema}_single`;
    await ensureReadModels(t.db, single, PROJECTIONS);
    for (const e of all) await applyEvents(t.db, single, [e], e.position - 1, PROJECTIONS);
    assert.equal(await upstreamCostBetween(t.db, single, '2026-03-01', '2026-03-02'), expected);
    const replay = `${t.schema}_replay`;
    await ensureReadModels(t.db, replay, PROJECTIONS, { bulk: true });
    const memory = new ReplayMemory({ copy: t.db.kind === 'postgres', maxStaged: 4 });
    let at = 0;
    for (let i = 0; i < all.length; i += 3) at = await applyEvents(t.db, replay, all.slice(i, i + 3), at, PROJECTIONS, memory);
    const finish = finishDdl(replay, PROJECTIONS);
    await t.db.transaction(async (tx) => {
      await memory.flushAll(tx, replay);
      for (const stmt of [...finish.durable, ...finish.indexes, ...finish.keys]) await tx.query(stmt);
    });
    assert.equal(await upstreamCostBetween(t.db, replay, '2026-03-01', '2026-03-02'), expected);
    assert.equal(await bookedCalls(t.db, replay, '2026-03-01', '2026-03-02'), await bookedCalls(t.db, single, '2026-03-01', '2026-03-02'));
  });
  s.run();
}
test.run();
