// /healthz (the process answers), /readyz (the store answers and the read models are caught up
// within a bound), /metrics (Prometheus text).
import type { Context } from 'koa';
import type { Ledger } from '../ledger/ledger.ts';
import type { Metrics } from './metrics.ts';
import * as checkpoint from '../../projections/runner/checkpoint.ts';
import * as holds from '../../projections/accounts/holds.ts';
import { outageReporter, type OutageLog } from '../eventstore/outage.ts';
import type { Lag } from '../eventstore/lag.ts';

const projectionLag = async (ledger: Ledger) => checkpoint.lag(ledger.readModels.db, ledger.events, ledger.rmSchema);

/** Why the gateway's in-memory views (keys, prices, channels) are not current yet; null when they are. */
export type ViewsBehind = (bounds: { events: number; seconds: number }) => Promise<Lag | null>;

/**
 * Answers within `timeoutMs` whatever the database does (a stalled link answers nothing). The
 * body says the status only; why the store is unreachable goes to the log, once per outage. One
 * check at a time: probes during a stall share it instead of taking every pooled connection.
 */
export function readiness(ledger: Ledger, bounds: { events: number; seconds: number }, opts: { timeoutMs: number; log: OutageLog; viewsBehind?: ViewsBehind }) {
  const outage = outageReporter(opts.log, 'readiness check');
  const lags = async () => ({ projection: await projectionLag(ledger), views: (await opts.viewsBehind?.(bounds)) ?? null });
  let inFlight: ReturnType<typeof lags> | null = null;
  return async (ctx: Context) => {
    const check = (inFlight ??= lags().finally(() => (inFlight = null)));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the database did not answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    });
    try {
      const { projection: lag, views } = await Promise.race([check, late]);
      outage.ok();
      const ready = lag.events <= bounds.events && lag.seconds <= bounds.seconds && !views;
      ctx.status = ready ? 200 : 503;
      ctx.body = { status: ready ? 'ready' : 'lagging', store: 'ok', projection_lag: lag, ...(views && { views_lag: views }) };
    } catch (err) {
      outage.failed(err);
      ctx.status = 503;
      ctx.set('retry-after', '2');
      ctx.body = { status: 'unavailable', store: 'unreachable' };
    } finally {
      clearTimeout(timer);
    }
  };
}

export function metricsEndpoint(ledger: Ledger, metrics: Metrics) {
  return async (ctx: Context) => {
    try {
      const lag = await projectionLag(ledger);
      metrics.lagEvents.set(lag.events);
      metrics.lagSeconds.set(lag.seconds);
      metrics.openHolds.set(await holds.count(ledger.readModels.db, ledger.rmSchema));
    } catch {
      /* the gauges keep their last values; the scrape still answers */
    }
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  };
}
