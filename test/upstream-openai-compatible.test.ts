import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { rejection } from './support/double-http.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { createOpenAICompatibleProvider, InvalidImageError } from '../src/upstream/openai-compatible/index.ts';
import { UpstreamError, type ChatCall, type ChatMessage, type ChatStreamPart, type ToolDefinition } from '../src/upstream/port.ts';
import { countMessageTokens, countTextTokens, warmTokenizer } from '../src/upstream/tokenizer.ts';
import { doublePromptTokens, doubleReplyChunks, startUpstreamDouble, type RecordedFile, type UpstreamDouble } from './support/upstream-double.ts';

const KEY = 'sk-upstream-SECRET-0123456789abcdef';
const PROMPT = 'Tell me a secret story about the purple elephant named Bartholomew';
const REPLY = 'Once upon a time there was a purple elephant who loved tea.';
const messages: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: PROMPT },
];
const tools: ToolDefinition[] = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }];

function chatCall(extra: Partial<ChatCall> = {}): ChatCall {
  return { upstreamModel: 'upstream-model-7', messages, maxTokens: 256, params: {}, signal: new AbortController().signal, ...extra };
}

async function collect(parts: AsyncIterable<ChatStreamPart>): Promise<ChatStreamPart[]> {
  const out: ChatStreamPart[] = [];
  for await (const part of parts) out.push(part);
  return out;
}

const textOf = (parts: ChatStreamPart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
const lastBody = (double: UpstreamDouble) => double.requests.at(-1)!.body;

let double: UpstreamDouble;
test.before(async () => {
  warmTokenizer();
  double = await startUpstreamDouble({ reply: REPLY });
});
test.after(() => double.close());

const provider = () => createOpenAICompatibleProvider({ baseURL: double.url, apiKey: KEY, timeoutMs: 5_000 });

test('chat forwards upstreamModel, max_tokens, reasoning_effort, tools and params; maps the reply', async () => {
  const outcome = await provider().chat(
    chatCall({
      reasoningEffort: 'high',
      tools,
      toolChoice: 'auto',
      params: { temperature: 0.2, top_p: 0.9, stop: ['\n\n'], model: 'evil-override', max_tokens: 99_999, n: 3, stream: true },
    }),
  );
  const request = double.requests.at(-1)!;
  assert.is(request.path, '/v1/chat/completions');
  assert.is(request.headers.authorization, `Bearer ${KEY}`);
  assert.equal(request.body, {
    temperature: 0.2,
    top_p: 0.9,
    stop: ['\n\n'],
    model: 'upstream-model-7',
    messages,
    max_tokens: 256,
    reasoning_effort: 'high',
    tools,
    tool_choice: 'auto',
  });
  assert.equal(outcome, {
    content: REPLY,
    toolCalls: [],
    finishReason: 'stop',
    usage: { prompt_tokens: doublePromptTokens(messages), completion_tokens: doubleReplyChunks(REPLY).length },
  });
});

test('max_completion_tokens can be chosen instead; tool_choice is dropped without tools', async () => {
  const p = createOpenAICompatibleProvider({ baseURL: `${double.url}/`, apiKey: KEY, maxTokensField: 'max_completion_tokens' });
  await p.chat(chatCall({ toolChoice: 'auto' }));
  const body = lastBody(double);
  assert.is(body.max_completion_tokens, 256);
  assert.not.ok('max_tokens' in body);
  assert.not.ok('tool_choice' in body);
});

test('a reply cut at max_tokens maps to finishReason length', async () => {
  const outcome = await provider().chat(chatCall({ maxTokens: 3 }));
  assert.is(outcome.finishReason, 'length');
  assert.is(outcome.content, doubleReplyChunks(REPLY).slice(0, 3).join(''));
  assert.is(outcome.usage.completion_tokens, 3);
});

test('stream: SSE parsed into text parts plus one finish with the upstream usage', async () => {
  const parts = await collect(provider().chatStream(chatCall()));
  const body = lastBody(double);
  assert.is(body.stream, true);
  assert.equal(body.stream_options, { include_usage: true });
  assert.is(body.max_tokens, 256);
  assert.is(textOf(parts), REPLY);
  assert.is(parts.filter((p) => p.type === 'text').length, doubleReplyChunks(REPLY).length);
  assert.equal(parts.at(-1), {
    type: 'finish',
    finishReason: 'stop',
    usage: { prompt_tokens: doublePromptTokens(messages), completion_tokens: doubleReplyChunks(REPLY).length },
  });
  assert.is(parts.filter((p) => p.type === 'finish').length, 1);
});

test('stream: events split across reads parse the same; missing usage falls back to the tokenizer', async () => {
  const split = await startUpstreamDouble({ reply: REPLY, splitEvents: true, omitUsage: true });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: split.url, apiKey: KEY });
    const parts = await collect(p.chatStream(chatCall()));
    assert.is(textOf(parts), REPLY);
    assert.equal(parts.at(-1), {
      type: 'finish',
      finishReason: 'stop',
      usage: { prompt_tokens: countMessageTokens(messages), completion_tokens: countTextTokens(REPLY) },
    });
    const whole = await p.chat(chatCall());
    assert.equal(whole.usage, { prompt_tokens: countMessageTokens(messages), completion_tokens: countTextTokens(REPLY) });
  } finally {
    await split.close();
  }
});

