// Upstream cost through real HTTP: cost rates set by the admin API (bad ones refused, nothing
// written), calls through Anthropic and OpenAI doubles and the simulated image provider with cache
// reads and writes and an image, each day's cost exact to the minor unit; a channel with no rate
// reported as unpriced; a rate fixed after the fact re-pricing the calls, and the same figures
// after a rebuild from zero; an OpenAI and an Anthropic bill imported, the Anthropic one 5 cents
// off on one day: the reconciliation shows exactly that line. On PGlite, and on PostgreSQL with DATABASE_URL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { issueKey } from '../src/keys/index.ts';
import { priceModel } from '../src/catalogue/index.ts';
import { definePlan, openAccount, subscribe } from '../src/accounts/index.ts';

const ADMIN = 'tg_admin_upstream_cost_test_token_0123456789';
const ANTHROPIC_KEY = 'sk-ant-upstream-cost-test';
const OPENAI_KEY = 'sk-openai-upstream-cost-test';
const MODEL = 'test/cost';
const OAI_MODEL = 'test/cost-oai';
const IMAGE_MODEL = 'cx/gen-6-terra';
const DAY_MS = 86_400_000;
const START = Date.now();
const TODAY = new Date(START).toISOString().slice(0, 10);
const YESTERDAY = new Date(START - DAY_MS).toISOString().slice(0, 10);

let gw: TestGateway;
let first: AnthropicDouble;
let second: AnthropicDouble;
let openai: OpenAIDouble;
let configDir: string;
let key: string;
let imageChannel: string;

async function admin(method: string, path: string, body?: unknown) {
  const res = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* csv */
  }
  return { status: res.status, json, text, type: res.headers.get('content-type') ?? '' };
}

// Expected costs, kept here in cents x 10^6 per token-count (prices in cents per million tokens), independent of src/money.
type Tokens = { input: number; cacheRead: number; cacheWrite: number; cacheWrite1h?: number; output: number; images: number };
const usageByChannel = new Map<string, Tokens[]>();
const note = (channel: string, t: Tokens) => usageByChannel.set(channel, [...(usageByChannel.get(channel) ?? []), t]);
/** A day's cost in whole cents: the exact sum rounded once, half up. */
function dayCents(
  channel: string,
  centsPerM: { input: number; cacheRead: number; cacheWrite: number; cacheWrite1h?: number; output: number; image?: number },
): number {
  let n = 0n;
  for (const t of usageByChannel.get(channel) ?? [])
    n +=
      BigInt(t.input * centsPerM.input * 100) +
      BigInt(t.cacheRead * centsPerM.cacheRead * 100) +
      BigInt(t.cacheWrite * centsPerM.cacheWrite * 100) +
      BigInt((t.cacheWrite1h ?? 0) * (centsPerM.cacheWrite1h ?? centsPerM.cacheWrite) * 100) +
      BigInt(t.output * centsPerM.output * 100) +
      BigInt(t.images * (centsPerM.image ?? 0) * 100) * 1_000_000n;
  // n is in 10^-8 cents (prices were scaled by 100 to stay whole): round(n / 10^8), half up.
  return Number((n + 50_000_000n) / 100_000_000n);
}
// Prices a thousand times a real model's, so the doubles' short calls cost whole cents.
const CLAUDE = { input: 300_000, cacheRead: 30_000, cacheWrite: 375_000, cacheWrite1h: 600_000, output: 1_500_000 };
const CLAUDE_FIXED = { ...CLAUDE, output: 3_000_000 };
const GPT = { input: 250_000, cacheRead: 125_000, cacheWrite: 250_000, output: 1_000_000 };

