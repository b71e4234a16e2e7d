// The plan's call rate, per account, as GCRA: a burst of up to the per-minute limit, refilled
// evenly. The store is a port so several processes can share one (see issue on deployment).
import type { Context } from 'koa';
import { ApiError } from './errors.ts';

export interface RateDecision { allowed: boolean; limit: number; remaining: number; resetMs: number; retryAfterMs: number }

export interface RateLimiter {
  take(accountId: string, perMinute: number, now?: number): Promise<RateDecision>;
}

/** Pure GCRA step: the new theoretical arrival time and the decision. */
export function gcra(tat: number | undefined, perMinute: number, now: number): { tat: number; decision: RateDecision } {
  const interval = 60_000 / perMinute;
  const window = 60_000;
  const base = Math.max(tat ?? now, now);
  const next = base + interval;
  if (next - now > window + 1e-9) {
    const retryAfterMs = Math.ceil(next - now - window);
    return { tat: base, decision: { allowed: false, limit: perMinute, remaining: 0, resetMs: Math.ceil(base - now), retryAfterMs } };
  }
  const remaining = Math.max(0, Math.floor((window - (next - now)) / interval + 1e-9));
  return { tat: next, decision: { allowed: true, limit: perMinute, remaining, resetMs: Math.ceil(next - now), retryAfterMs: 0 } };
}

export function createMemoryRateLimiter(): RateLimiter {
  const tats = new Map<string, number>();
  return {
    async take(accountId, perMinute, now = Date.now()) {
      const { tat, decision } = gcra(tats.get(accountId), perMinute, now);
      tats.set(accountId, tat);
      if (tats.size > 200_000) for (const [k, v] of tats) if (v < now) tats.delete(k);
      return decision;
    },
  };
}

const seconds = (ms: number) => `${Math.max(0, ms / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;

export function applyRateHeaders(ctx: Context, d: RateDecision): void {
  ctx.set('x-ratelimit-limit-requests', String(d.limit));
  ctx.set('x-ratelimit-remaining-requests', String(d.remaining));
  ctx.set('x-ratelimit-reset-requests', seconds(d.resetMs));
}

export function rateLimitError(d: RateDecision): ApiError {
  const retry = Math.max(1, Math.ceil(d.retryAfterMs / 1000));
  return new ApiError(429, `Rate limit reached: your plan allows ${d.limit} requests per minute. Retry after ${retry}s.`, 'requests', 'rate_limit_exceeded', null, {
    'retry-after': String(retry), 'x-ratelimit-limit-requests': String(d.limit), 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': seconds(d.resetMs),
  });
}
