// The plan's call rate in HTTP: the x-ratelimit-* headers of an allowed call (the 429 of a
// refused one is rateLimitError in errors.ts). The decision itself is the account decider's (src/ledger/call-rate.ts).
import type { Context } from 'koa';
import type { RateDecision } from '../ledger/call-rate.ts';

export const seconds = (ms: number) =>
  `${Math.max(0, ms / 1000)
    .toFixed(3)
    .replace(/\.?0+$/, '')}s`;

export function applyRateHeaders(ctx: Context, d: RateDecision | null): void {
  if (!d) return;
  ctx.set('x-ratelimit-limit-requests', String(d.limit));
  ctx.set('x-ratelimit-remaining-requests', String(d.remaining));
  ctx.set('x-ratelimit-reset-requests', seconds(d.resetMs));
}
