// /healthz (the process answers), /readyz (the store answers, and the read models and the
// in-memory views are caught up within a bound), /metrics (Prometheus text).
import type { Context } from 'koa';
import type { Ledger } from '../ledger/ledger.ts';
import type { Metrics } from './metrics.ts';
import * as checkpoint from '../../projections/checkpoint.ts';
import * as holds from '../../projections/holds.ts';
import type { Lag } from '../eventstore/lag.ts';

const projectionLag = (ledger: Ledger) => checkpoint.lag(ledger.readModels.db, ledger.events, ledger.rmSchema);

/** Why the gateway's in-memory views (keys, prices, channels) are not current yet; null when they are. */
export type ViewsBehind = (bounds: { events: number; seconds: number }) => Promise<Lag | null>;

export function readiness(ledger: Ledger, bounds: { events: number; seconds: number }, viewsBehind?: ViewsBehind) {
  return async (ctx: Context) => {
    try {
      const lag = await projectionLag(ledger);
      const views = (await viewsBehind?.(bounds)) ?? null;
      const ready = lag.events <= bounds.events && lag.seconds <= bounds.seconds && !views;
      ctx.status = ready ? 200 : 503;
      ctx.body = { status: ready ? 'ready' : 'lagging', store: 'ok', projection_lag: lag, ...(views && { views_lag: views }) };
    } catch (err) {
      ctx.status = 503;
      ctx.body = { status: 'unavailable', store: 'unreachable', error: (err as Error).message.slice(0, 200) };
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
