// /healthz (the process answers), /readyz (the store answers and the read models are caught up
// within a bound), /metrics (Prometheus text).
import type { Context } from 'koa';
import type { Ledger } from '../ledger/ledger.ts';
import type { Metrics } from './metrics.ts';

export interface Lag { head: number; checkpoint: number; events: number; seconds: number }

const LAG_COUNT_LIMIT = 100_000;

export async function projectionLag(ledger: Ledger): Promise<Lag> {
  const head = await ledger.store.headPosition();
  const [cp] = await ledger.db.query<{ position: number }>(`SELECT position FROM "${ledger.rmSchema}".checkpoint WHERE name = 'main'`);
  const checkpoint = Number(cp?.position ?? 0);
  let seconds = 0;
  if (head > checkpoint) {
    const [next] = await ledger.store.readAll(checkpoint, 1);
    if (next) seconds = Math.max(0, (Date.now() - Date.parse(next.timestamp)) / 1000);
  }
  // PostgreSQL positions count events; KurrentDB's are log offsets, so there the events are counted (up to a bound).
  const events = ledger.store.kind === 'kurrentdb' && head > checkpoint
    ? (await ledger.store.readAll(checkpoint, LAG_COUNT_LIMIT)).length
    : Math.max(0, head - checkpoint);
  return { head, checkpoint, events, seconds };
}

export function readiness(ledger: Ledger, bounds = { events: Number(process.env.TOLLGATE_READY_MAX_LAG_EVENTS ?? 10_000), seconds: Number(process.env.TOLLGATE_READY_MAX_LAG_SECONDS ?? 30) }) {
  return async (ctx: Context) => {
    try {
      const lag = await projectionLag(ledger);
      const ready = lag.events <= bounds.events && lag.seconds <= bounds.seconds;
      ctx.status = ready ? 200 : 503;
      ctx.body = { status: ready ? 'ready' : 'lagging', store: 'ok', projection_lag: lag };
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
      const [h] = await ledger.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${ledger.rmSchema}".holds`);
      metrics.openHolds.set(Number(h.n));
    } catch { /* the gauges keep their last values; the scrape still answers */ }
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  };
}
