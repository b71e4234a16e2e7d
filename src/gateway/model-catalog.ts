// The price list in memory: loaded from the models read model, then kept current from
// ModelPriced events: a price change is in force in the process that made it before the call
// returns, and in every other process within one poll of the event feed (event-feed.ts).
import type { Database } from '../eventstore/db.ts';
import type { EventEmitter } from 'node:events';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import type { Route } from './models-config.ts';

export interface CatalogModel {
  id: string;
  alias: string | null;
  multiplierMilli: number;
  status: 'ACTIVE' | 'INACTIVE';
  pricedAt: string;
}

export async function createModelCatalog(opts: { db: Database; store: Pick<EventStore, 'subscribe' | 'headPosition'>; rmSchema: string; routes: Map<string, Route>; localEvents?: EventEmitter }) {
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
      const d = e.data as { modelId: string; alias: string | null; multiplierMilli: number; status: 'ACTIVE' | 'INACTIVE' };
      put({ id: d.modelId, alias: d.alias, multiplierMilli: d.multiplierMilli, status: d.status, pricedAt: e.timestamp });
    }
  };
  // A price set by this process is in force before the call that set it returns.
  opts.localEvents?.on('events', apply);
  const head = await opts.store.headPosition();
  const subscription: Subscription = opts.store.subscribe(head, async (events) => apply(events));
  await reload();

  async function reload() {
    const rows = await opts.db.query<{ model_id: string; alias: string | null; multiplier_milli: number; status: 'ACTIVE' | 'INACTIVE'; updated_at: Date }>(
      `SELECT model_id, alias, multiplier_milli, status, updated_at FROM "${opts.rmSchema}".models`);
    for (const r of rows) {
      const current = byId.get(r.model_id);
      const pricedAt = new Date(r.updated_at).toISOString();
      if (!current || current.pricedAt <= pricedAt) put({ id: r.model_id, alias: r.alias, multiplierMilli: Number(r.multiplier_milli), status: r.status, pricedAt });
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
    active(): CatalogModel[] {
      return [...byId.values()].filter((m) => m.status === 'ACTIVE' && opts.routes.has(m.id)).sort((a, b) => a.id.localeCompare(b.id));
    },
    reload,
    close: () => { opts.localEvents?.off('events', apply); return subscription.close(); },
  };
}

export type ModelCatalog = Awaited<ReturnType<typeof createModelCatalog>>;
