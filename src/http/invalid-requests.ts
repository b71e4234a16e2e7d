// Requests refused before any decision (a body that fails validation or a limit, an unknown
// model, a reused Idempotency-Key) cost the gateway work but nothing in the ledger, so they are
// counted per API key: past `perMinute` in the last minute the key gets 429s, without its body
// being read, until the oldest refusal is a minute old. Valid calls count against the plan's call
// rate in the account decider instead.
//
// The count is shared by every gateway on the database (src/eventstore/invalid-request-store.ts),
// and only an invalid request pays for it (one upsert). Each gateway keeps what the count told it
// (a key blocked until when) to refuse the key's next requests without asking; a gateway that has
// not heard yet refuses the first request it finds over the count with a 429 too, after its
// validation, so no gateway answers more than `perMinute` invalid requests a minute between them.
import type { Context, Middleware, Next } from 'koa';
import { ApiError, toApiError } from './errors.ts';
import { keyCallerOf } from './state.ts';
import { INVALID_WINDOW_MS, type InvalidRequestStore } from '../eventstore/invalid-request-store.ts';

/** Refusals that are decisions (no quota, over the call rate), not invalid requests. */
const DECIDED = new Set([402, 429]);
/** Keys remembered as blocked at most (the longest blocked is forgotten first; the count stays in the table). */
const MAX_BLOCKED = 10_000;

const tooMany = (untilMs: number, nowMs: number) => {
  const retry = Math.max(1, Math.ceil((untilMs - nowMs) / 1000));
  return new ApiError(429, `Too many invalid requests with this API key in the last minute: retry after ${retry}s.`, 'requests', 'too_many_failures', null, {
    'retry-after': String(retry),
  });
};

export function limitInvalidRequests(store: InvalidRequestStore, perMinute: number, now: () => number = Date.now): Middleware {
  /** Key id -> until when it is over its count, as the shared count last told this gateway. */
  const blockedUntil = new Map<string, number>();
  const learn = (keyId: string, failures: number[]) => {
    blockedUntil.delete(keyId);
    // Over the count while `perMinute` refusals are in the window: until the oldest of them leaves it.
    if (failures.length >= perMinute) blockedUntil.set(keyId, failures[failures.length - perMinute] + INVALID_WINDOW_MS);
    if (blockedUntil.size > MAX_BLOCKED) blockedUntil.delete(blockedUntil.keys().next().value as string);
  };
  return async (ctx: Context, next: Next) => {
    const keyId = keyCallerOf(ctx).keyId;
    const until = blockedUntil.get(keyId);
    if (until !== undefined) {
      if (until > now()) throw tooMany(until, now());
      blockedUntil.delete(keyId);
    }
    try {
      await next();
    } catch (err) {
      const { status } = toApiError(err);
      if (status < 400 || status >= 500 || DECIDED.has(status)) throw err;
      const at = now();
      // The database out of reach: the request's own error stands, uncounted.
      const failures = await store.record(keyId, at, perMinute).catch(() => null);
      if (!failures) throw err;
      learn(keyId, failures);
      if (failures.length > perMinute) throw tooMany(blockedUntil.get(keyId) ?? at + 1000, at);
      throw err;
    }
  };
}
