// The plan's call rate as GCRA (generic cell rate algorithm): a burst of up to the per-minute
// limit, refilled evenly. Its one piece of state, the theoretical arrival time, lives in the
// account's decider state and advances with every hold, so the limit is decided together with
// the hold (no extra round trip) and is one budget across every gateway process (the account
// stream's expected revision orders them).
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
}

export const RATE_WINDOW_MS = 60_000;

export const rateInterval = (perMinute: number): number => RATE_WINDOW_MS / perMinute;

/** The theoretical arrival time after one more call at `now` (whether or not it is allowed). */
export const nextArrival = (tat: number | undefined, perMinute: number, now: number): number => Math.max(tat ?? now, now) + rateInterval(perMinute);

/** Pure GCRA step: the new theoretical arrival time and the decision. */
export function gcra(tat: number | undefined, perMinute: number, now: number): { tat: number; decision: RateDecision } {
  const base = Math.max(tat ?? now, now);
  const next = nextArrival(tat, perMinute, now);
  if (next - now > RATE_WINDOW_MS + 1e-9) {
    const retryAfterMs = Math.ceil(next - now - RATE_WINDOW_MS);
    return { tat: base, decision: { allowed: false, limit: perMinute, remaining: 0, resetMs: Math.ceil(base - now), retryAfterMs } };
  }
  return { tat: next, decision: rateStatus(next, perMinute, now) };
}

/** Where an account stands after its calls so far, `tat` being the arrival time they left. */
export function rateStatus(tat: number, perMinute: number, now: number): RateDecision {
  const interval = rateInterval(perMinute);
  const remaining = Math.max(0, Math.floor((RATE_WINDOW_MS - (tat - now)) / interval + 1e-9));
  return { allowed: true, limit: perMinute, remaining, resetMs: Math.ceil(Math.max(0, tat - now)), retryAfterMs: 0 };
}