test('tool calls map in plain and streamed replies', async () => {
  const toolDouble = await startUpstreamDouble({ toolCall: { name: 'lookup', arguments: '{"q": "elephants", "limit": 3}' } });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: toolDouble.url, apiKey: KEY });
    const outcome = await p.chat(chatCall({ tools }));
    assert.is(outcome.finishReason, 'tool_calls');
    assert.equal(outcome.toolCalls, [{ id: 'call_double_1', type: 'function', function: { name: 'lookup', arguments: '{"q": "elephants", "limit": 3}' } }]);
    const parts = await collect(p.chatStream(chatCall({ tools })));
    const calls = parts.filter((part) => part.type === 'tool_call');
    assert.equal(calls[0], { type: 'tool_call', index: 0, id: 'call_double_1', name: 'lookup', arguments: '' });
    assert.is(calls.map((c) => (c.type === 'tool_call' ? (c.arguments ?? '') : '')).join(''), '{"q": "elephants", "limit": 3}');
    const finish = parts.at(-1)!;
    assert.is(finish.type === 'finish' && finish.finishReason, 'tool_calls');
  } finally {
    await toolDouble.close();
  }
});

test('an upstream 500 is an UpstreamError that names neither the key nor the prompt', async () => {
  // A hostile upstream echoing everything back.
  double.failNext(500, { error: { message: `boom for key ${KEY} on prompt ${PROMPT}`, code: 'server_error' } });
  const error = await rejection(provider().chat(chatCall()));
  assert.instance(error, UpstreamError);
  assert.is((error as UpstreamError).status, 500);
  assert.match(error.message, /HTTP 500/);
  assert.not.ok(error.message.includes(KEY));
  assert.not.ok(error.message.includes(PROMPT));
  assert.not.ok(error.message.includes('Bartholomew'));

  double.failNext(429, { error: { message: `partial echo: ...elephant named Bartholomew`, type: 'rate_limit' } });
  const partial = await rejection(collect(provider().chatStream(chatCall())));
  assert.instance(partial, UpstreamError);
  assert.is((partial as UpstreamError).status, 429);
  assert.not.ok(partial.message.includes('Bartholomew'));

  double.failNext(404, { error: { message: 'The model upstream-model-7 does not exist', code: 'model_not_found' } });
  const helpful = await rejection(provider().chat(chatCall()));
  assert.match(helpful.message, /model_not_found/);
});