/** A Messages call whose system prompt is cached (`ttl`: the cache entry's lifetime, priced apart upstream). */
const messages = (content: string, ttl?: '1h', system = 'You answer questions about toll roads and bridges. ') =>
  fetch(`${gw.baseUrl}/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({
      model: MODEL,
      max_tokens: 64,
      system: [{ type: 'text', text: system.repeat(12), cache_control: { type: 'ephemeral', ...(ttl ? { ttl } : {}) } }],
      messages: [{ role: 'user', content }],
    }),
  });

test.before(async () => {
  first = await startAnthropicDouble({ apiKey: ANTHROPIC_KEY });
  second = await startAnthropicDouble({ apiKey: ANTHROPIC_KEY });
  openai = await startOpenAIDouble({ apiKey: OPENAI_KEY });
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.first = { type: 'anthropic', baseURL: first.url, apiKeyEnv: 'UPSTREAM_COST_TEST_ANTHROPIC_KEY' };
  config.providers.second = { type: 'anthropic', baseURL: second.url, apiKeyEnv: 'UPSTREAM_COST_TEST_ANTHROPIC_KEY' };
  config.providers.third = { type: 'openai', baseURL: `${openai.url}/v1`, apiKeyEnv: 'UPSTREAM_COST_TEST_OPENAI_KEY' };
  config.models[MODEL] = {
    channels: [
      { provider: 'first', upstreamModel: 'claude-a' },
      { provider: 'second', upstreamModel: 'claude-b' },
    ],
  };
  config.models[OAI_MODEL] = { provider: 'third', upstreamModel: 'gpt-cost' };
  config.failover = { failureThreshold: 1000 };
  configDir = mkdtempSync(join(tmpdir(), 'tollgate-upstream-cost-'));
  writeFileSync(join(configDir, 'models.json'), JSON.stringify(config));
  process.env.UPSTREAM_COST_TEST_ANTHROPIC_KEY = ANTHROPIC_KEY;
  process.env.UPSTREAM_COST_TEST_OPENAI_KEY = OPENAI_KEY;
  gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false, modelsConfig: join(configDir, 'models.json') });
  const l = gw.ledger;
  await priceModel(l, { modelId: MODEL, multiplierMilli: 1000, status: 'ACTIVE', alias: null }, 'admin:test');
  await priceModel(l, { modelId: OAI_MODEL, multiplierMilli: 1000, status: 'ACTIVE', alias: null }, 'admin:test');
  await definePlan(l, { planId: 'cost', name: 'Cost', quota: 10_000_000, validityDays: 30, requestsPerMinute: 10_000, models: ['*'] }, 'admin:test');
  const accountId = await openAccount(l, { accountId: 'cost', name: 'Cost' }, 'admin:test');
  await subscribe(l, accountId, 'cost', 'admin:test');
  key = (await issueKey(l, accountId, 'cost', 'admin:test')).secret;
  const channels = (await admin('GET', '/channels')).json.data as Array<{ id: string; models: string[] }>;
  imageChannel = channels.find((c) => c.models.includes(IMAGE_MODEL))!.id;
});
test.after(async () => {
  await gw?.stop();
  await first?.close();
  await second?.close();
  await openai?.close();
  rmSync(configDir, { recursive: true, force: true });
});

const before = (ms: number) => new Date(START - ms).toISOString();

test('bad rates are refused with a 400 naming the field, and nothing is written', async () => {
  const head = await gw.ledger.events.headPosition();
  const good = { channel: 'first/claude-a', input: '3', output: '15' };
  const refused: Array<[Record<string, unknown>, string]> = [
    [{ ...good, input: '-1' }, 'input'],
    [{ ...good, input: -1 }, 'input'],
    [{ ...good, output: '0.000000001' }, 'output'],
    [{ ...good, cache_read: 'cheap' }, 'cache_read'],
    [{ ...good, channel: 'nowhere/x' }, 'channel'],
    [{ ...good, currency: 'XYZ' }, 'currency'],
    [{ ...good, effective_at: 'yesterday' }, 'effective_at'],
    [{ channel: 'first/claude-a', output: '1' }, 'input'],
    [{ ...good, colour: 'red' }, 'colour'],
  ];
  for (const [body, param] of refused) {
    const res = await admin('POST', '/cost-rates', body);
    assert.is(res.status, 400, JSON.stringify(body));
    assert.is(res.json.error?.param, param, JSON.stringify(res.json));
  }
  // Another currency needs an exchange rate to be converted at: none recorded, a conflict.
  const noRate = await admin('POST', '/cost-rates', { ...good, currency: 'EUR' });
  assert.equal([noRate.status, noRate.json.error?.param], [409, 'currency'], JSON.stringify(noRate.json));
  assert.is(await gw.ledger.events.headPosition(), head, 'nothing written');
});

test('calls priced at their rates, exact per day to the cent; the channel without a rate unpriced', async () => {
  const set = async (body: Record<string, unknown>) => {
    const res = await admin('POST', '/cost-rates', body);
    assert.is(res.status, 201, res.text);
    return res.json;
  };
  const claudeRate = { input: '3000', cache_read: '300', cache_write_5m: '3750', cache_write_1h: '6000' };
  await set({ channel: 'first/claude-a', effective_at: before(2 * 3600_000), ...claudeRate, output: '15000' });
  await set({ channel: 'third/gpt-cost', effective_at: before(2 * 3600_000), input: '2500', cache_read: '1250', output: '10000' });
  const img = await set({ channel: imageChannel, effective_at: before(2 * 3600_000), input: '0', output: '0', image: '0.04' });
  assert.is(img.cache_write_1h, '0', 'the 1-hour write defaults to the 5-minute one');
  // Cache written, then read, on the first channel; the last call writes a 1-hour entry (priced at its own rate).
  const ferries = 'You answer questions about ferries and their fares. ';
  for (const [q, ttl, system] of [
    ['What is a toll plaza?'],
    ['And an open-road toll?'],
    ['Who collects a bridge toll?'],
    ['Is a ferry a toll?', '1h', ferries],
  ] as const) {
    const res = await messages(q, ttl, system);
    assert.is(res.status, 200);
    const u = ((await res.json()) as { usage: Record<string, number> & { cache_creation: Record<string, number> } }).usage;
    note('first/claude-a', {
      input: u.input_tokens,
      cacheRead: u.cache_read_input_tokens,
      cacheWrite: u.cache_creation.ephemeral_5m_input_tokens,
      cacheWrite1h: u.cache_creation.ephemeral_1h_input_tokens,
      output: u.output_tokens,
      images: 0,
    });
  }
  const claudeCalls = usageByChannel.get('first/claude-a')!;
  assert.ok(claudeCalls.some((t) => t.cacheRead > 0) && claudeCalls.some((t) => t.cacheWrite > 0));
  assert.ok(claudeCalls[3].cacheWrite1h! > 0 && claudeCalls[3].cacheWrite === 0, 'the last call wrote a 1-hour entry only');
  // The first channel fails once: the second (no rate) answers.
  first.script({ status: 529 });
  assert.is((await messages('Is a shadow toll paid by drivers?')).status, 200);
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: OAI_MODEL,
        messages: [
          { role: 'system', content: 'You know toll roads. '.repeat(40) },
          { role: 'user', content: 'How do toll tags work?' },
        ],
      }),
    });
    assert.is(res.status, 200);
    const u = ((await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } }).usage;
    const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
    note('third/gpt-cost', { input: u.prompt_tokens - cached, cacheRead: cached, cacheWrite: 0, output: u.completion_tokens, images: 0 });
  }
  const image = await fetch(`${gw.baseUrl}/images/generations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: IMAGE_MODEL, prompt: 'a toll gate at dawn' }),
  });
  await image.arrayBuffer();
  assert.is(image.status, 200);
  note(imageChannel, { input: 0, cacheRead: 0, cacheWrite: 0, output: 0, images: 1 });

  const rows = (await admin('GET', `/upstream-costs?from=${YESTERDAY}&to=${TODAY}`)).json.data as Array<Record<string, any>>;
  const of = (channel: string) => rows.find((r) => r.channel === channel && r.day === TODAY)!;
  assert.is(of('first/claude-a').calls, 4);
  assert.ok(dayCents('first/claude-a', CLAUDE) > 0 && dayCents('third/gpt-cost', GPT) > 0, 'whole cents at stake');
  assert.is(of('first/claude-a').cost_minor, String(dayCents('first/claude-a', CLAUDE)));
  assert.is(of('third/gpt-cost').cost_minor, String(dayCents('third/gpt-cost', GPT)));
  assert.is(of(imageChannel).cost_minor, '4');
  assert.equal([of('second/claude-b').calls, of('second/claude-b').unpriced_calls, of('second/claude-b').cost_minor], [1, 1, '0']);
  // Per call: the booked parts of a day add up to its rounded whole; the unpriced call has no cost.
  const calls = (await admin('GET', `/upstream-costs/calls?from=${TODAY}&to=${TODAY}&limit=3`)).json;
  assert.is(calls.data.length, 3);
  assert.ok(calls.has_more);
  const rest = (await admin('GET', `/upstream-costs/calls?from=${TODAY}&to=${TODAY}&after=${calls.next}`)).json;
  const all = [...calls.data, ...rest.data] as Array<Record<string, any>>;
  assert.is(all.length, 8);
  // The 1-hour write is recorded apart on the charge and priced at the 1-hour rate.
  const hour = all.find((c) => c.channel === 'first/claude-a' && c.usage.cacheWrite1h > 0)!;
  assert.equal([hour.usage.cacheWrite1h, hour.usage.cacheWrite5m], [claudeCalls[3].cacheWrite1h, 0]);
  assert.ok(
    dayCents('first/claude-a', CLAUDE) > dayCents('first/claude-a', { ...CLAUDE, cacheWrite1h: CLAUDE.cacheWrite }),
    'the 1-hour price changes the figure',
  );
  const sum = (channel: string) => all.filter((c) => c.channel === channel).reduce((s, c) => s + Number(c.cost_minor), 0);
  assert.is(sum('first/claude-a'), dayCents('first/claude-a', CLAUDE));
  assert.equal(
    all.filter((c) => c.channel === 'second/claude-b').map((c) => [c.priced, c.cost_minor]),
    [[false, null]],
  );
});

