// The official openai SDK against a gateway started as a separate process, exactly as a user
// would: only the base URL changes. Every body is checked against OpenAI's OpenAPI schemas, and
// the read models (subscription, usage) must account for each call to the token.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { assertMatches } from './support/openapi.ts';

let gw: GatewayProcess;
let client: OpenAI;

interface Sub {
  quota: { used: number; reserved: number; remaining: number };
  remaining_tokens: number;
}
async function subscription(): Promise<Sub> {
  const r = await fetch(`${gw.baseUrl}/subscription`, { headers: { authorization: `Bearer ${gw.key}` } });
  return r.json() as Promise<Sub>;
}

test.before(async () => {
  gw = await spawnGateway();
  client = new OpenAI({ apiKey: gw.key, baseURL: gw.baseUrl, maxRetries: 0 });
});
test.after(async () => {
  await gw.stop();
});

test('models.list returns the active models with multipliers and aliases', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.includes('cx/gen-6-terra') && ids.includes('alpha-haiku-4.5'));
  assert.is(ids.length, 11);
  const terra = page.data.find((m) => m.id === 'cx/gen-6-terra') as unknown as { multiplier: number; aliases: string[] };
  assert.equal([terra.multiplier, terra.aliases], [1.25, ['gen-6-terra']]);
  const raw = await (await fetch(`${gw.baseUrl}/models`, { headers: { authorization: `Bearer ${gw.key}` } })).json();
  assertMatches('ListModelsResponse', raw);
});

test('chat completion (alias, reasoning effort) is billed at the multiplier', async () => {
  const before = await subscription();
  const { data, response } = await client.chat.completions
    .create({
      model: 'gen-6-terra',
      reasoning_effort: 'high' as never,
      messages: [{ role: 'user', content: 'Explain toll roads in one paragraph.' }],
    })
    .withResponse();
  assertMatches('CreateChatCompletionResponse', data);
  assert.ok(data.choices[0].message.content!.length > 0);
  assert.is(data.model, 'cx/gen-6-terra');
  const usage = data.usage!;
  const billed = Math.ceil(((usage.prompt_tokens + usage.completion_tokens) * 1250) / 1000);
  assert.is(Number(response.headers.get('x-tollgate-billed-tokens')), billed);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, billed);
  assert.is(after.quota.reserved, 0);
});

test('streamed chat with include_usage: chunks validate and the stream is billed, not free', async () => {
  const before = await subscription();
  const stream = await client.chat.completions.create({
    model: 'alpha-opus-5',
    stream: true,
    stream_options: { include_usage: true },
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Stream me a sentence.' }] },
    ],
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  let finish: string | null = null;
  for await (const chunk of stream) {
    assertMatches('CreateChatCompletionStreamResponse', chunk);
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(text.length > 10);
  assert.is(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 0);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, Math.ceil(((usage!.prompt_tokens + usage!.completion_tokens) * 1750) / 1000));
});

test('images.generate returns a 1024-class JPEG of 500-800 KB, charged 45000 x multiplier', async () => {
  const before = await subscription();
  const res = await client.images.generate({ model: 'cx/gen-6-sol', prompt: 'a lighthouse at dusk', size: '1536x1024' });
  assertMatches('ImagesResponse', res);
  const jpeg = Buffer.from(res.data![0].b64_json!, 'base64');
  const meta = await sharp(jpeg).metadata();
  assert.equal([meta.format, meta.width, meta.height], ['jpeg', 1536, 1024]);
  assert.ok(jpeg.length >= 500_000 && jpeg.length <= 800_000, `size ${jpeg.length}`);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, 67_500);
});

test('images.edit with an uploaded file (multipart) transforms the source', async () => {
  const source = await sharp({ create: { width: 512, height: 512, channels: 3, background: { r: 30, g: 120, b: 200 } } })
    .png()
    .toBuffer();
  const before = await subscription();
  const res = await client.images.edit({
    model: 'alpha-haiku-4.5',
    prompt: 'make it warmer',
    image: await toFile(source, 'source.png', { type: 'image/png' }),
  });
  assertMatches('ImagesResponse', res);
  const jpeg = Buffer.from(res.data![0].b64_json!, 'base64');
  const meta = await sharp(jpeg).metadata();
  assert.equal([meta.format, meta.width, meta.height], ['jpeg', 1024, 1024]);
  const after = await subscription();
  assert.is(after.quota.used - before.quota.used, 45_000);
});

test('errors come back as OpenAI errors the SDK understands', async () => {
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
    assert.unreachable();
  } catch (err) {
    assert.instance(err, OpenAI.PermissionDeniedError);
    assert.is((err as InstanceType<typeof OpenAI.APIError>).code, 'model_not_found');
  }
  const bad = new OpenAI({ apiKey: 'sk_svc_' + 'x'.repeat(43), baseURL: gw.baseUrl, maxRetries: 0 });
  try {
    await bad.models.list();
    assert.unreachable();
  } catch (err) {
    assert.instance(err, OpenAI.AuthenticationError);
  }
});

test('the log carries ids and numbers, never the key or the prompt', async () => {
  await new Promise((r) => setTimeout(r, 200));
  const log = gw
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'));
  assert.ok(log.length >= 6, 'one line per request');
  const joined = log.join('\n');
  assert.not.ok(joined.includes(gw.key), 'no key in logs');
  assert.not.ok(joined.includes('toll roads'), 'no prompt in logs');
  assert.not.ok(joined.includes('lighthouse'), 'no image prompt in logs');
  const chat = log.map((l) => JSON.parse(l)).find((e) => e.route === '/v1/chat/completions' && e.status === 200);
  assert.ok(chat.keyId && chat.account && chat.model && chat.billed > 0 && chat.latencyMs > 0 && chat.requestId);
});

test.run();
