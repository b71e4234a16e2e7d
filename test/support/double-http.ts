// The HTTP side shared by the Anthropic and OpenAI doubles: a node:http server on 127.0.0.1,
// request recording, the fault prelude (status, delays, hangs, garbage), an SSE writer that
// applies the stream faults, and the deterministic token accounting both doubles use.
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import { FaultScript, type Fault } from './double-faults.ts';

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
  /** Parsed JSON, or the multipart fields (files as RecordedFile, repeated fields as arrays). */
  body: Record<string, unknown>;
}

/** What every double returns. `url` is the origin, without /v1. */
export interface DoubleHandle {
  url: string;
  requests: RecordedRequest[];
  /** Queue faults, consumed one per request (any route). */
  script(...faults: Fault[]): void;
  /** The fault used when the queue is empty; null for none. */
  setDefault(fault: Fault | null): void;
  /** Responses the client left before they were complete (cuts made by a fault are not counted). */
  readonly abandoned: number;
  /** Requests received. */
  readonly calls: number;
  close(): Promise<void>;
}

/** One request as a handler sees it, after the faults that pre-empt it were applied. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  path: string;
  body: Record<string, unknown>;
  /** The body was not valid JSON (body is then {}). */
  invalidJson: boolean;
  fault: Fault;
  /** Send a JSON answer; a `cutAfterEvents` fault cuts it half-way. */
  json(status: number, body: unknown, headers?: Record<string, string>): Promise<void>;
  /** Start an SSE answer whose events go through the stream faults. */
  sse(errorEvent: (eventsSent: number) => string, headers?: Record<string, string>): SseWriter;
}

export interface DoubleServerOptions {
  /** The API's error body for a status, used by status faults without a body. */
  errorBody(status: number, message: string): unknown;
  /** Headers added to every answer (e.g. a request id). */
  headers(): Record<string, string>;
  handle(exchange: Exchange): Promise<void>;
}

