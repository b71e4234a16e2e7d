import { test } from 'uvu';
import * as assert from 'uvu/assert';
import sharp from 'sharp';
import { createSimulatedProvider, InvalidImageError } from '../src/upstream/simulated/index.ts';
import { countMessageTokens, countTextTokens, warmTokenizer } from '../src/upstream/tokenizer.ts';
import type { ChatCall, ChatMessage, ChatStreamPart, ImageSize, ToolDefinition } from '../src/upstream/port.ts';

const KB = 1024;
const MIN_BYTES = 500 * KB;
const MAX_BYTES = 800_000; // holds for 800 KB read as either 1000 or 1024 bytes
const provider = createSimulatedProvider();

function chatCall(messages: ChatMessage[], extra: Partial<ChatCall> = {}): ChatCall {
  return { upstreamModel: 'sim-small', messages, maxTokens: 4096, params: {}, signal: new AbortController().signal, ...extra };
}

const ask = (content: string): ChatMessage[] => [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content },
];

async function collect(parts: AsyncIterable<ChatStreamPart>): Promise<ChatStreamPart[]> {
  const out: ChatStreamPart[] = [];
  for await (const part of parts) out.push(part);
  return out;
}

const textOf = (parts: ChatStreamPart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'] },
    },
  },
];

test.before(() => warmTokenizer());

test('chat is deterministic and mentions words of the last user message', async () => {
  const messages = ask('How should I store sourdough starter in the fridge?');
  const first = await provider.chat(chatCall(messages));
  const second = await provider.chat(chatCall(messages));
  assert.equal(second, first);
  assert.ok(/sourdough|starter|fridge|store/i.test(first.content), first.content);
  const otherModel = await provider.chat(chatCall(messages, { upstreamModel: 'sim-large' }));
  assert.is.not(otherModel.content, first.content);
});

test('usage is real tokenizer counts and replies are 20-80 tokens', async () => {
  for (const question of ['What is event sourcing?', 'Explain quantum tunnelling to a child', 'Rust ownership vs borrowing', '你好，世界']) {
    const messages = ask(question);
    const outcome = await provider.chat(chatCall(messages, { tools }));
    assert.is(outcome.finishReason, 'stop');
    assert.equal(outcome.toolCalls, []);
    assert.is(outcome.usage.prompt_tokens, countMessageTokens(messages, tools));
    assert.is(outcome.usage.completion_tokens, countTextTokens(outcome.content));
    assert.ok(outcome.usage.completion_tokens >= 20 && outcome.usage.completion_tokens <= 80, String(outcome.usage.completion_tokens));
  }
});

test('streaming: one token per text part, concatenation equals the non-stream reply, one finish last', async () => {
  for (const question of ['Tell me about the lighthouse keepers of Brittany', 'Grüße aus Köln 😀 und 世界']) {
    const call = chatCall(ask(question));
    const whole = await provider.chat(call);
    const parts = await collect(provider.chatStream(chatCall(ask(question))));
    const finish = parts.at(-1)!;
    assert.is(parts.filter((p) => p.type === 'finish').length, 1);
    assert.equal(finish, { type: 'finish', finishReason: 'stop', usage: whole.usage });
    assert.is(textOf(parts), whole.content);
    const texts = parts.filter((p) => p.type === 'text');
    assert.ok(texts.every((p) => p.type === 'text' && countTextTokens(p.text) >= 1));
    assert.ok(Math.abs(texts.length - whole.usage.completion_tokens) <= 2);
  }
  const ascii = await collect(provider.chatStream(chatCall(ask('Tell me about lighthouses'))));
  const finish = ascii.at(-1)!;
  assert.is(ascii.length - 1, finish.type === 'finish' ? finish.usage.completion_tokens : -1);
});

test('maxTokens cuts the reply to exactly that many tokens with finishReason length', async () => {
  const messages = ask('Describe the water cycle in detail');
  const full = await provider.chat(chatCall(messages));
  for (const maxTokens of [1, 5, 13]) {
    const cut = await provider.chat(chatCall(messages, { maxTokens }));
    assert.is(cut.finishReason, 'length');
    assert.is(cut.usage.completion_tokens, maxTokens);
    assert.is(countTextTokens(cut.content), maxTokens);
    assert.ok(full.content.startsWith(cut.content));
    const parts = await collect(provider.chatStream(chatCall(messages, { maxTokens })));
    assert.is(textOf(parts), cut.content);
    assert.equal(parts.at(-1), { type: 'finish', finishReason: 'length', usage: cut.usage });
  }
  const exact = await provider.chat(chatCall(messages, { maxTokens: full.usage.completion_tokens }));
  assert.is(exact.finishReason, 'stop');
  assert.is(exact.content, full.content);
});

