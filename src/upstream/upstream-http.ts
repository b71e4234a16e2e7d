// HTTP plumbing for OpenAI-compatible upstreams: one place that owns timeouts, aborts and
// turning failures into UpstreamError messages that never carry the key or the prompt.
import { UpstreamError } from './port.ts';
import { abortError } from './abort.ts';

export interface UpstreamTarget {
  baseURL: string;
  apiKey: string;
  timeoutMs: number;
}

const MAX_DETAIL_CHARS = 200;
const ECHO_WINDOW = 16;

/**
 * Aborts the fetch when the caller aborts or when the upstream is silent for `ms`.
 * `touch()` restarts the silence window (every streamed chunk counts as life).
 */
export class Deadline {
  readonly signal: AbortSignal;
  timedOut = false;
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(callSignal: AbortSignal, private readonly ms: number) {
    this.signal = AbortSignal.any([callSignal, this.controller.signal]);
    this.touch();
  }

  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new DOMException('upstream timed out', 'TimeoutError'));
    }, this.ms);
    this.timer.unref();
  }

  clear(): void {
    clearTimeout(this.timer);
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

const identifier = (value: unknown): string | undefined =>
  typeof value === 'string' && /^[\w.:-]{1,64}$/.test(value) ? value : undefined;

/** The upstream's own error detail ({ error: { message, code, type } }), redacted. */
export function errorDetail(body: unknown, secrets: readonly string[]): string {
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error === 'string') return redact(error, secrets);
  if (!error || typeof error !== 'object') return '';
  const { message, code, type } = error as Record<string, unknown>;
  const tag = identifier(code) ?? identifier(type);
  const text = typeof message === 'string' ? redact(message, secrets) : '';
  return [tag && `(${tag})`, text].filter(Boolean).join(' ');
}

/** Maps a thrown fetch/stream error: caller aborts stay aborts, the rest become UpstreamError. */
export function asUpstreamFailure(error: unknown, op: string, callSignal: AbortSignal, deadline: Deadline): Error {
  if (callSignal.aborted) return abortError(callSignal);
  if (error instanceof UpstreamError) return error;
  if (deadline.timedOut) return new UpstreamError(`upstream ${op} timed out`);
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  // Only the system error code (ECONNREFUSED, ...): fetch messages may carry the URL.
  return new UpstreamError(`upstream ${op} request failed (${identifier(cause?.code) ?? 'network error'})`);
}

export interface SendOptions {
  op: string;
  path: string;
  body: string | FormData;
  accept?: string;
  signal: AbortSignal;
  /** Texts that must never appear in an error message (the key is always added). */
  secrets: readonly string[];
}

/**
 * POSTs to the upstream and returns the 2xx response with its deadline still running (the
 * caller reads the body, then clears it). Non-2xx and network failures throw.
 */
export async function send(target: UpstreamTarget, options: SendOptions): Promise<{ response: Response; deadline: Deadline }> {
  const deadline = new Deadline(options.signal, target.timeoutMs);
  const secrets = [target.apiKey, ...options.secrets];
  const headers: Record<string, string> = { authorization: `Bearer ${target.apiKey}`, accept: options.accept ?? 'application/json' };
  if (typeof options.body === 'string') headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(`${target.baseURL.replace(/\/+$/, '')}${options.path}`, {
      method: 'POST',
      headers,
      body: options.body,
      signal: deadline.signal,
    });
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
export async function readJson(response: Response, op: string, callSignal: AbortSignal, deadline: Deadline): Promise<unknown> {
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
