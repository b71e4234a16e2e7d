// HTTP plumbing for OpenAI-compatible upstreams: one place that owns timeouts, aborts and
// turning failures into UpstreamError messages that never carry the key or the prompt.
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { UpstreamError } from './port.ts';
import { abortError } from './abort.ts';
import { redactSecretShapes } from '../secret-shapes.ts';

export interface UpstreamTarget {
  baseURL: string;
  apiKey: string;
  /** Longest silence accepted once the response has begun (between stream chunks). */
  timeoutMs: number;
  /** Longest wait for the TCP (and TLS) connection; default: timeoutMs. */
  connectTimeoutMs?: number;
  /** Longest wait from sending the request to the response's first byte (its status line); default: timeoutMs. */
  firstByteTimeoutMs?: number;
  /** Headers that authenticate and version every request; default `authorization: Bearer <apiKey>`. */
  headers?: Record<string, string>;
}

const MAX_DETAIL_CHARS = 200;
const ECHO_WINDOW = 16;

/**
 * Aborts the request when the caller aborts or when the upstream is silent for `ms`.
 * `touch()` restarts the silence window (every streamed chunk counts as life).
 */
export class Deadline {
  timedOut = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly watchers = new Set<(error: Error) => void>();
  private stopped: Error | null = null;

  constructor(
    private readonly callSignal: AbortSignal,
    private readonly ms: number,
  ) {
    if (callSignal.aborted) this.stopped = abortError(callSignal);
    else callSignal.addEventListener('abort', () => this.stop(abortError(callSignal)), { once: true });
    this.touch();
  }

  /** Calls `fn` once if the call is aborted or times out (at once if it already has); returns an unsubscribe. */
  watch(fn: (error: Error) => void): () => void {
    if (this.stopped) {
      fn(this.stopped);
      return () => undefined;
    }
    this.watchers.add(fn);
    return () => {
      this.watchers.delete(fn);
    };
  }

  /** Restarts the silence window, `ms` long (default: the deadline's own). */
  touch(ms = this.ms): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.stop(new DOMException('upstream timed out', 'TimeoutError'));
    }, ms);
    this.timer.unref();
  }

  clear(): void {
    clearTimeout(this.timer);
  }

  private stop(error: Error): void {
    if (this.stopped) return;
    this.stopped = error;
    clearTimeout(this.timer);
    for (const fn of this.watchers) fn(error);
    this.watchers.clear();
  }
}

/**
 * Upstream error text with the secrets (API key, prompt texts) removed. Whole occurrences are
 * replaced; if any 16-character stretch of a secret is still there (an upstream quoting part
 * of the prompt), the text is withheld entirely.
 */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 4) out = out.split(secret).join('[redacted]');
  }
  if (out.length > MAX_DETAIL_CHARS) out = `${out.slice(0, MAX_DETAIL_CHARS)}…`;
  for (let i = 0; i + ECHO_WINDOW <= out.length; i++) {
    const window = out.slice(i, i + ECHO_WINDOW);
    if (secrets.some((secret) => secret.includes(window))) return '[detail withheld: it quoted the request]';
  }
  return out;
}

// Keys whose values are wire vocabulary ("user", "system", "input_text", "ephemeral"), not the
// caller's text: scrubbing those from error messages would only garble them.
const VOCABULARY_KEYS = new Set(['role', 'type', 'status', 'detail', 'format', 'cache_control', 'ttl', 'media_type', 'stop_reason']);

/**
 * The caller's own texts inside a request body part (message contents, system prompt, tool
 * definitions, instructions), for `redact`; wire vocabulary is skipped, and so are strings under
 * 4 characters, which `redact` ignores anyway.
 */
export function callerTexts(value: unknown, out: string[] = [], depth = 0): string[] {
  if (typeof value === 'string') {
    if (value.length >= 4) out.push(value);
  } else if (depth < 16 && Array.isArray(value)) {
    for (const item of value) callerTexts(item, out, depth + 1);
  } else if (depth < 16 && value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (!VOCABULARY_KEYS.has(key)) callerTexts(item, out, depth + 1);
    }
  }
  return out;
}

const identifier = (value: unknown): string | undefined => (typeof value === 'string' && /^[\w.:-]{1,64}$/.test(value) ? value : undefined);

/** The upstream's own error detail ({ error: { message, code, type } }), redacted. */
export function errorDetail(body: unknown, secrets: readonly string[]): string {
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error === 'string') return redact(error, secrets);
  if (!error || typeof error !== 'object') return '';
  const { message, code, type } = error as Record<string, unknown>;
  // The code and type are the upstream's words too: redacted like the message (an upstream may echo its key there).
  const raw = identifier(code) ?? identifier(type);
  const tag = raw && redactSecretShapes(redact(raw, secrets));
  const text = typeof message === 'string' ? redact(message, secrets) : '';
  return [tag && `(${tag})`, text].filter(Boolean).join(' ');
}

/** Maps a thrown request/stream error: caller aborts stay aborts, the rest become UpstreamError. */
export function asUpstreamFailure(error: unknown, op: string, callSignal: AbortSignal, deadline: Deadline): Error {
  if (callSignal.aborted) return abortError(callSignal);
  if (error instanceof UpstreamError) return error;
  if (deadline.timedOut) return new UpstreamError(`upstream ${op} timed out`);
  const e = error as { code?: unknown; cause?: { code?: unknown } } | null;
  // Only the system error code (ECONNREFUSED, ...): messages may carry the URL.
  return new UpstreamError(`upstream ${op} request failed (${identifier(e?.code) ?? identifier(e?.cause?.code) ?? 'network error'})`);
}

