// A local OpenAI-compatible upstream for tests and benchmarks: chat completions (plain and
// SSE, with usage in the last chunk when include_usage is set) and images (b64_json JPEG).
// Replies are deterministic and cheap so it can sit behind load tests. A response_format of
// json_schema is answered with JSON valid against the schema, json_object with {"answer": reply}
// (one chunk and one completion token each).
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import sharp from 'sharp';
import { schemaInstance } from './double-http.ts';

export interface UpstreamDoubleOptions {
  /** The assistant text; a function sees the parsed request body. */
  reply?: string | ((body: Record<string, unknown>) => string);
  /** When set and the request carries tools, answer with this tool call instead of text. */
  toolCall?: { name: string; arguments: string };
  /** Pause before the response headers (to exercise timeouts). */
  responseDelayMs?: number;
  /** Pause between SSE chunks (to exercise aborts mid-stream). */
  chunkDelayMs?: number;
  /** Write every SSE event in two halves, split mid-line, to exercise parsers. */
  splitEvents?: boolean;
  /** Never report usage, even when include_usage is set. */
  omitUsage?: boolean;
  /** Format of the images returned in b64_json. */
  imageFormat?: 'jpeg' | 'png';
}

export interface RecordedFile {
  filename: string;
  type: string;
  size: number;
  bytes: Buffer;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON, or the multipart fields (files as RecordedFile). */
  body: Record<string, unknown>;
}

export interface UpstreamDouble {
  /** Base URL including /v1, as an SDK or adapter expects. */
  url: string;
  requests: RecordedRequest[];
  /** The next request (any route) answers `status` with `body` (default: an OpenAI error body; a string is sent verbatim). */
  failNext(status: number, body?: unknown): void;
  /** Responses the client abandoned before they were complete. */
  readonly abandoned: number;
  close(): Promise<void>;
}

const DEFAULT_REPLY = 'Hello from the upstream double, a small and predictable reply.';

/** The double's usage accounting: ~4 characters per prompt token, one token per reply word. */
export function doublePromptTokens(messages: unknown): number {
  return Math.ceil(JSON.stringify(messages ?? []).length / 4);
}

/** The reply split as the double streams it: one chunk (and one completion token) per word. */
export function doubleReplyChunks(reply: string): string[] {
  return reply.match(/\S+\s*/g) ?? [];
}