export async function startDoubleServer(options: DoubleServerOptions): Promise<DoubleHandle> {
  const requests: RecordedRequest[] = [];
  const faults = new FaultScript();
  const cut = new WeakSet<ServerResponse>();
  let abandoned = 0;
  let calls = 0;

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    calls++;
    const path = (req.url ?? '/').split('?')[0]!;
    const parsed = await parseBody(raw, req.headers['content-type'] ?? '');
    requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body: parsed.body });
    res.on('close', () => {
      if (!res.writableFinished && !cut.has(res)) abandoned++;
    });
    const fault = faults.take();
    const common = options.headers();

    if (fault.firstByteDelayMs) await sleep(fault.firstByteDelayMs);
    if (res.destroyed) return;
    if (fault.hang) {
      if (!res.closed) await new Promise((resolve) => res.once('close', resolve));
      return;
    }
    if (fault.status) {
      const extra = fault.status === 429 ? { 'retry-after': '1', ...fault.headers } : fault.headers;
      return sendJson(res, fault.status, fault.body ?? options.errorBody(fault.status, `injected ${fault.status}`), { ...common, ...extra });
    }
    if (fault.garbage) {
      // The content types are the real ones, so the SDKs try to parse the body and fail.
      if (parsed.body.stream === true) {
        res.writeHead(200, { ...common, 'content-type': 'text/event-stream; charset=utf-8' });
        return void res.end('event: message\ndata: <html><body>502 Bad Gateway</body></html>\n\n');
      }
      return sendJson(res, 200, '{"id": "garbage", "choices": [', common);
    }

    const exchange: Exchange = {
      req,
      res,
      path,
      fault,
      body: parsed.body,
      invalidJson: parsed.invalidJson,
      json: async (status, body, headers) => {
        const all = { ...common, ...headers };
        if (fault.cutAfterEvents === undefined) return sendJson(res, status, body, all);
        const text = JSON.stringify(body);
        res.writeHead(status, { ...all, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        await new Promise<void>((resolve) => res.write(text.slice(0, Math.floor(text.length / 2)), () => resolve()));
        cut.add(res);
        res.destroy();
      },
      sse: (errorEvent, headers) => new SseWriter(res, fault, errorEvent, { ...common, ...headers }, () => cut.add(res)),
    };
    await options.handle(exchange);
  }

  const server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, options.errorBody(500, `double crashed: ${String(error)}`), {});
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script: (...list) => faults.script(...list),
    setDefault: (fault) => faults.setDefault(fault),
    get abandoned() {
      return abandoned;
    },
    get calls() {
      return calls;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Writes SSE events one by one, applying cutAfterEvents, errorEventAfter and chunkDelayMs. */
export class SseWriter {
  #sent = 0;
  #lastWrite: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly fault: Fault,
    private readonly errorEvent: (eventsSent: number) => string,
    headers: Record<string, string>,
    private readonly markCut: () => void,
  ) {
    res.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  }

  /** False once the stream is over (client gone, or a fault ended it): stop producing events. */
  get open(): boolean {
    return !this.#stopped && !this.res.destroyed;
  }

  /** Write one complete SSE event (its text ends with a blank line). */
  async event(text: string): Promise<boolean> {
    if (!(await this.#mayContinue())) return false;
    this.#write(text);
    this.#sent++;
    if (this.fault.chunkDelayMs) await sleep(this.fault.chunkDelayMs);
    return this.open;
  }

  /** End the stream, with an optional last piece that does not count as an event (e.g. `data: [DONE]`). */
  async end(tail = ''): Promise<void> {
    if (!(await this.#mayContinue())) return;
    this.#stopped = true;
    this.res.end(tail);
  }

  async #mayContinue(): Promise<boolean> {
    if (!this.open) return false;
    if (this.fault.errorEventAfter === this.#sent) {
      this.#stopped = true;
      this.res.end(this.errorEvent(this.#sent));
      return false;
    }
    if (this.fault.cutAfterEvents === this.#sent) {
      this.#stopped = true;
      await this.#lastWrite; // what was sent reaches the client before the socket goes
      this.markCut();
      this.res.destroy();
      return false;
    }
    return true;
  }

  #write(text: string): void {
    this.#lastWrite = new Promise((resolve) => this.res.write(text, () => resolve()));
  }
}

/** A string body is sent verbatim, so faults can send malformed JSON. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function parseBody(raw: Buffer, contentType: string): Promise<{ body: Record<string, unknown>; invalidJson: boolean }> {
  if (raw.length === 0) return { body: {}, invalidJson: false };
  if (contentType.startsWith('multipart/form-data')) {
    // The platform's Response parses multipart, so the doubles need no dependency for it.
    const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': contentType } }).formData();
    const fields: Record<string, unknown> = {};
    for (const [name, value] of form.entries()) {
      const field =
        typeof value === 'string'
          ? value
          : await value.arrayBuffer().then((buffer): RecordedFile => {
              const bytes = Buffer.from(buffer);
              return { filename: value.name, type: value.type, size: bytes.length, bytes };
            });
      const previous = fields[name];
      fields[name] = previous === undefined ? field : Array.isArray(previous) ? [...previous, field] : [previous, field];
    }
    return { body: fields, invalidJson: false };
  }
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return { body: parsed as Record<string, unknown>, invalidJson: false };
  } catch {
    // fall through
  }
  return { body: {}, invalidJson: true };
}

// ---- Deterministic token accounting -------------------------------------------------------
// Prompt: every segment (a message, a content block, a tool definition…) costs
// ceil(JSON.stringify(segment).length / 4) tokens. Output: one token per word of text
// (the way the doubles stream it), and one per 4 characters of tool-call JSON or of structured
// output (JSON answering a schema).

export function jsonTokens(value: unknown): number {
  return Math.ceil(JSON.stringify(value ?? null).length / 4);
}

/** Text as streamed: one piece per word (with its trailing space), one output token each. */
export function wordPieces(text: string): string[] {
  return text.match(/\S+\s*/g) ?? [];
}

/** Tool-call JSON as streamed: 4-character pieces, one output token each. */
export function jsonPieces(json: string): string[] {
  return json.match(/[\s\S]{1,4}/g) ?? [];
}

/**
 * Structured output as the doubles give it: JSON valid against the schema, the same for the same
 * request (what a model under constrained decoding returns), streamed and counted as JSON pieces.
 */
export function schemaInstance(schema: unknown, request: unknown): string {
  const seed = createHash('sha256').update(JSON.stringify(request)).digest().readUInt32LE(0);
  return JSON.stringify(generateSync((schema ?? {}) as JsonSchema, { seed, maxDepth: 16 }));
}

/**
 * Keys for every prefix of a list of segments: key[i] names segments[0..i] (with the model),
 * chained so equal prefixes give equal keys. The doubles' prompt caches are sets of these.
 */
export function prefixKeys(model: string, segments: unknown[]): string[] {
  let key = createHash('sha256').update(model).digest('hex');
  return segments.map((segment) => (key = createHash('sha256').update(key).update(JSON.stringify(segment)).digest('hex')));
}

/** A short deterministic id suffix, so ids differ per request and look like the real ones. */
export function idSuffix(seed: string | number, length = 24): string {
  return createHash('sha256').update(String(seed)).digest('base64url').replace(/[-_]/g, 'x').slice(0, length);
}

/** What a promise rejected with; a promise that resolves fails the test. */
export async function rejection<T = any>(promise: Promise<unknown>): Promise<T> {
  try {
    await promise;
  } catch (error) {
    return error as T;
  }
  throw new Error('expected a rejection');
}
