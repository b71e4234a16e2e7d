// Failover across a model's channels. A channel that fails before anything reached the caller
// (connection refused, no first byte in time, 429, 5xx, 529, a refused upstream key) is skipped
// and the next one tried, under the same hold: one call, at most one charge. A request the
// upstream refuses as invalid is the caller's error and is not retried elsewhere.
import { isAbortError } from '../abort.ts';
import { UpstreamError } from '../port.ts';
import type { Channel, ChannelRegistry } from './registry.ts';
import { inSpan, NO_TRACE, SpanKind, type TraceContext } from '../../tracing/spans.ts';

/** One channel that was tried and failed: its id and a short, secret-free reason. */
export interface FailedAttempt {
  channel: string;
  upstreamModel: string;
  error: string;
}

/** Every channel failed (or none could take the call). */
export class AllChannelsFailed extends UpstreamError {
  constructor(
    readonly attempts: FailedAttempt[],
    last: UpstreamError | null,
  ) {
    super(
      attempts.length
        ? `every upstream channel failed (${attempts.map((a) => `${a.channel}: ${a.error}`).join('; ')})`
        : 'no upstream channel can take this call',
      last?.status,
      last?.kind === 'request' ? 'retriable' : last?.kind,
    );
    this.name = 'AllChannelsFailed';
  }
}

const attemptsByError = new WeakMap<object, FailedAttempt[]>();

/** The channels that failed before `error` ended the call (empty if none). */
export function failedAttemptsOf(error: unknown): FailedAttempt[] {
  if (error instanceof AllChannelsFailed) return error.attempts;
  return (error && typeof error === 'object' ? attemptsByError.get(error) : undefined) ?? [];
}

/** A short reason for the ledger and the report: the HTTP status, or the kind of network failure. */
export function failureCode(error: unknown): string {
  if (error instanceof UpstreamError) {
    if (error.status) return `http_${error.status}`;
    if (/timed out/.test(error.message)) return 'timeout';
    const code = /\(([A-Z_]{3,40})\)/.exec(error.message)?.[1];
    if (code) return code.toLowerCase();
    if (/malformed|garbage|not valid/i.test(error.message)) return 'malformed_reply';
    return 'upstream_error';
  }
  return 'internal_error';
}

/**
 * The order to try a model's channels in: those an operator has not taken out and that can do
 * the job; by weight (a weighted draw without replacement) when the model gives weights, else
 * as configured.
 */
export function channelOrder(channels: readonly Channel[], capable: (c: Channel) => boolean = () => true, random: () => number = Math.random): Channel[] {
  const usable = channels.filter((c) => !c.health.disabled && capable(c));
  if (!usable.some((c) => c.weight > 0)) return usable;
  const pool = [...usable];
  const order: Channel[] = [];
  while (pool.length) {
    const total = pool.reduce((n, c) => n + Math.max(c.weight, 0), 0);
    let pick = 0;
    if (total > 0) {
      let r = random() * total;
      for (pick = 0; pick < pool.length - 1; pick++) {
        r -= Math.max(pool[pick].weight, 0);
        if (r < 0) break;
      }
    }
    order.push(pool.splice(pick, 1)[0]);
  }
  return order;
}

export interface FailoverOptions {
  registry: ChannelRegistry;
  signal: AbortSignal;
  /** Channels that cannot take this call (no images, say) are left out. */
  capable?: (c: Channel) => boolean;
  random?: () => number;
  /** The GenAI operation each attempt's span names (default chat). */
  operation?: string;
  /** The call's span: each attempt's span is its child. */
  trace?: TraceContext;
}

export interface Succeeded<T> {
  value: T;
  channel: Channel;
  failed: FailedAttempt[];
}

/**
 * Runs `attempt` on the first channel that succeeds. Channels whose breaker is open are passed
 * over while another is available; if every breaker is open they are tried all the same (the
 * call would fail anyway, and a recovered upstream is found sooner).
 */