test('a rate fixed after the fact re-prices the calls it covers, and a rebuild gives the same figures', async () => {
  const fix = await admin('POST', '/cost-rates', {
    channel: 'first/claude-a',
    effective_at: before(3600_000),
    input: '3000',
    cache_read: '300',
    cache_write_5m: '3750',
    cache_write_1h: '6000',
    output: '30000',
  });
  assert.is(fix.status, 201);
  const rows = async () => (await admin('GET', `/upstream-costs?from=${YESTERDAY}&to=${TODAY}`)).json.data as Array<Record<string, any>>;
  const after = await rows();
  assert.is(after.find((r) => r.channel === 'first/claude-a')!.cost_minor, String(dayCents('first/claude-a', CLAUDE_FIXED)));
  assert.ok(dayCents('first/claude-a', CLAUDE_FIXED) > dayCents('first/claude-a', CLAUDE), 'the fix changed the figure');
  const rebuilt = await admin('POST', '/rebuild');
  assert.is(rebuilt.status, 200);
  assert.match(rebuilt.text, /"type":"done"/);
  assert.equal(await rows(), after);
});

test('an OpenAI and an Anthropic bill: the reconciliation shows exactly the line that differs', async () => {
  const claude = dayCents('first/claude-a', CLAUDE_FIXED);
  const gpt = dayCents('third/gpt-cost', GPT);
  const anthropicBill = {
    data: [
      {
        starting_at: `${YESTERDAY}T00:00:00Z`,
        ending_at: `${TODAY}T00:00:00Z`,
        results: [{ currency: 'USD', amount: '0', model: 'claude-a', cost_type: 'tokens' }],
      },
      {
        starting_at: `${TODAY}T00:00:00Z`,
        ending_at: `${TODAY}T23:59:59Z`,
        results: [
          { currency: 'USD', amount: '0.25', model: 'claude-a', cost_type: 'tokens', token_type: 'cache_read_input_tokens' },
          { currency: 'USD', amount: `${claude + 4}.75`, model: 'claude-a', cost_type: 'tokens', token_type: 'output_tokens' },
          { currency: 'USD', amount: '1000', model: null, cost_type: 'web_search' },
        ],
      },
    ],
    has_more: false,
    next_page: null,
  };
  const openaiBill = {
    object: 'page',
    data: [
      {
        object: 'bucket',
        start_time: Date.parse(`${TODAY}T00:00:00Z`) / 1000,
        end_time: Date.parse(`${TODAY}T00:00:00Z`) / 1000 + 86400,
        results: [
          { object: 'organization.costs.result', amount: { value: 0.001, currency: 'usd' }, line_item: 'gpt-cost, input', project_id: null },
          { object: 'organization.costs.result', amount: { value: gpt / 100, currency: 'usd' }, line_item: 'gpt-cost, output', project_id: null },
        ],
      },
    ],
    has_more: false,
    next_page: null,
  };
  const imported = await admin('POST', '/upstream-bills', { provider: 'anthropic', channel: 'first/claude-a', file: JSON.stringify(anthropicBill) });
  assert.is(imported.status, 201, imported.text);
  assert.equal(imported.json.lines, [
    { day: YESTERDAY, upstream_model: 'claude-a', cost_minor: 0 },
    { day: TODAY, upstream_model: 'claude-a', cost_minor: claude + 5 },
  ]);
  const again = await admin('POST', '/upstream-bills', { provider: 'anthropic', channel: 'first/claude-a', file: JSON.stringify(anthropicBill) });
  assert.equal([again.status, again.json.already_imported], [200, true]);
  assert.is((await admin('POST', '/upstream-bills', { provider: 'openai', channel: 'third/gpt-cost', file: JSON.stringify(openaiBill) })).status, 201);
  const head = await gw.ledger.events.headPosition();
  for (const bad of [
    { provider: 'openai', channel: 'third/gpt-cost', file: '{not json' },
    {
      provider: 'openai',
      channel: 'third/gpt-cost',
      file: JSON.stringify({ data: [{ start_time: 1, results: [{ amount: { value: 1, currency: 'eur' }, line_item: 'x' }] }] }),
    },
    { provider: 'aws', channel: 'third/gpt-cost', file: JSON.stringify(openaiBill) },
    { provider: 'openai', channel: 'nowhere/x', file: JSON.stringify(openaiBill) },
  ]) {
    const res = await admin('POST', '/upstream-bills', bad);
    assert.is(res.status, 400, res.text);
  }
  assert.is(await gw.ledger.events.headPosition(), head, 'nothing written');

  const rec = (await admin('GET', `/upstream-bills/reconciliation?from=${YESTERDAY}&to=${TODAY}`)).json;
  const line = (day: string, channel: string) => rec.lines.find((l: any) => l.day === day && l.channel === channel);
  assert.equal(
    rec.lines
      .filter((l: any) => l.status === 'differs')
      .map((l: any) => [l.day, l.channel, l.upstream_model, l.tollgate_cost_minor, l.bill_cost_minor, l.difference_minor]),
    [[TODAY, 'first/claude-a', 'claude-a', String(claude), String(claude + 5), '-5']],
  );
  assert.is(line(TODAY, 'first/claude-a').charge_event_ids.length, 4);
  assert.is(line(TODAY, 'first/claude-a').rate_event_ids.length, 1, 'the fixed rate priced them all');
  assert.ok(line(TODAY, 'first/claude-a').bill_event_id);
  assert.equal([line(TODAY, 'third/gpt-cost').status, line(TODAY, 'third/gpt-cost').difference_minor], ['agrees', '0']);
  assert.equal([line(YESTERDAY, 'first/claude-a').status, line(YESTERDAY, 'first/claude-a').difference_minor], ['agrees', '0']);
  assert.is(line(TODAY, 'second/claude-b').status, 'unpriced');
  assert.is(line(TODAY, imageChannel).status, 'not_billed');
  const csv = await admin('GET', `/upstream-bills/reconciliation?from=${YESTERDAY}&to=${TODAY}&format=csv`);
  assert.match(csv.type, /text\/csv/);
  assert.ok(
    csv.text.split('\n').some((l) => l.startsWith(`${TODAY},first/claude-a,claude-a,4,0,${claude},${claude + 5},"-5",differs,`)),
    csv.text,
  );
});