export interface SendOptions {
  op: string;
  path: string;
  /** JSON text, JSON's UTF-8 bytes (jsonBytes), or a multipart form. */
  body: string | Buffer | FormData;
  accept?: string;
  signal: AbortSignal;
  /** Texts that must never appear in an error message (the key is always added). */
  secrets: readonly string[];
  /** Per-call headers beside the target's own (which they cannot replace). */
  headers?: Record<string, string>;
}

/** The parts of an upstream HTTP response the adapters read. */
export interface UpstreamResponse {
  status: number;
  ok: boolean;
  headers: { get(name: string): string | null };
  /** The body as it arrives; leaving the iteration early closes the connection. */
  body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
}

// node:http with keep-alive agents rather than fetch: fetch wraps every request and response in
// web streams, Request/Response objects and combined abort signals, which cost more CPU per
// call than the whole metering path (profiled in BENCHMARKS.md). Connections are reused (LIFO,
// so a few warm sockets serve a steady load).
const agents = {
  'http:': new http.Agent({ keepAlive: true, scheduling: 'lifo' }),
  'https:': new https.Agent({ keepAlive: true, scheduling: 'lifo' }),
};

function wrap(res: IncomingMessage): UpstreamResponse {
  const status = res.statusCode ?? 0;
  return {
    status,
    ok: status >= 200 && status < 300,
    headers: {
      get: (name) => {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
    },
    body: res,
    async text() {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
  };
}

interface Waits {
  connectMs: number;
  firstByteMs: number;
}

/**
 * One POST. A connection the server closed while it sat idle in the pool fails with ECONNRESET
 * before any response; that request never reached the server, so it is sent once more on a
 * fresh connection.
 */
function post(url: URL, headers: Record<string, string | number>, body: Buffer, deadline: Deadline, waits: Waits, mayRetry = true): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const transport = url.protocol === 'https:' ? https : http;
    let responded = false;
    const req = transport.request(url, { method: 'POST', headers, agent: agents[url.protocol as 'http:' | 'https:'] }, (res) => {
      responded = true;
      deadline.touch();
      // From here an abort or a timeout ends the response being read.
      unwatch();
      const stop = deadline.watch((error) => res.destroy(error));
      res.once('close', stop);
      resolve(res);
    });
    const unwatch = deadline.watch((error) => req.destroy(error));
    // Until connected the connect timeout runs; then, until the status line, the first-byte one.
    req.once('socket', (socket) => {
      if (!socket.connecting) {
        deadline.touch(waits.firstByteMs);
        return;
      }
      deadline.touch(waits.connectMs);
      socket.once('connect', () => {
        if (!responded) deadline.touch(waits.firstByteMs);
      });
    });
    req.on('error', (error: Error & { code?: string }) => {
      unwatch();
      if (!responded && mayRetry && req.reusedSocket && error.code === 'ECONNRESET') resolve(post(url, headers, body, deadline, waits, false));
      else if (!responded) reject(error);
    });
    req.end(body);
  });
}

/**
 * POSTs to the upstream and returns the 2xx response with its deadline still running (the
 * caller reads the body, then clears it). Non-2xx and network failures throw.
 */
export async function send(target: UpstreamTarget, options: SendOptions): Promise<{ response: UpstreamResponse; deadline: Deadline }> {
  const deadline = new Deadline(options.signal, target.timeoutMs);
  const secrets = [target.apiKey, ...options.secrets];
  let body: Buffer;
  let contentType = 'application/json';
  if (typeof options.body === 'string') body = Buffer.from(options.body);
  else if (Buffer.isBuffer(options.body)) body = options.body;
  else {
    // Multipart (image edits): let the platform encode the form and pick the boundary.
    const encoded = new Request('http://upstream.invalid/', { method: 'POST', body: options.body });
    body = Buffer.from(await encoded.arrayBuffer());
    contentType = encoded.headers.get('content-type') ?? 'multipart/form-data';
  }
  const auth = target.headers ?? { authorization: `Bearer ${target.apiKey}` };
  const headers = { ...options.headers, ...auth, accept: options.accept ?? 'application/json', 'content-type': contentType, 'content-length': body.length };
  const waits = { connectMs: target.connectTimeoutMs ?? target.timeoutMs, firstByteMs: target.firstByteTimeoutMs ?? target.timeoutMs };
  let response: UpstreamResponse;
  try {
    response = wrap(await post(new URL(`${target.baseURL.replace(/\/+$/, '')}${options.path}`), headers, body, deadline, waits));
  } catch (error) {
    deadline.clear();
    throw asUpstreamFailure(error, options.op, options.signal, deadline);
  }
  if (!response.ok) {
    let detail = '';
    try {
      const text = await response.text();
      detail = errorDetail(JSON.parse(text), secrets);
    } catch {
      // Not JSON (a proxy's HTML page, an empty body): the status says enough.
    } finally {
      deadline.clear();
    }
    if (options.signal.aborted) throw abortError(options.signal);
    throw new UpstreamError(`upstream ${options.op} failed with HTTP ${response.status}${detail ? `: ${detail}` : ''}`, response.status);
  }
  return { response, deadline };
}

/** Reads a JSON body under the deadline; anything unreadable is the upstream's fault. */
export async function readJson(response: UpstreamResponse, op: string, callSignal: AbortSignal, deadline: Deadline): Promise<unknown> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw asUpstreamFailure(error, op, callSignal, deadline);
  } finally {
    deadline.clear();
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UpstreamError(`upstream ${op} returned a malformed JSON body`);
  }
}
