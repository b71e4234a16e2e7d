// The benchmark's upstream: an OpenAI-compatible chat completions endpoint that answers at once,
// streamed or not, with usage (or, under a base URL /delay-<ms>/v1, after that many ms). Unlike test/support/upstream-double.ts it records nothing (a
// load test would grow that list without bound) and does as little work as it can, so what is
// measured is the gateway in front of it. Runs as its own process:
//   node --import tsx bench/mock-upstream.ts [port]   → prints "listening <port>"
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The reply: eight words, one completion token each. */
export const MOCK_WORDS = ['Hello ', 'from ', 'the ', 'benchmark ', 'upstream, ', 'a ', 'short ', 'reply.'];
const COMPLETION_TOKENS = MOCK_WORDS.length;

function chat(body: Buffer, res: ServerResponse): void {
  let parsed: { model?: unknown; stream?: unknown; messages?: unknown; stream_options?: { include_usage?: unknown } };
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return send(res, 400, '{"error":{"message":"body is not JSON","type":"invalid_request_error","param":null,"code":null}}');
  }
  const model = typeof parsed.model === 'string' ? parsed.model : 'mock';
  // About four characters per token, like the test double: cheap and deterministic.
  const promptTokens = Math.ceil(JSON.stringify(parsed.messages ?? []).length / 4);
  const usage = { prompt_tokens: promptTokens, completion_tokens: COMPLETION_TOKENS, total_tokens: promptTokens + COMPLETION_TOKENS };
  const id = 'chatcmpl-mock';
  const created = Math.floor(Date.now() / 1000);
  if (parsed.stream !== true) {
    return send(
      res,
      200,
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: MOCK_WORDS.join('') }, finish_reason: 'stop' }],
        usage,
      }),
    );
  }
  const frame = (choices: unknown[], extra = '') =>
    `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"choices":${JSON.stringify(choices)}${extra}}\n\n`;
  let out = frame([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
  for (const w of MOCK_WORDS) out += frame([{ index: 0, delta: { content: w }, finish_reason: null }]);
  out += frame([{ index: 0, delta: {}, finish_reason: 'stop' }]);
  if (parsed.stream_options?.include_usage === true) out += frame([], `,"usage":${JSON.stringify(usage)}`);
  out += 'data: [DONE]\n\n';
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.end(out);
}

function send(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function handle(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path.endsWith('/chat/completions')) {
      const delayMs = Number(/^\/delay-(\d+)\//.exec(path)?.[1] ?? 0);
      if (delayMs > 0) return void setTimeout(() => chat(Buffer.concat(chunks), res), delayMs);
      return chat(Buffer.concat(chunks), res);
    }
    if (req.method === 'GET' && path.endsWith('/models')) return send(res, 200, '{"object":"list","data":[{"id":"mock","object":"model","owned_by":"bench"}]}');
    send(res, 404, `{"error":{"message":"no route","type":"invalid_request_error","param":null,"code":null}}`);
  });
}

export async function startMockUpstream(port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer(handle);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { port } = await startMockUpstream(Number(process.argv[2] ?? 0));
  process.stdout.write(`listening ${port}\n`);
  process.once('SIGTERM', () => process.exit(0));
}
