// The channels of every model and their health: a circuit breaker each, whether an operator took
// the channel out, and counters for /metrics and the admin listing. A channel is one provider and
// one upstream model; models routed to the same pair share its health (it is the same upstream).
import type { Provider } from '../port.ts';
import { CircuitBreaker, DEFAULT_BREAKER_POLICY, type BreakerPolicy, type BreakerState } from './breaker.ts';

export interface Channel {
  /** `<provider>/<upstream model>` unless the config names it. */
  readonly id: string;
  readonly providerName: string;
  readonly provider: Provider;
  readonly upstreamModel: string;
  /** Share of first tries among a model's weighted channels (0 when the model uses plain order). */
  readonly weight: number;
  readonly health: ChannelHealth;
}

export type ChannelState = BreakerState | 'disabled';

export interface ChannelHealth {
  readonly breaker: CircuitBreaker;
  /** Set while an operator has taken the channel out (ChannelDisabled). */
  disabled: { by: string; reason: string; at: string } | null;
  calls: number;
  failures: number;
  failovers: number;
}

export interface ChannelListing {
  id: string;
  provider: string;
  upstream_model: string;
  models: string[];
  state: ChannelState;
  retry_at: string | null;
  disabled: ChannelHealth['disabled'];
  calls: number;
  failures: number;
  failovers: number;
}

export type ChannelOutcome = 'ok' | 'failed';

export interface ChannelObserver {
  attempt?(channelId: string, outcome: ChannelOutcome): void;
  failover?(fromChannelId: string): void;
}

export function channelState(health: ChannelHealth): ChannelState {
  return health.disabled ? 'disabled' : health.breaker.state;
}

export class ChannelRegistry {
  private readonly byId = new Map<string, { channel: Omit<Channel, 'weight'>; models: Set<string> }>();
  private readonly observers: ChannelObserver[] = [];

  constructor(
    private readonly policy: BreakerPolicy = DEFAULT_BREAKER_POLICY,
    private readonly now: () => number = Date.now,
  ) {}

  /** The channel for this pair (created once, shared by every model that routes to it). */
  channel(spec: { id?: string; providerName: string; provider: Provider; upstreamModel: string; weight?: number }, model: string): Channel {
    const id = spec.id ?? `${spec.providerName}/${spec.upstreamModel}`;
    let entry = this.byId.get(id);
    if (!entry) {
      const health: ChannelHealth = { breaker: new CircuitBreaker(this.policy, this.now), disabled: null, calls: 0, failures: 0, failovers: 0 };
      entry = { channel: { id, providerName: spec.providerName, provider: spec.provider, upstreamModel: spec.upstreamModel, health }, models: new Set() };
      this.byId.set(id, entry);
    } else if (entry.channel.providerName !== spec.providerName || entry.channel.upstreamModel !== spec.upstreamModel) {
      throw new Error(`models config is invalid: channel id ${id} names two different upstreams`);
    }
    entry.models.add(model);
    return { ...entry.channel, weight: spec.weight ?? 0 };
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  health(id: string): ChannelHealth | undefined {
    return this.byId.get(id)?.channel.health;
  }

  /** Applies an operator's decision (from a ChannelDisabled / ChannelEnabled event). */
  setDisabled(id: string, disabled: ChannelHealth['disabled']): void {
    const health = this.health(id);
    if (health) health.disabled = disabled;
  }

  observe(observer: ChannelObserver): void {
    this.observers.push(observer);
  }

  recordAttempt(channel: Channel, outcome: ChannelOutcome): void {
    channel.health.calls++;
    if (outcome === 'failed') channel.health.failures++;
    for (const o of this.observers) o.attempt?.(channel.id, outcome);
  }

  recordFailover(channel: Channel): void {
    channel.health.failovers++;
    for (const o of this.observers) o.failover?.(channel.id);
  }

  list(): ChannelListing[] {
    return [...this.byId.values()]
      .map(({ channel: c, models }) => {
        const retryAt = c.health.breaker.retryAt;
        return {
          id: c.id,
          provider: c.providerName,
          upstream_model: c.upstreamModel,
          models: [...models].sort(),
          state: channelState(c.health),
          retry_at: retryAt === null ? null : new Date(retryAt).toISOString(),
          disabled: c.health.disabled,
          calls: c.health.calls,
          failures: c.health.failures,
          failovers: c.health.failovers,
        };
      })
      .sort((a, b) => a.id.localeCompare(b.id));
  }
}
