// Idempotency-Key on any POST: the first request with a key runs; repeats with the same body
// within the TTL (24 hours by default) get its recorded response (waiting while it is still
// running), without a second upstream call or charge. The same key with another body is a 409.
// Only a decided request is recorded (a success): a body that fails validation is refused before
// any claim, and every other refusal (4xx, 5xx, a 429 over the call rate, a 402 without quota)
// charged nothing and is forgotten, so a retry runs again and invalid requests store nothing.
// Records older than the TTL are purged by the sweeper (purgeExpired in idempotency-store.ts).
//
// A claim is kept alive by its gateway (a heartbeat every few seconds while the request runs).
// If that gateway dies (kill -9, a crash), the claim would otherwise read as "in progress" for
// 24 hours: a repeat that finds a claim without a heartbeat is told at once that the first
// request was interrupted. The key is not run again: the interrupted call may have been charged
// (its charge commits before its reply is sent), and a second run would charge twice.
import { PassThrough, type Readable } from 'node:stream';
import type { Context, Next } from 'koa';
import type { Queryable } from '../eventstore/db.ts';
import { canonicalJson } from '../eventstore/canonical.ts';
import { idempotencyStore } from '../eventstore/idempotency-store.ts';
import { ApiError, errorBody, toApiError } from './errors.ts';
import { assertNestingDepth } from './validate.ts';
import { canonicalDigest } from './body-digest.ts';
import { keyCallerOf } from './state.ts';

/** How long a key's claim and response are kept by default (TOLLGATE_IDEMPOTENCY_TTL_HOURS). */
export const IDEMPOTENCY_TTL_HOURS = 24;
const WAIT_MS = 120_000;
/** How often a running request renews its claim, and how old a claim's heartbeat may get before it counts as abandoned. */
const HEARTBEAT_MS = 5_000;
const ABANDONED_AFTER_S = 20;
const REPLAYED_HEADERS = ['content-type', 'x-tollgate-billed-tokens', 'x-tollgate-remaining-tokens'];

export function idempotency(
  db: Queryable,
  schema: string,
  opts: { heartbeatMs?: number; ttlHours?: number; validate?: (body: unknown) => Promise<void> } = {},
) {
  const heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
  const ttlS = Math.round((opts.ttlHours ?? IDEMPOTENCY_TTL_HOURS) * 3600);
  const claims = idempotencyStore(db, schema);
  return async (ctx: Context, next: Next): Promise<void> => {
    const key = ctx.get('idempotency-key');
    if (!key || ctx.method !== 'POST') return next();
    if (key.length > 255)
      throw new ApiError(400, 'Idempotency-Key must be at most 255 characters.', 'invalid_request_error', 'invalid_idempotency_key', 'Idempotency-Key');
    // Idempotency is per key: a sibling key of the account (restricted to other models, say) can
    // neither replay nor block this key's answers.
    const owner = keyCallerOf(ctx).keyId;
    assertNestingDepth(ctx.request.body); // before hashing it recursively
    await opts.validate?.(ctx.request.body); // an invalid body is refused before any claim: it leaves no record
    const files = (ctx.request as unknown as { files?: Record<string, { size: number; originalFilename?: string }> }).files;
    // Hashed a slice per turn where the body holds a long string (body-digest.ts): the same digest as before.
    const bodyHash = await canonicalDigest(
      ctx.path + '\n',
      ctx.request.body ?? null,
      canonicalJson(files ? Object.entries(files).map(([k, f]) => [k, ([] as { size: number }[]).concat(f).map((x) => x.size)]) : null),
    );

    if (!(await claims.claim(owner, key, bodyHash, ttlS))) return replay(ctx, owner, key, bodyHash);

    const heartbeat = setInterval(() => {
      void claims.heartbeat(owner, key).catch(() => undefined);
    }, heartbeatMs);
    heartbeat.unref();
    const settled = <T>(p: Promise<T>) => p.finally(() => clearInterval(heartbeat));
    const forget = () => settled(claims.forget(owner, key));
    const record = (status: number, headers: Record<string, string>, body: string) =>
      status >= 400 ? forget() : settled(claims.record(owner, key, status, headers, body));
    try {
      await next();
    } catch (err) {
      const api = toApiError(err);
      // Recorded in the shape the route answers in (Anthropic's on /v1/messages).
      const shaped = ctx.state.errorShape?.(api) ?? errorBody(api);
      await record(api.status, { 'content-type': 'application/json; charset=utf-8' }, JSON.stringify(shaped)).catch(() => undefined);
      throw err;
    }
    const headers: Record<string, string> = {};
    for (const h of REPLAYED_HEADERS) {
      const v = ctx.response.get(h);
      if (v) headers[h] = v;
    }
    const body = ctx.body as unknown;
    if (body && typeof (body as Readable).pipe === 'function') {
      // A stream: pass it on and record it as it goes. Only a stream that ran to its end is the
      // response; one cut short (the client left, so it is destroyed before 'end') or ended by an
      // upstream failure is forgotten like a 5xx, so a retry runs again instead of waiting on a
      // claim that never completes or replaying a broken stream.
      const source = body as Readable;
      const tee = new PassThrough();
      const chunks: Buffer[] = [];
      let done = false;
      const finish = (complete: boolean) => {
        if (done) return;
        done = true;
        const outcome = complete && !ctx.state.errorCode ? record(ctx.status, headers, Buffer.concat(chunks).toString('utf8')) : forget();
        void outcome.catch(() => undefined);
      };
      source.on('data', (c: Buffer) => {
        chunks.push(Buffer.from(c));
        tee.write(c);
      });
      source.on('end', () => {
        tee.end();
        finish(true);
      });
      source.on('close', () => finish(false));
      source.on('error', (e) => {
        tee.destroy(e);
        finish(false);
      });
      ctx.body = tee;
    } else {
      await record(ctx.status, headers, typeof body === 'string' ? body : JSON.stringify(body ?? null));
    }
  };

  async function replay(ctx: Context, owner: string, key: string, bodyHash: string): Promise<void> {
    const until = Date.now() + WAIT_MS;
    for (let wait = 10; ; wait = Math.min(wait * 1.5, 200)) {
      const row = await claims.find(owner, key, ABANDONED_AFTER_S);
      if (!row)
        throw new ApiError(409, 'The first request with this Idempotency-Key failed; retry with the same key.', 'invalid_request_error', 'idempotency_retry');
      if (row.body_hash !== bodyHash)
        throw new ApiError(
          409,
          'This Idempotency-Key was already used with a different request body.',
          'invalid_request_error',
          'idempotency_key_reused',
          'Idempotency-Key',
        );
      if (row.status !== null) {
        ctx.status = row.status;
        for (const [h, v] of Object.entries(row.headers ?? {})) ctx.set(h, v);
        ctx.set('idempotent-replayed', 'true');
        ctx.body = row.body ?? '';
        return;
      }
      if (row.abandoned) {
        throw new ApiError(
          409,
          'The first request with this Idempotency-Key was interrupted (the gateway running it stopped) before its response was recorded. ' +
            'It may have been charged: check GET /v1/usage, then retry with a new Idempotency-Key.',
          'invalid_request_error',
          'idempotency_interrupted',
          'Idempotency-Key',
        );
      }
      if (Date.now() > until)
        throw new ApiError(409, 'A request with this Idempotency-Key is still in progress.', 'invalid_request_error', 'idempotency_in_progress');
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
