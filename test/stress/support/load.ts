// The client side of a stress run: one metered call of each kind (chat, streamed chat, image)
// over real HTTP, and a record of exactly what the client saw. Every call sends its own
// x-request-id, the id the ledger's charge and hold events carry, so the audit can correlate.
import { randomBytes } from 'node:crypto';

export type CallKind = 'chat' | 'stream' | 'image';

/**
 * ok: a complete reply (JSON parsed; a stream with its finish chunk, usage and [DONE]).
 * http_error: an error status (nothing streamed). conn_error: no complete reply (refused, reset,
 * body cut). cut: a stream that started (200) and ended before [DONE] without an error event.
 * stream_error: a stream that ended with an error event. timeout: the client gave up.
 */
export type Outcome = 'ok' | 'http_error' | 'conn_error' | 'cut' | 'stream_error' | 'timeout';

export interface CallRecord {
  requestId: string;
  kind: CallKind;
  accountId: string;
  model: string;
  startedAt: number;
  endedAt: number;
  outcome: Outcome;
  status?: number;
  errorCode?: string;
  error?: string;
  /** chatcmpl-… id of the reply (chat and stream). */
  completionId?: string;
  usage?: { prompt: number; completion: number };
  /** x-tollgate-billed-tokens as the client received it (non-streamed calls). */
  billedHeader?: number;
  /** Content chunks a stream delivered before it ended. */
  chunks?: number;
  idempotencyKey?: string;
  /** The body sent, kept for calls with an Idempotency-Key so a retry can resend it. */
  sentBody?: Record<string, unknown>;
  /** The reply carried idempotent-replayed: true. */
  replayed?: boolean;
  /** The gateway generation (restart count) when the call started. */
  epoch: number;
}

export interface Target {
  origin: string;
  key: string;
  accountId: string;
}

const WORDS =
  'ledger quota hold settle release stream token image lighthouse harbour river mountain crash restart projection rebuild chain hash account plan model gateway metering invoice audit'.split(
    ' ',
  );
const CHAT_MODELS = ['cx/gen-6-luna', 'gen-6-terra', 'alpha-sonnet-5', 'alpha-opus-5', 'cx/gen-6-astra'];
const IMAGE_MODELS = ['alpha-haiku-4.5', 'cx/gen-6-sol', 'gen-6-terra'];
const SIZES = ['1024x1024', '1024x1536', '1536x1024'];

export function newRequestId(prefix: string): string {
  return `${prefix}-${randomBytes(8).toString('hex')}`;
}

function prompt(rng: () => number, n: number): string {
  return Array.from({ length: n }, () => WORDS[Math.floor(rng() * WORDS.length)]).join(' ');
}

export interface CallOptions {
  requestId: string;
  epoch: number;
  rng?: () => number;
  /** Give up after this long (the record says timeout). */
  timeoutMs?: number;
  idempotencyKey?: string;
  /** Fixed body instead of a random one (the concurrency proof). */
  body?: Record<string, unknown>;
  model?: string;
}