test('a tool is called only when asked for, streamed as tool_call parts', async () => {
  const plain = await provider.chat(chatCall(ask('What should I wear today?'), { tools }));
  assert.is(plain.finishReason, 'stop');

  const messages = ask('Please call get_weather for Paris');
  const outcome = await provider.chat(chatCall(messages, { tools }));
  assert.is(outcome.finishReason, 'tool_calls');
  assert.is(outcome.content, '');
  assert.is(outcome.toolCalls.length, 1);
  const toolCall = outcome.toolCalls[0]!;
  assert.is(toolCall.function.name, 'get_weather');
  const args = JSON.parse(toolCall.function.arguments);
  assert.type(args.city, 'string');
  assert.is(args.days, 1);
  assert.is(outcome.usage.completion_tokens, countTextTokens('get_weather') + countTextTokens(toolCall.function.arguments));

  const parts = await collect(provider.chatStream(chatCall(messages, { tools })));
  const calls = parts.filter((p) => p.type === 'tool_call');
  assert.equal(calls[0], { type: 'tool_call', index: 0, id: toolCall.id, name: 'get_weather', arguments: '' });
  assert.is(calls.map((p) => (p.type === 'tool_call' ? (p.arguments ?? '') : '')).join(''), toolCall.function.arguments);
  assert.equal(parts.at(-1), { type: 'finish', finishReason: 'tool_calls', usage: outcome.usage });

  const forced = await provider.chat(chatCall(ask('anything'), { tools, toolChoice: { type: 'function', function: { name: 'get_weather' } } }));
  assert.is(forced.finishReason, 'tool_calls');
  const none = await provider.chat(chatCall(messages, { tools, toolChoice: 'none' }));
  assert.is(none.finishReason, 'stop');
  const afterTool = await provider.chat(
    chatCall(
      [...messages, { role: 'assistant', content: null, tool_calls: [toolCall] }, { role: 'tool', tool_call_id: toolCall.id, content: '{"temp": 21}' }],
      { tools },
    ),
  );
  assert.is(afterTool.finishReason, 'stop');
  assert.ok(afterTool.content.length > 0);
});

test('an abort mid-stream stops generation promptly', async () => {
  const slow = createSimulatedProvider({ tokenDelayMs: 20 });
  const controller = new AbortController();
  const seen: ChatStreamPart[] = [];
  const error = await (async () => {
    try {
      for await (const part of slow.chatStream(chatCall(ask('Explain tides'), { signal: controller.signal }))) {
        seen.push(part);
        if (seen.length === 3) controller.abort();
      }
    } catch (caught) {
      return caught as Error;
    }
    return undefined;
  })();
  assert.ok(error, 'the stream must throw on abort');
  assert.is(error!.name, 'AbortError');
  // Noticed before the next token: no part after the abort (how fast is the bench's business).
  assert.is(seen.length, 3, 'the abort must be noticed without waiting for the reply');
  assert.ok(seen.every((p) => p.type !== 'finish'));

  const already = new AbortController();
  already.abort();
  await provider.chat(chatCall(ask('hi'), { signal: already.signal })).then(
    () => assert.unreachable('chat must reject when already aborted'),
    (caught: Error) => assert.is(caught.name, 'AbortError'),
  );
});

const SIZES: [ImageSize, number, number][] = [
  ['1024x1024', 1024, 1024],
  ['1024x1536', 1024, 1536],
  ['1536x1024', 1536, 1024],
];

function imageCall(prompt: string, size: ImageSize, source?: { bytes: Buffer; mime: string }) {
  return { upstreamModel: 'sim-image', prompt, size, signal: new AbortController().signal, ...(source && { source }) };
}

