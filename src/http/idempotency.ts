// Idempotency-Key on any POST: the first request with a key runs; repeats with the same body
// within 24 hours get its recorded response (waiting while it is still running), without a
// second upstream call or charge. The same key with another body is a 409. Outcomes that tell the
// client to try again later are not recorded, so a retry runs again: a 5xx, a 429 (over the call
// rate) and a 402 (no quota until a top-up). None of them charged anything.
//
// A claim is kept alive by its gateway (a heartbeat every few seconds while the request runs).
// If that gateway dies (kill -9, a crash), the claim would otherwise read as "in progress" for
// 24 hours: a repeat that finds a claim without a heartbeat is told at once that the first
// request was interrupted. The key is not run again: the interrupted call may have been charged
// (its charge commits before its reply is sent), and a second run would charge twice.
import { createHash } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { Context, Next } from 'koa';
import type { Queryable } from '../eventstore/db.ts';
import { canonicalJson } from '../eventstore/canonical.ts';
import { idempotencyStore } from '../eventstore/idempotency-store.ts';
import { ApiError, errorBody, toApiError } from './errors.ts';
import { assertNestingDepth } from './validate.ts';

/** How long a key's claim and response are kept (24 hours). */
const TTL_S = 24 * 3600;
const WAIT_MS = 120_000;
/** How often a running request renews its claim, and how old a claim's heartbeat may get before it counts as abandoned. */
const HEARTBEAT_MS = 5_000;
const ABANDONED_AFTER_S = 20;
/** Refusals that charged nothing and may succeed on a later try (call rate, quota). */
const RETRY_LATER = new Set([402, 429]);
const REPLAYED_HEADERS = ['content-type', 'x-tollgate-billed-tokens', 'x-tollgate-remaining-tokens'];

export function idempotency(db: Queryable, schema: string, opts: { heartbeatMs?: number } = {}) {
  const heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
  const claims = idempotencyStore(db, schema);
  return async (ctx: Context, next: Next): Promise<void> => {
    const key = ctx.get('idempotency-key');
    if (!key || ctx.method !== 'POST') return next();
    if (key.length > 255)
      throw new ApiError(400, 'Idempotency-Key must be at most 255 characters.', 'invalid_request_error', 'invalid_idempotency_key', 'Idempotency-Key');
    const account = ctx.state.auth.accountId as string;
    assertNestingDepth(ctx.request.body); // before hashing it recursively
    const files = (ctx.request as unknown as { files?: Record<string, { size: number; originalFilename?: string }> }).files;
    const bodyHash = createHash('sha256')
      .update(
        ctx.path +
          '\n' +
          canonicalJson(ctx.request.body ?? null) +
          canonicalJson(files ? Object.entries(files).map(([k, f]) => [k, ([] as { size: number }[]).concat(f).map((x) => x.size)]) : null),
      )
      .digest('hex');

    if (!(await claims.claim(account, key, bodyHash, TTL_S))) return replay(ctx, account, key, bodyHash);

    const heartbeat = setInterval(() => {
      void claims.heartbeat(account, key).catch(() => undefined);
    }, heartbeatMs);
    heartbeat.unref();
    const settled = <T>(p: Promise<T>) => p.finally(() => clearInterval(heartbeat));
    const forget = () => settled(claims.forget(account, key));
    const record = (status: number, headers: Record<string, string>, body: string) =>
      status >= 500 || RETRY_LATER.has(status) ? forget() : settled(claims.record(account, key, status, headers, body));
    try {
      await next();
    } catch (err) {
      const api = toApiError(err);
      // Recorded in the shape the route answers in (Anthropic's on /v1/messages).
      const shaped = (ctx.state.errorShape as ((e: ApiError) => unknown) | undefined)?.(api) ?? errorBody(api);
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

  async function replay(ctx: Context, account: string, key: string, bodyHash: string): Promise<void> {
    const until = Date.now() + WAIT_MS;
    for (let wait = 10; ; wait = Math.min(wait * 1.5, 200)) {
      const row = await claims.find(account, key, ABANDONED_AFTER_S);
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
