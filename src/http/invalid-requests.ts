// Requests refused before any decision (a body that fails validation or a limit, an unknown
// model, a reused Idempotency-Key) cost the gateway work but nothing in the ledger, so they are
// counted per API key: past `perMinute` in the last minute the key gets 429s, without its body
// being read, until the oldest refusal is a minute old. Valid calls count against the plan's call
// rate in the account decider instead. The count is this process's (per replica).
import type { Context, Middleware, Next } from 'koa';
import { toApiError } from './errors.ts';
import { failureThrottle } from './failure-throttle.ts';

/** Refusals that are decisions (no quota, over the call rate), not invalid requests. */
const DECIDED = new Set([402, 429]);

export function limitInvalidRequests(perMinute: number): Middleware {
  const refused = failureThrottle(perMinute);
  return async (ctx: Context, next: Next) => {
    const keyId = ctx.state.auth.keyId as string;
    refused.check(keyId, 'invalid requests with this API key');
    try {
      await next();
    } catch (err) {
      const { status } = toApiError(err);
      if (status >= 400 && status < 500 && !DECIDED.has(status)) refused.record(keyId);
      throw err;
    }
  };
}
