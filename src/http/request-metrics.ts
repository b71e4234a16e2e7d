// Requests and their latency for the metrics (gateway/metrics.ts keeps the counters): each request
// is recorded once its response has really ended, so a stream counts its whole length.
import type { Context, Next } from 'koa';
import { whenResponseEnds } from './response-end.ts';
import { phaseClock, phaseSince } from '../tracing/call-phases.ts';

/** One request as the metrics count it: its route's pattern (never the raw path), what it billed on which model. */
export interface RequestRecord {
  route: string;
  method: string;
  status: number;
  model?: string;
  billed?: number;
}

/** Starts timing a request; the function returned records it. */
export type RequestTimer = () => (request: RequestRecord) => void;

export function requestMetrics(metrics: { timeRequest: RequestTimer }) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const done = metrics.timeRequest();
    try {
      await next();
    } finally {
      const record = () => {
        const recordStarted = phaseClock();
        done({
          route: (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched',
          method: ctx.method,
          status: ctx.status,
          model: ctx.state.model,
          billed: ctx.state.billed,
        });
        phaseSince('request_metrics', recordStarted);
      };
      whenResponseEnds(ctx, record);
    }
  };
}