test('bills as CSV: the same lines as their JSON, a corrected bill replaces the figure; bad CSV refused, nothing written', async () => {
  const claude = dayCents('first/claude-a', CLAUDE_FIXED);
  const gpt = dayCents('third/gpt-cost', GPT);
  const start = Date.parse(`${TODAY}T00:00:00Z`) / 1000;
  const openaiCsv = [
    'start_time,end_time,amount_value,amount_currency,line_item,project_id',
    `${start},${start + 86400},0.001,usd,"gpt-cost, input",`,
    `${start},${start + 86400},${gpt / 100},usd,"gpt-cost, output",`,
  ].join('\n');
  const csvOpenai = await admin('POST', '/upstream-bills', { provider: 'openai', channel: 'third/gpt-cost', file: openaiCsv, format: 'csv' });
  assert.is(csvOpenai.status, 201, csvOpenai.text);
  assert.equal(csvOpenai.json.lines, [{ day: TODAY, upstream_model: 'gpt-cost', cost_minor: gpt }]);
  // Anthropic's, corrected: the day that was 5 cents off now agrees (a later bill replaces the day's figure).
  const anthropicCsv = [
    'starting_at,ending_at,amount,currency,model,cost_type,token_type,description',
    `${TODAY}T00:00:00Z,${TODAY}T23:59:59Z,${claude - 1}.5,USD,claude-a,tokens,output_tokens,"Claude A, output"`,
    `${TODAY}T00:00:00Z,${TODAY}T23:59:59Z,0.25,USD,claude-a,tokens,cache_read_input_tokens,"Claude A, cache reads"`,
    `${TODAY}T00:00:00Z,${TODAY}T23:59:59Z,900,USD,,web_search,,Web search`,
  ].join('\r\n');
  const csvAnthropic = await admin('POST', '/upstream-bills', { provider: 'anthropic', channel: 'first/claude-a', file: anthropicCsv, format: 'csv' });
  assert.is(csvAnthropic.status, 201, csvAnthropic.text);
  assert.equal(csvAnthropic.json.lines, [{ day: TODAY, upstream_model: 'claude-a', cost_minor: claude }]);
  const rec = (await admin('GET', `/upstream-bills/reconciliation?from=${TODAY}&to=${TODAY}`)).json;
  const line = (channel: string) => rec.lines.find((l: any) => l.channel === channel);
  assert.equal([line('first/claude-a').status, line('first/claude-a').bill_cost_minor], ['agrees', String(claude)]);
  assert.equal([line('third/gpt-cost').status, line('third/gpt-cost').bill_cost_minor], ['agrees', String(gpt)]);

  const head = await gw.ledger.events.headPosition();
  const refused: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ provider: 'openai', file: 'start_time,amount_value,line_item\n1,"0.5,gpt-cost' }, 'file', /not CSV/],
    [{ provider: 'openai', file: 'start_time,amount_value\n1,0.5' }, 'file', /no "line_item" column/],
    [{ provider: 'openai', file: 'start_time,amount_value,amount_currency,line_item' }, 'file', /no rows/],
    [{ provider: 'openai', file: 'start_time,amount_value,amount_currency,line_item\nyesterday,0.5,usd,"gpt-cost, input"' }, 'file', /start_time/],
    [{ provider: 'openai', file: `start_time,amount_value,amount_currency,line_item\n${start},lots,usd,"gpt-cost, input"` }, 'file', /amount\.value/],
    [{ provider: 'openai', file: `start_time,amount_value,amount_currency,line_item\n${start},0.5,eur,"gpt-cost, input"` }, 'file', /currency/],
    [{ provider: 'anthropic', file: `starting_at,amount,currency\n${TODAY}T00:00:00Z,1,USD` }, 'file', /no "model" column/],
    [{ provider: 'openai', file: openaiCsv, format: 'xml' }, 'format', /format/],
    [{ provider: 'openai', file: openaiCsv, format: 'json' }, 'file', /not JSON/],
  ];
  for (const [body, param, message] of refused) {
    const res = await admin('POST', '/upstream-bills', { channel: 'third/gpt-cost', format: 'csv', ...body });
    assert.is(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    assert.is(res.json.error?.param, param, res.text);
    assert.match(res.json.error?.message, message);
  }
  assert.is(await gw.ledger.events.headPosition(), head, 'nothing written');
});

test.run();
