// The price list in memory: loaded from the models read model, then kept current from
// ModelPriced events: a price change is in force in the process that made it before the call
// returns, and in every other process within one poll of the event feed (event-feed.ts), or at
// once when a call names a model this process does not know yet. It follows the log from the
// read models' checkpoint, so it holds every price whatever the read models have applied.
import { caughtUpWithin } from '../eventstore/event-feed.ts';
import type { Database } from '../eventstore/db.ts';
import type { EventEmitter } from 'node:events';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import type { Route } from './models-config.ts';
import { definedOnly, type EventDataByType } from '../ledger/events.ts';
import * as models from '../../projections/catalogue/models.ts';
import * as checkpoint from '../../projections/runner/checkpoint.ts';

export interface CatalogModel {
  id: string;
  alias: string | null;
  multiplierMilli: number;
  status: 'ACTIVE' | 'INACTIVE';
  pricedAt: string;
  /** Optional cache weights of the price (thousandths; absent: the specification's rule). */
  cacheReadMilli?: number;
  cacheWriteMilli?: number;
}

/** How long a lookup of an unknown model waits for the event feed. */
const CATCH_UP_BOUND_MS = 1000;

export async function createModelCatalog(opts: {
  db: Database;
  store: Pick<EventStore, 'subscribe'>;
  rmSchema: string;
  routes: Map<string, Route>;
  localEvents?: EventEmitter;
}) {
  const byId = new Map<string, CatalogModel>();
  const byAlias = new Map<string, string>();

  const put = (m: CatalogModel) => {
    const old = byId.get(m.id);
    if (old?.alias) byAlias.delete(old.alias);
    byId.set(m.id, m);
    if (m.alias) byAlias.set(m.alias, m.id);
  };

  const apply = (events: StoredEvent[]) => {
    for (const e of events) {
      if (e.type !== 'ModelPriced') continue;
      const d = e.data as unknown as EventDataByType['ModelPriced'];
      // An event older than the price held (read from rows ahead of the checkpoint) is history.
      if ((byId.get(d.modelId)?.pricedAt ?? '') > e.timestamp) continue;
      put({
        id: d.modelId,
        alias: d.alias,
        multiplierMilli: d.multiplierMilli,
        status: d.status,
        pricedAt: e.timestamp,
        ...definedOnly({ cacheReadMilli: d.cacheReadMilli, cacheWriteMilli: d.cacheWriteMilli }),
      });
    }
  };
  // A price set by this process is in force before the call that set it returns.
  opts.localEvents?.on('events', apply);
  // The rows include at least the checkpoint's events; the feed brings every later one, also
  // those appended before this start that no projector has applied yet (the rows may be empty).
  const included = await checkpoint.read(opts.db, opts.rmSchema);
  await reload();
  const subscription: Subscription = opts.store.subscribe(included, async (events) => apply(events));

  async function reload() {
    for (const r of await models.all(opts.db, opts.rmSchema)) {
      const current = byId.get(r.model_id);
      const pricedAt = r.updated_at;
      const cache = definedOnly({ cacheReadMilli: r.cache_read_milli ?? undefined, cacheWriteMilli: r.cache_write_milli ?? undefined });
      if (!current || current.pricedAt <= pricedAt)
        put({ id: r.model_id, alias: r.alias, multiplierMilli: Number(r.multiplier_milli), status: r.status, pricedAt, ...cache });
    }
  }

  return {
    /** A model by id or alias, if it is priced, ACTIVE and routed to a provider. */
    resolve(idOrAlias: string): (CatalogModel & { route: Route }) | null {
      const id = byId.has(idOrAlias) ? idOrAlias : byAlias.get(idOrAlias);
      const m = id ? byId.get(id) : undefined;
      const route = id ? opts.routes.get(id) : undefined;
      if (!m || m.status !== 'ACTIVE' || !route) return null;
      return { ...m, route };
    },
    /**
     * resolve(), but a model unknown here is looked for in what other processes appended first
     * (a price set through another gateway a moment ago), within a bound.
     */
    async resolveCurrent(idOrAlias: string): Promise<(CatalogModel & { route: Route }) | null> {
      const found = this.resolve(idOrAlias);
      if (found) return found;
      await caughtUpWithin(subscription, CATCH_UP_BOUND_MS);
      return this.resolve(idOrAlias);
    },
    active(): CatalogModel[] {
      return [...byId.values()].filter((m) => m.status === 'ACTIVE' && opts.routes.has(m.id)).sort((a, b) => a.id.localeCompare(b.id));
    },
    reload,
    close: () => {
      opts.localEvents?.off('events', apply);
      return subscription.close();
    },
  };
}

export type ModelCatalog = Awaited<ReturnType<typeof createModelCatalog>>;