export async function callOnce(target: Target, kind: CallKind, opts: CallOptions): Promise<CallRecord> {
  const rng = opts.rng ?? Math.random;
  const model =
    opts.model ?? (kind === 'image' ? IMAGE_MODELS : CHAT_MODELS)[Math.floor(rng() * (kind === 'image' ? IMAGE_MODELS.length : CHAT_MODELS.length))];
  const rec: CallRecord = {
    requestId: opts.requestId,
    kind,
    accountId: target.accountId,
    model,
    startedAt: Date.now(),
    endedAt: 0,
    outcome: 'conn_error',
    epoch: opts.epoch,
  };
  if (opts.idempotencyKey) rec.idempotencyKey = opts.idempotencyKey;
  const path = kind === 'image' ? '/v1/images/generations' : '/v1/chat/completions';
  const body =
    opts.body ??
    (kind === 'image'
      ? { model, prompt: prompt(rng, 6), size: SIZES[Math.floor(rng() * SIZES.length)] }
      : {
          model,
          messages: [{ role: 'user', content: prompt(rng, 4 + Math.floor(rng() * 30)) }],
          ...(rng() < 0.3 ? { max_tokens: 5 + Math.floor(rng() * 60) } : {}),
          ...(rng() < 0.5 ? { reasoning_effort: ['low', 'medium', 'high', 'xhigh', 'max'][Math.floor(rng() * 5)] } : {}),
          ...(kind === 'stream' ? { stream: true, stream_options: { include_usage: true } } : {}),
        });
  const headers: Record<string, string> = { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', 'x-request-id': opts.requestId };
  if (opts.idempotencyKey) {
    headers['idempotency-key'] = opts.idempotencyKey;
    rec.sentBody = body;
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), opts.timeoutMs ?? 120_000);
  try {
    const res = await fetch(`${target.origin}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal });
    rec.status = res.status;
    if (res.headers.get('idempotent-replayed') === 'true') rec.replayed = true;
    const billed = res.headers.get('x-tollgate-billed-tokens');
    if (res.status !== 200) {
      const text = await res.text();
      rec.outcome = 'http_error';
      try {
        rec.errorCode = JSON.parse(text).error?.code ?? undefined;
      } catch {
        rec.errorCode = 'non_json';
      }
    } else if (kind === 'stream') {
      await readStream(res, rec);
    } else {
      const json = JSON.parse(await res.text()) as Record<string, any>;
      if (kind === 'chat') {
        rec.completionId = json.id;
        rec.usage = { prompt: json.usage.prompt_tokens, completion: json.usage.completion_tokens };
      } else if (typeof json.data?.[0]?.b64_json !== 'string' || json.data[0].b64_json.length < 1000) {
        throw new Error('image reply without an image');
      }
      if (billed !== null) rec.billedHeader = Number(billed);
      rec.outcome = 'ok';
    }
  } catch (err) {
    if (abort.signal.aborted) rec.outcome = 'timeout';
    else if (rec.outcome !== 'cut') rec.outcome = 'conn_error';
    rec.error = describe(err);
  } finally {
    clearTimeout(timer);
    rec.endedAt = Date.now();
  }
  return rec;
}

/** Reads an SSE chat stream chunk by chunk, as a client would, noting how far it got. */
async function readStream(res: Response, rec: CallRecord): Promise<void> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let finished = false;
  let done = false;
  rec.chunks = 0;
  rec.outcome = 'cut';
  for (;;) {
    const { value, done: eof } = await reader.read();
    if (eof) break;
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      if (!data) continue;
      if (data === '[DONE]') {
        done = true;
        continue;
      }
      const chunk = JSON.parse(data) as Record<string, any>;
      if (chunk.error) {
        rec.outcome = 'stream_error';
        rec.errorCode = chunk.error.code;
        continue;
      }
      rec.completionId ??= chunk.id;
      if (chunk.usage) rec.usage = { prompt: chunk.usage.prompt_tokens, completion: chunk.usage.completion_tokens };
      const choice = chunk.choices?.[0];
      if (choice?.delta?.content) rec.chunks++;
      if (choice?.finish_reason) finished = true;
    }
  }
  if (rec.outcome === 'stream_error') return;
  rec.outcome = done && finished && rec.usage ? 'ok' : 'cut';
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return [e.message, e.cause?.code ?? e.cause?.message].filter(Boolean).join(': ').slice(0, 200);
}

/** A small seeded generator, so a run's mix can be replayed. */
export function seededRng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x1_0000_0000;
  };
}

export function pickKind(rng: () => number, weights: Record<CallKind, number>): CallKind {
  const total = weights.chat + weights.stream + weights.image;
  let x = rng() * total;
  for (const k of ['chat', 'stream', 'image'] as const) {
    if ((x -= weights[k]) < 0) return k;
  }
  return 'chat';
}
