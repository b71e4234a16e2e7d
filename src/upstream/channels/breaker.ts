// A circuit breaker per channel: after `failureThreshold` failures in a row the channel is taken
// out (open) for `coolDownMs`; then one trial call is let through (half-open): its success closes
// the breaker, its failure opens it for another cool-down. Pure state and a clock: no I/O.

export interface BreakerPolicy {
  failureThreshold: number;
  coolDownMs: number;
}

export const DEFAULT_BREAKER_POLICY: BreakerPolicy = { failureThreshold: 3, coolDownMs: 30_000 };

export type BreakerState = 'closed' | 'open' | 'half_open';

export class CircuitBreaker {
  private failures = 0;
  private openedAt: number | null = null;
  private trialInFlight = false;

  constructor(
    private readonly policy: BreakerPolicy = DEFAULT_BREAKER_POLICY,
    private readonly now: () => number = Date.now,
  ) {
    if (!(policy.failureThreshold >= 1) || !(policy.coolDownMs >= 0)) throw new Error('breaker policy needs failureThreshold >= 1 and coolDownMs >= 0');
  }

  get state(): BreakerState {
    if (this.openedAt === null) return 'closed';
    return this.now() - this.openedAt >= this.policy.coolDownMs ? 'half_open' : 'open';
  }

  /** When an open breaker lets a trial through (ms since the epoch); null when closed. */
  get retryAt(): number | null {
    return this.openedAt === null ? null : this.openedAt + this.policy.coolDownMs;
  }

  /** Whether a call may use the channel now; a half-open breaker admits one trial at a time. */
  admits(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  success(): void {
    this.failures = 0;
    this.openedAt = null;
    this.trialInFlight = false;
  }

  failure(): void {
    this.failures++;
    // A failed trial re-opens at once; a closed breaker opens at the threshold.
    if (this.openedAt !== null || this.failures >= this.policy.failureThreshold) this.openedAt = this.now();
    this.trialInFlight = false;
  }

  /** A call let through that ended neither way (the caller left, the request was refused as invalid). */
  neutral(): void {
    this.trialInFlight = false;
  }
}