test('generated images are real JPEGs of the requested size, 500-800 KB, deterministic', async () => {
  for (const [size, width, height] of SIZES) {
    const { jpeg } = await provider.image(imageCall('a red fox in blue snow', size));
    const meta = await sharp(jpeg).metadata();
    assert.is(meta.format, 'jpeg');
    assert.is(meta.width, width);
    assert.is(meta.height, height);
    assert.ok(jpeg.length >= MIN_BYTES && jpeg.length <= MAX_BYTES, `${size}: ${jpeg.length} bytes`);
    const again = await provider.image(imageCall('a red fox in blue snow', size));
    assert.ok(again.jpeg.equals(jpeg), 'same prompt and model => same bytes');
  }
  const other = await provider.image(imageCall('a quiet green valley', '1024x1024'));
  const first = await provider.image(imageCall('a red fox in blue snow', '1024x1024'));
  assert.not.ok(other.jpeg.equals(first.jpeg));
});

/** A 32x32 thumbnail: grain averages out, so only real changes to the picture remain. */
async function thumbnail(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).resize(32, 32, { fit: 'cover' }).removeAlpha().toColourspace('srgb').raw().toBuffer();
}

function meanAbsDiff(a: Buffer, b: Buffer): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
}

test('edits decode png/jpeg/webp/gif sources, keep the size band and really change the picture', async () => {
  // A simple striped source, in every common format.
  const stripes = Buffer.alloc(640 * 480 * 3);
  for (let i = 0; i < 640 * 480; i++) {
    const x = i % 640;
    stripes[i * 3] = x % 80 < 40 ? 230 : 20;
    stripes[i * 3 + 1] = 120;
    stripes[i * 3 + 2] = (i / 640) % 60 < 30 ? 200 : 40;
  }
  const base = sharp(stripes, { raw: { width: 640, height: 480, channels: 3 } });
  const sources: Record<string, Buffer> = {
    png: await base.clone().png().toBuffer(),
    jpeg: await base.clone().jpeg().toBuffer(),
    webp: await base.clone().webp().toBuffer(),
    gif: await base.clone().gif().toBuffer(),
  };
  for (const [format, bytes] of Object.entries(sources)) {
    for (const [size, width, height] of format === 'png' ? SIZES : SIZES.slice(0, 1)) {
      const { jpeg } = await provider.image(imageCall('make it purple and dreamy', size, { bytes, mime: `image/${format}` }));
      const meta = await sharp(jpeg).metadata();
      assert.is(meta.format, 'jpeg');
      assert.is(meta.width, width);
      assert.is(meta.height, height);
      assert.ok(jpeg.length >= MIN_BYTES && jpeg.length <= MAX_BYTES, `${format} ${size}: ${jpeg.length} bytes`);
      const difference = meanAbsDiff(await thumbnail(jpeg), await thumbnail(bytes));
      assert.ok(difference > 12, `${format}: the edit must visibly differ from the source (mean diff ${difference.toFixed(1)})`);
    }
  }
  // The hardest case: a flat grey source edited toward grey still changes visibly.
  const grey = await sharp({ create: { width: 300, height: 300, channels: 3, background: '#808080' } })
    .png()
    .toBuffer();
  const greyEdit = await provider.image(imageCall('make it grey', '1024x1024', { bytes: grey, mime: 'image/png' }));
  assert.ok(meanAbsDiff(await thumbnail(greyEdit.jpeg), await thumbnail(grey)) > 12);

  const again = await provider.image(imageCall('make it purple and dreamy', '1024x1024', { bytes: sources.png!, mime: 'image/png' }));
  const first = await provider.image(imageCall('make it purple and dreamy', '1024x1024', { bytes: sources.png!, mime: 'image/png' }));
  assert.ok(again.jpeg.equals(first.jpeg));
});

test('an undecodable source is an InvalidImageError', async () => {
  for (const bytes of [Buffer.from('definitely not an image'), Buffer.alloc(0), Buffer.from('89504e470d0a1a0a0000', 'hex')]) {
    await provider.image(imageCall('edit', '1024x1024', { bytes, mime: 'image/png' })).then(
      () => assert.unreachable('must reject'),
      (error: Error) => {
        assert.instance(error, InvalidImageError);
        assert.match(error.message, /source image/);
      },
    );
  }
});

test('image delay honours the abort signal', async () => {
  const slow = createSimulatedProvider({ imageDelayMs: 60_000 });
  const controller = new AbortController();
  const started = performance.now();
  setTimeout(() => controller.abort(), 20);
  await slow.image({ ...imageCall('slow', '1024x1024'), signal: controller.signal }).then(
    () => assert.unreachable('must reject'),
    (error: Error) => assert.is(error.name, 'AbortError'),
  );
  // Far below the 60 s delay, far above the abort's 20 ms.
  assert.ok(performance.now() - started < 10_000, 'the abort ended the delay');
});

test.run();
