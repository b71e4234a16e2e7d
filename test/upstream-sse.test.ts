import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readSse, type SseEvent } from '../src/upstream/sse.ts';

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk);
      controller.close();
    },
  });
}

async function events(chunks: (string | Uint8Array)[]): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const event of readSse(streamOf(chunks))) out.push(event);
  return out;
}

const wire = ': keep-alive\n\ndata: {"a":1}\n\nevent: ping\ndata: line one\ndata: line two\n\ndata:no-space\r\n\r\ndata: [DONE]\n\n';
const expected: SseEvent[] = [
  { event: 'message', data: '{"a":1}' },
  { event: 'ping', data: 'line one\nline two' },
  { event: 'message', data: 'no-space' },
  { event: 'message', data: '[DONE]' },
];

test('parses comments, multi-line data, event names, \\n and \\r\\n endings', async () => {
  assert.equal(await events([wire]), expected);
});

test('gives the same events however the bytes are split across reads', async () => {
  const bytes = new TextEncoder().encode(wire.replace('line one', 'línea 😀 one'));
  const want = expected.map((e) => (e.event === 'ping' ? { ...e, data: 'línea 😀 one\nline two' } : e));
  for (let size = 1; size <= 7; size++) {
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.slice(i, i + size));
    assert.equal(await events(chunks), want, `chunk size ${size}`);
  }
});

test('bare \\r line endings, split between reads, and a final event without its blank line', async () => {
  assert.equal(await events(['data: a\r', '\r', 'data: b\r', '\ndata: c']), [
    { event: 'message', data: 'a' },
    { event: 'message', data: 'b\nc' },
  ]);
});

test('quitting early cancels the underlying stream', async () => {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(new TextEncoder().encode('data: tick\n\n'));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const event of readSse(body)) {
    assert.is(event.data, 'tick');
    break;
  }
  assert.ok(cancelled);
});

test.run();
