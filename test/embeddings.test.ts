// POST /v1/embeddings end to end: the official openai client calls a gateway (real HTTP, the
// run's database) whose embedding models route to the simulated upstream and to the OpenAI double
// (after a channel that refuses connections: one failover). Covered: OpenAI's reply shape
// (checked against the OpenAPI document), float and base64 vectors (the client's default asks
// for base64 and decodes it), several inputs and token ids, the charge from the upstream's count
// at the model's multiplier, usage per model, bad input and a model without an embedding channel
// refused with nothing held or charged, an upstream that fails everywhere releasing its hold.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI from 'openai';
import type { TestGateway } from './support/gateway.ts';
import { closedPort, openAccount, startGatewayWithRoutes, type TestAccount } from './support/http.ts';
import { OPENAI_EMBEDDING_DIMENSIONS, openaiEmbeddingOf, openaiEmbeddingTokens, startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';
import { assertMatches } from './support/openapi.ts';
import { countEmbeddingTokensYielding } from '../src/upstream/tokenizer.ts';
import { SIMULATED_EMBEDDING_DIMENSIONS } from '../src/upstream/simulated/embeddings.ts';
import { streams } from '../src/ledger/events.ts';

const SIMULATED = 'emb/simulated';
const VIA_OPENAI = 'emb/openai';
const CHAT_ONLY = 'emb/chat-only';
const DOWN = 'emb/down';
const SIM_MILLI = 500;
const OPENAI_MILLI = 1250;

let double: OpenAIDouble;
let gw: TestGateway;
let account: TestAccount;
let client: OpenAI;

test.before(async () => {
  double = await startOpenAIDouble();
  const closed = await closedPort();
  gw = await startGatewayWithRoutes(
    {
      embedDouble: { type: 'openai', baseURL: `${double.url}/v1`, apiKeyEnv: 'TG_EMB_OPENAI_KEY', timeoutMs: 5000 },
      nowhere: { type: 'openai-compatible', baseURL: `http://127.0.0.1:${closed}/v1`, connectTimeoutMs: 200 },
      claudeOnly: { type: 'anthropic', baseURL: `http://127.0.0.1:${closed}`, apiKeyEnv: 'TG_EMB_ANTHROPIC_KEY' },
    },
    {
      [SIMULATED]: { provider: 'simulated', upstreamModel: 'sim-embed', multiplierMilli: SIM_MILLI },
      [VIA_OPENAI]: {
        channels: [
          { provider: 'nowhere', upstreamModel: 'text-embedding-3-small', id: 'nowhere/embed' },
          { provider: 'embedDouble', upstreamModel: 'text-embedding-3-small', id: 'double/embed' },
        ],
        multiplierMilli: OPENAI_MILLI,
      },
      [CHAT_ONLY]: { provider: 'claudeOnly', upstreamModel: 'claude-up-1', multiplierMilli: 1000 },
      [DOWN]: { provider: 'nowhere', upstreamModel: 'text-embedding-3-small', multiplierMilli: 1000 },
    },
    { env: { TG_EMB_OPENAI_KEY: 'test-openai-key', TG_EMB_ANTHROPIC_KEY: 'test-anthropic-key' } },
  );
  account = await openAccount(gw, { quota: 1_000_000 });
  client = new OpenAI({ apiKey: account.key, baseURL: gw.baseUrl, maxRetries: 0 });
});
test.after(async () => {
  await gw?.stop();
  await double?.close();
});

/** The account's stream: what was charged (ChatCharged) and held (QuotaReserved), in order. */
async function accountEvents() {
  await gw.ledger.caughtUp();
  return gw.ledger.events.readStream(streams.account(account.accountId), 0);
}
const charges = async () => (await accountEvents()).filter((e) => e.type === 'ChatCharged').map((e) => e.data as Record<string, unknown>);
const billedAt = (tokens: number, milli: number) => Math.ceil((tokens * milli) / 1000);

async function rawEmbeddings(body: unknown): Promise<{ status: number; json: Record<string, unknown> & { error?: Record<string, unknown> } }> {
  const r = await fetch(`${gw.baseUrl}/embeddings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

test('the openai client (base64 by default): one vector per input, charged from the upstream count at the multiplier', async () => {
  const input = ['Toll roads in France', 'Autobahnen have no tolls for cars'];
  const before = (await charges()).length;
  const res = await client.embeddings.create({ model: SIMULATED, input });
  assert.is(res.object, 'list');
  assert.is(res.model, SIMULATED);
  assert.is(res.data.length, 2);
  res.data.forEach((d, i) => {
    assert.is(d.index, i);
    assert.is(d.embedding.length, SIMULATED_EMBEDDING_DIMENSIONS);
    const norm = Math.sqrt(d.embedding.reduce((n, x) => n + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-4, `a unit vector (norm ${norm})`);
  });
  const tokens = await countEmbeddingTokensYielding(input);
  const usage = res.usage as OpenAI.CreateEmbeddingResponse.Usage & { billed_tokens: number };
  assert.is(usage.prompt_tokens, tokens);
  assert.is(usage.total_tokens, tokens);
  assert.is(usage.billed_tokens, billedAt(tokens, SIM_MILLI));
  const mine = (await charges()).slice(before);
  assert.is(mine.length, 1, 'one charge');
  assert.is(mine[0].api, 'embeddings');
  assert.is(mine[0].promptTokens, tokens);
  assert.is(mine[0].completionTokens, 0);
  assert.is(mine[0].billed, usage.billed_tokens, 'the ledger charged what the reply says');
});

test('float and base64 carry the same vectors; the reply matches the OpenAPI document', async () => {
  const float = await rawEmbeddings({ model: SIMULATED, input: 'same words', encoding_format: 'float', dimensions: 16 });
  assert.is(float.status, 200);
  assertMatches('CreateEmbeddingResponse', float.json);
  const b64 = await rawEmbeddings({ model: SIMULATED, input: 'same words', encoding_format: 'base64', dimensions: 16 });
  assert.is(b64.status, 200);
  const vector = (float.json.data as Array<{ embedding: number[] }>)[0].embedding;
  const bytes = Buffer.from((b64.json.data as Array<{ embedding: string }>)[0].embedding, 'base64');
  assert.is(bytes.length, 16 * 4);
  vector.forEach((x, i) => assert.ok(Math.abs(bytes.readFloatLE(i * 4) - x) < 1e-7));
  const tokenIds = await rawEmbeddings({
    model: SIMULATED,
    input: [
      [1, 2, 3],
      [4, 5],
    ],
    encoding_format: 'float',
  });
  assert.is(tokenIds.status, 200);
  assert.is((tokenIds.json.usage as { prompt_tokens: number }).prompt_tokens, 5, 'token ids count as themselves');
});

test('through the OpenAI provider after a refused channel: the double vectors and its token count, billed once', async () => {
  const input = ['a first text to embed', 'and a second, a little longer than the first'];
  const before = (await charges()).length;
  const res = await client.embeddings.create({ model: VIA_OPENAI, input, encoding_format: 'float' });
  res.data.forEach((d, i) => {
    assert.is(d.embedding.length, OPENAI_EMBEDDING_DIMENSIONS);
    openaiEmbeddingOf(input[i], OPENAI_EMBEDDING_DIMENSIONS).forEach((x, k) => assert.ok(Math.abs(d.embedding[k] - x) < 1e-9));
  });
  const tokens = openaiEmbeddingTokens(input);
  assert.is(res.usage.prompt_tokens, tokens);
  const mine = (await charges()).slice(before);
  assert.is(mine.length, 1);
  assert.is(mine[0].promptTokens, tokens, 'charged what the upstream counted, not the gateway');
  assert.is(mine[0].billed, billedAt(tokens, OPENAI_MILLI));
  assert.is(mine[0].channel, 'double/embed');
  assert.equal(
    (mine[0].failovers as Array<{ channel: string }>).map((f) => f.channel),
    ['nowhere/embed'],
  );
  const embeddingRequests = double.requests.filter((r) => r.path === '/v1/embeddings');
  assert.equal(embeddingRequests.at(-1)!.body.input, input, 'the input reached the upstream as sent');
});

test('usage shows the embedding model with its input tokens', async () => {
  const r = await fetch(`${gw.baseUrl}/usage`, { headers: { authorization: `Bearer ${account.key}` } });
  const body = (await r.json()) as { models: Array<{ model: string; requests: number; prompt_tokens: number; completion_tokens: number }> };
  const row = body.models.find((m) => m.model === SIMULATED);
  assert.ok(row, 'the simulated embedding model is in usage');
  assert.ok(row!.requests >= 3 && row!.prompt_tokens > 0);
  assert.is(row!.completion_tokens, 0);
});

test('bad input and a model without embeddings: 400 in the OpenAI shape, nothing held or charged', async () => {
  const before = (await accountEvents()).length;
  for (const [body, param] of [
    [{ model: SIMULATED, input: [] }, 'input'],
    [{ model: SIMULATED, input: '' }, 'input'],
    [{ model: SIMULATED }, 'input'],
    [{ model: SIMULATED, input: 'x', encoding_format: 'int8' }, 'encoding_format'],
    [{ model: SIMULATED, input: 'x', dimensions: 0 }, 'dimensions'],
    [{ input: 'x' }, 'model'],
  ] as const) {
    const r = await rawEmbeddings(body);
    assert.is(r.status, 400, JSON.stringify(body));
    assert.is(r.json.error?.type, 'invalid_request_error');
    assert.match(String(r.json.error?.param ?? r.json.error?.message), param);
  }
  const chatOnly = await rawEmbeddings({ model: CHAT_ONLY, input: 'x' });
  assert.is(chatOnly.status, 400);
  assert.is(chatOnly.json.error?.code, 'model_not_supported');
  assert.is((await accountEvents()).length, before, 'nothing written');
});

test('every channel down: a 502, the hold released, nothing charged', async () => {
  const before = (await accountEvents()).length;
  const r = await rawEmbeddings({ model: DOWN, input: 'nobody will answer' });
  assert.is(r.status, 502);
  assert.ok(r.json.error);
  const events = (await accountEvents()).slice(before);
  assert.equal(
    events.map((e) => e.type),
    ['QuotaReserved', 'ReservationReleased'],
  );
  assert.is((events[1].data as { reason: string }).reason, 'upstream_error');
});

test.run();