test('malformed bodies, dead upstreams and silence become UpstreamError', async () => {
  double.failNext(200, 'this is not json');
  assert.instance(await rejection(provider().chat(chatCall())), UpstreamError);
  double.failNext(200, { choices: [] });
  assert.instance(await rejection(provider().chat(chatCall())), UpstreamError);

  const dead = createServer();
  await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
  const port = (dead.address() as AddressInfo).port;
  await new Promise<void>((resolve) => dead.close(() => resolve()));
  const unreachable = createOpenAICompatibleProvider({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY });
  const network = await rejection(unreachable.chat(chatCall()));
  assert.instance(network, UpstreamError);
  assert.match(network.message, /request failed \(ECONNREFUSED\)/);
  assert.not.ok(network.message.includes(KEY));

  const slow = await startUpstreamDouble({ responseDelayMs: 400 });
  try {
    const impatient = createOpenAICompatibleProvider({ baseURL: slow.url, apiKey: KEY, timeoutMs: 50 });
    const timedOut = await rejection(impatient.chat(chatCall()));
    assert.instance(timedOut, UpstreamError);
    assert.match(timedOut.message, /timed out/);
  } finally {
    await slow.close();
  }
});

test('an abort mid-stream cancels the upstream request and surfaces as an abort, not an upstream failure', async () => {
  const slow = await startUpstreamDouble({ reply: REPLY, chunkDelayMs: 40 });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: slow.url, apiKey: KEY });
    const controller = new AbortController();
    const seen: ChatStreamPart[] = [];
    const error = await rejection(
      (async () => {
        for await (const part of p.chatStream(chatCall({ signal: controller.signal }))) {
          seen.push(part);
          if (part.type === 'text') controller.abort();
        }
      })(),
    );
    assert.is(error.name, 'AbortError');
    assert.not.instance(error, UpstreamError);
    assert.is(seen.length, 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.is(slow.abandoned, 1, 'the upstream response must be abandoned');

    // A consumer that simply stops reading also releases the upstream.
    for await (const part of p.chatStream(chatCall())) if (part.type === 'text') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.is(slow.abandoned, 2);
  } finally {
    await slow.close();
  }
});

/** A one-off upstream whose stream behaviour the test scripts byte by byte. */
async function rawUpstream(handler: (res: import('node:http').ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const chunk = (delta: unknown, finish: string | null = null) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

test('stream failures: cut connection, error event, stall, malformed chunk', async () => {
  const scripts: [string, (res: import('node:http').ServerResponse) => void, RegExp][] = [
    [
      'cut',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ content: 'Hel' }));
        setTimeout(() => res.destroy(), 20);
      },
      /./,
    ],
    [
      'ended early',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(chunk({ content: 'Hel' }));
      },
      /ended before it finished/,
    ],
    [
      'error event',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ content: 'Hel' }));
        res.end(`data: ${JSON.stringify({ error: { message: `overloaded, key ${KEY}`, type: 'overloaded_error' } })}\n\n`);
      },
      /overloaded_error/,
    ],
    [
      'stall',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ content: 'Hel' }));
      },
      /timed out/,
    ],
    [
      'malformed',
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('data: {not json\n\n');
      },
      /malformed/,
    ],
  ];
  for (const [name, script, message] of scripts) {
    const upstream = await rawUpstream(script);
    try {
      const p = createOpenAICompatibleProvider({ baseURL: upstream.url, apiKey: KEY, timeoutMs: 150 });
      const seen: ChatStreamPart[] = [];
      const error = await rejection(
        (async () => {
          for await (const part of p.chatStream(chatCall())) seen.push(part);
        })(),
      );
      assert.instance(error, UpstreamError, name);
      assert.match(error.message, message, name);
      assert.not.ok(error.message.includes(KEY), name);
      assert.equal(seen, name === 'malformed' ? [] : [{ type: 'text', text: 'Hel' }], name);
    } finally {
      await upstream.close();
    }
  }
});

test('stream: a slow consumer does not trip the upstream silence timer', async () => {
  const trickle = await startUpstreamDouble({ reply: REPLY, chunkDelayMs: 10 });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: trickle.url, apiKey: KEY, timeoutMs: 60 });
    let text = '';
    for await (const part of p.chatStream(chatCall())) {
      // The client stalls far longer than the timeout while the upstream is still sending.
      if (part.type === 'text' && text === '') await new Promise((resolve) => setTimeout(resolve, 150));
      if (part.type === 'text') text += part.text;
    }
    assert.is(text, REPLY);
  } finally {
    await trickle.close();
  }
});