export async function startUpstreamDouble(options: UpstreamDoubleOptions = {}): Promise<UpstreamDouble> {
  const requests: RecordedRequest[] = [];
  const failures: { status: number; body: unknown }[] = [];
  const images = new Map<string, Promise<string>>();
  let abandoned = 0;

  const imageB64 = (size: string): Promise<string> => {
    const format = options.imageFormat ?? 'jpeg';
    const key = `${size}:${format}`;
    let cached = images.get(key);
    if (!cached) {
      const [width, height] = (/^\d+x\d+$/.test(size) ? size : '1024x1024').split('x').map(Number) as [number, number];
      const canvas = sharp({ create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } } });
      cached = (format === 'png' ? canvas.png() : canvas.jpeg()).toBuffer().then((bytes) => bytes.toString('base64'));
      images.set(key, cached);
    }
    return cached;
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = (req.url ?? '/').split('?')[0]!;
    const body = await parseBody(raw, req.headers['content-type'] ?? '');
    requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body });
    res.on('close', () => {
      if (!res.writableFinished) abandoned++;
    });
    if (options.responseDelayMs) await sleep(options.responseDelayMs);
    const failure = failures.shift();
    if (failure) return sendJson(res, failure.status, failure.body);
    if (req.method === 'GET' && path.endsWith('/models')) {
      return sendJson(res, 200, { object: 'list', data: [{ id: 'double-model', object: 'model', owned_by: 'double' }] });
    }
    if (req.method !== 'POST') return sendJson(res, 404, errorBody('not found'));
    if (path.endsWith('/chat/completions')) return chat(body, res);
    if (path.endsWith('/images/generations') || path.endsWith('/images/edits')) {
      const size = typeof body.size === 'string' ? body.size : '1024x1024';
      return sendJson(res, 200, { created: Math.floor(Date.now() / 1000), data: [{ b64_json: await imageB64(size) }] });
    }
    return sendJson(res, 404, errorBody(`no route for ${path}`));
  }

  async function chat(body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const id = `chatcmpl-double-${requests.length}`;
    const model = String(body.model ?? 'double-model');
    const created = Math.floor(Date.now() / 1000);
    const cap = Number(body.max_tokens ?? body.max_completion_tokens ?? Infinity);
    const wantsTool = options.toolCall && Array.isArray(body.tools) && body.tools.length > 0;
    const reply = structuredReply(body) ?? (typeof options.reply === 'function' ? options.reply(body) : (options.reply ?? DEFAULT_REPLY));
    const all = wantsTool ? [] : doubleReplyChunks(reply);
    const chunks = all.slice(0, cap);
    const finish = wantsTool ? 'tool_calls' : chunks.length < all.length ? 'length' : 'stop';
    const toolCall = wantsTool ? { index: 0, id: 'call_double_1', type: 'function', function: options.toolCall } : undefined;
    const usage = {
      prompt_tokens: doublePromptTokens(body.messages),
      completion_tokens: wantsTool ? doubleReplyChunks(options.toolCall!.arguments).length : chunks.length,
    };
    usage.completion_tokens = Math.min(usage.completion_tokens, cap);
    const totalUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };

    if (body.stream !== true) {
      const message = { role: 'assistant', content: wantsTool ? null : chunks.join(''), ...(toolCall && { tool_calls: [toolCall] }) };
      return sendJson(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, finish_reason: finish }],
        ...(!options.omitUsage && { usage: totalUsage }),
      });
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(': double keep-alive\n\n');
    const frame = { id, object: 'chat.completion.chunk', created, model };
    const events: unknown[] = [{ ...frame, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
    if (toolCall) {
      events.push({
        ...frame,
        choices: [{ index: 0, delta: { tool_calls: [{ ...toolCall, function: { name: toolCall.function!.name, arguments: '' } }] }, finish_reason: null }],
      });
      for (const piece of doubleReplyChunks(toolCall.function!.arguments)) {
        events.push({ ...frame, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null }] });
      }
    }
    for (const content of chunks) events.push({ ...frame, choices: [{ index: 0, delta: { content }, finish_reason: null }] });
    events.push({ ...frame, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    if (includeUsage && !options.omitUsage) events.push({ ...frame, choices: [], usage: totalUsage });
    for (const event of events) {
      if (res.destroyed) return;
      await writeEvent(res, `data: ${JSON.stringify(event)}\n\n`);
      if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
    }
    if (!res.destroyed) res.end('data: [DONE]\n\n');
  }

  /** The JSON a response_format asks for, or undefined for text. */
  function structuredReply(body: Record<string, unknown>): string | undefined {
    const format = body.response_format as { type?: unknown; json_schema?: { schema?: unknown } } | undefined;
    if (format?.type === 'json_schema') return schemaInstance(format.json_schema?.schema, body);
    if (format?.type === 'json_object') return JSON.stringify({ answer: typeof options.reply === 'string' ? options.reply : DEFAULT_REPLY });
    return undefined;
  }

  async function writeEvent(res: ServerResponse, text: string): Promise<void> {
    if (!options.splitEvents) {
      res.write(text);
      return;
    }
    const middle = Math.floor(text.length / 2);
    res.write(text.slice(0, middle));
    await sleep(1); // separate reads on the client side
    if (!res.destroyed) res.write(text.slice(middle));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, errorBody(`double crashed: ${String(error)}`));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    failNext(status, body) {
      failures.push({ status, body: body ?? errorBody(`injected failure ${status}`) });
    },
    get abandoned() {
      return abandoned;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function errorBody(message: string): unknown {
  return { error: { message, type: 'server_error', code: null } };
}

/** A string body is sent verbatim, so tests can inject malformed JSON. */
function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function parseBody(raw: Buffer, contentType: string): Promise<Record<string, unknown>> {
  if (raw.length === 0) return {};
  if (contentType.startsWith('multipart/form-data')) {
    // The platform's Response can parse multipart, so the double needs no dependency for it.
    const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': contentType } }).formData();
    const fields: Record<string, unknown> = {};
    for (const [name, value] of form.entries()) {
      if (typeof value === 'string') fields[name] = value;
      else {
        const bytes = Buffer.from(await value.arrayBuffer());
        fields[name] = { filename: value.name, type: value.type, size: bytes.length, bytes } satisfies RecordedFile;
      }
    }
    return fields;
  }
  try {
    return JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    return { raw: raw.toString('utf8') };
  }
}