export async function withFailover<T>(channels: readonly Channel[], opts: FailoverOptions, attempt: (channel: Channel) => Promise<T>): Promise<Succeeded<T>> {
  const order = channelOrder(channels, opts.capable, opts.random);
  const failed: FailedAttempt[] = [];
  let last: UpstreamError | null = null;
  let previous: Channel | null = null;
  const operation = opts.operation ?? 'chat';
  // Each attempt a client span under the call's (a failover is one more span).
  const traceContext = opts.trace ?? NO_TRACE;
  const traced = (channel: Channel) =>
    inSpan(
      `${operation} ${channel.upstreamModel}`,
      {
        'gen_ai.operation.name': operation,
        'gen_ai.request.model': channel.upstreamModel,
        'gen_ai.provider.name': channel.provider.name,
        'tollgate.channel': channel.id,
        'tollgate.failover': previous !== null,
      },
      traceContext,
      () => attempt(channel),
      SpanKind.CLIENT,
      failureCode,
    );

  const tryChannel = async (channel: Channel): Promise<Succeeded<T> | null> => {
    // The call moves on from the channel that failed before this one.
    if (previous) opts.registry.recordFailover(previous);
    try {
      const value = await traced(channel);
      channel.health.breaker.success();
      opts.registry.recordAttempt(channel, 'ok');
      return { value, channel, failed };
    } catch (error) {
      // The caller left, or the upstream refused the request itself: not the channel's fault.
      if (opts.signal.aborted || isAbortError(error) || (error instanceof UpstreamError && error.kind === 'request')) {
        channel.health.breaker.neutral();
        if (error && typeof error === 'object') attemptsByError.set(error, failed);
        throw error;
      }
      channel.health.breaker.failure();
      opts.registry.recordAttempt(channel, 'failed');
      failed.push({ channel: channel.id, upstreamModel: channel.upstreamModel, error: failureCode(error) });
      last = error instanceof UpstreamError ? error : new UpstreamError('upstream call failed');
      previous = channel;
      return null;
    }
  };

  // A breaker is asked only right before its channel is tried: asking claims a half-open
  // breaker's one trial, which must not stay claimed by a call that an earlier channel served.
  let admittedAny = false;
  for (const channel of order) {
    if (!channel.health.breaker.admits()) continue;
    admittedAny = true;
    const done = await tryChannel(channel);
    if (done) return done;
  }
  if (!admittedAny) {
    for (const channel of order) {
      const done = await tryChannel(channel);
      if (done) return done;
    }
  }
  throw new AllChannelsFailed(failed, last);
}

/** A stream opened on the first channel whose first item arrived; later failures are the caller's to see. */
export type OpenedStream<T> = Succeeded<AsyncIterable<T>>;

/**
 * Opens a stream with failover up to its first item: until then nothing has reached the caller,
 * so another channel can still serve it. A failure after that counts against the channel's
 * breaker but cannot move the call.
 */
export async function openWithFailover<T>(
  channels: readonly Channel[],
  opts: FailoverOptions,
  open: (channel: Channel) => AsyncIterable<T>,
): Promise<OpenedStream<T>> {
  const opened = await withFailover(channels, opts, async (channel) => {
    const iterator = open(channel)[Symbol.asyncIterator]();
    const first = await iterator.next();
    return { iterator, first };
  });
  const { iterator, first } = opened.value;
  const { channel } = opened;
  async function* rest(): AsyncGenerator<T> {
    let finished = false;
    try {
      if (first.done) {
        finished = true;
        return;
      }
      yield first.value;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
      finished = true;
    } catch (error) {
      finished = true;
      if (!opts.signal.aborted && !isAbortError(error)) {
        channel.health.breaker.failure();
        opts.registry.recordAttempt(channel, 'failed');
      }
      throw error;
    } finally {
      // The consumer stopped early (the client left): let the upstream stream close its connection.
      if (!finished) await iterator.return?.();
    }
  }
  return { value: rest(), channel, failed: opened.failed };
}