test('stream: an upstream that answers with plain JSON is still turned into parts', async () => {
  const upstream = await rawUpstream((res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        choices: [{ index: 0, message: { role: 'assistant', content: 'All at once.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 9, completion_tokens: 4 },
      }),
    );
  });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: upstream.url, apiKey: KEY });
    assert.equal(await collect(p.chatStream(chatCall())), [
      { type: 'text', text: 'All at once.' },
      { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 9, completion_tokens: 4 } },
    ]);
  } finally {
    await upstream.close();
  }
});

test('image generation posts b64_json requests and returns a JPEG of the requested size', async () => {
  const { jpeg } = await provider().image({ upstreamModel: 'img-up', prompt: 'a lighthouse', size: '1536x1024', signal: new AbortController().signal });
  const request = double.requests.at(-1)!;
  assert.is(request.path, '/v1/images/generations');
  assert.equal(request.body, { model: 'img-up', prompt: 'a lighthouse', size: '1536x1024', n: 1, response_format: 'b64_json' });
  const meta = await sharp(jpeg).metadata();
  assert.is(meta.format, 'jpeg');
  assert.is(meta.width, 1536);
  assert.is(meta.height, 1024);
});

test('PNG from the upstream is converted to JPEG', async () => {
  const pngDouble = await startUpstreamDouble({ imageFormat: 'png' });
  try {
    const p = createOpenAICompatibleProvider({ baseURL: pngDouble.url, apiKey: KEY });
    const { jpeg } = await p.image({ upstreamModel: 'img-up', prompt: 'x', size: '1024x1536', signal: new AbortController().signal });
    const meta = await sharp(jpeg).metadata();
    assert.is(meta.format, 'jpeg');
    assert.equal([meta.width, meta.height], [1024, 1536]);
  } finally {
    await pngDouble.close();
  }
});

test('image edits go out as multipart with the source file; bad sources never reach the upstream', async () => {
  const source = await sharp({ create: { width: 200, height: 120, channels: 3, background: '#ff8800' } })
    .webp()
    .toBuffer();
  const { jpeg } = await provider().image({
    upstreamModel: 'img-up',
    prompt: 'make it blue',
    size: '1024x1024',
    signal: new AbortController().signal,
    source: { bytes: source, mime: 'image/webp' },
  });
  assert.is((await sharp(jpeg).metadata()).format, 'jpeg');
  const request = double.requests.at(-1)!;
  assert.is(request.path, '/v1/images/edits');
  assert.match(String(request.headers['content-type']), /^multipart\/form-data/);
  const { image, ...fields } = request.body as Record<string, unknown>;
  assert.equal(fields, { model: 'img-up', prompt: 'make it blue', size: '1024x1024', n: '1', response_format: 'b64_json' });
  const file = image as RecordedFile;
  assert.is(file.type, 'image/webp');
  assert.ok(file.bytes.equals(source));

  const before = double.requests.length;
  const invalid = await rejection(
    provider().image({
      upstreamModel: 'img-up',
      prompt: 'x',
      size: '1024x1024',
      signal: new AbortController().signal,
      source: { bytes: Buffer.from('not an image'), mime: 'image/png' },
    }),
  );
  assert.instance(invalid, InvalidImageError);
  assert.is(double.requests.length, before);

  double.failNext(400, { error: { message: `Your prompt "${'make it blue'}" was rejected by the safety system`, code: 'content_policy_violation' } });
  const refused = await rejection(
    provider().image({ upstreamModel: 'img-up', prompt: 'make it blue', size: '1024x1024', signal: new AbortController().signal }),
  );
  assert.instance(refused, UpstreamError);
  assert.not.ok(refused.message.includes('make it blue'));
  assert.not.ok(refused.message.includes(KEY));
});

test.run();
