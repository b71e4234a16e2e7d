// Resolves an API key secret to its key and account. Hits are cached in memory; revocations
// arrive as events, so every process refuses a revoked key within the event feed's poll
// interval (src/gateway/event-feed.ts, 250 ms).
//
// Misses are cached too, briefly: a flood of one unknown key would otherwise cost ~4 queries per
// request (read model, event store head and read, read model again). A negative entry is dropped
// as soon as a KeyIssued event with its hash is heard (at once for this process's issues, within
// one feed poll for another's), so a key issued later works at once.
import type { Database } from '../eventstore/db.ts';
import type { EventEmitter } from 'node:events';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';

/** What the directory reads events from: the store, or a feed shared with other caches. */
type EventSource = Pick<EventStore, 'subscribe' | 'headPosition'>;
import { hashKey } from '../ledger/keys.ts';

export interface KeyRecord { keyId: string; accountId: string; status: 'active' | 'revoked' }

/** Unknown key hashes remembered (oldest dropped first) and for how long. */
export const NEGATIVE_CACHE_SIZE = 4096;
export const NEGATIVE_CACHE_TTL_MS = 30_000;

export async function createKeyDirectory(opts: { db: Database; store: EventSource; rmSchema: string; waitForProjections?: () => Promise<void>; localEvents?: EventEmitter }) {
  const byHash = new Map<string, KeyRecord>();
  const revoked = new Set<string>();
  // hash -> when the miss expires; a Map keeps insertion order, so the first entry is the oldest.
  const unknown = new Map<string, number>();
  // One lookup at a time per unknown hash: concurrent requests with it share the queries.
  const inflight = new Map<string, Promise<KeyRecord | null>>();

  const knownUnknown = (hash: string): boolean => {
    const until = unknown.get(hash);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    unknown.delete(hash);
    return false;
  };
  const rememberUnknown = (hash: string) => {
    unknown.delete(hash);
    unknown.set(hash, Date.now() + NEGATIVE_CACHE_TTL_MS);
    while (unknown.size > NEGATIVE_CACHE_SIZE) unknown.delete(unknown.keys().next().value!);
  };

  const apply = (events: StoredEvent[]) => {
    for (const e of events) {
      if (e.type === 'KeyIssued') {
        const d = e.data as { keyId: string; accountId: string; hash: string };
        unknown.delete(d.hash);
        if (!byHash.has(d.hash)) byHash.set(d.hash, { keyId: d.keyId, accountId: d.accountId, status: revoked.has(d.keyId) ? 'revoked' : 'active' });
      } else if (e.type === 'KeyRevoked') {
        revoked.add(String(e.data.keyId));
        for (const rec of byHash.values()) if (rec.keyId === e.data.keyId) rec.status = 'revoked';
      }
    }
  };
  // Revocations made by this process apply before the revoking call returns; others' within
  // one poll of the event feed.
  opts.localEvents?.on('events', apply);
  const subscription: Subscription = opts.store.subscribe(await opts.store.headPosition(), async (events) => apply(events));

  async function fromReadModel(hash: string): Promise<KeyRecord | null> {
    const rows = await opts.db.query<{ key_id: string; account_id: string; status: 'active' | 'revoked' }>(
      `SELECT key_id, account_id, status FROM "${opts.rmSchema}".keys WHERE hash = $1`, [hash]);
    return rows[0] ? { keyId: rows[0].key_id, accountId: rows[0].account_id, status: rows[0].status } : null;
  }

  /** A hash not in memory: the read model, then the store up to its head, then the projections. */
  async function resolve(hash: string): Promise<KeyRecord | null> {
    let rec = await fromReadModel(hash);
    // A key issued a moment ago (maybe by another process) may not be projected yet, but
    // its KeyIssued event is in the store: read up to the head now.
    if (!rec) {
      await Promise.race([subscription.caughtUp(), new Promise((r) => setTimeout(r, 1000))]);
      rec = byHash.get(hash) ?? null;
    }
    if (!rec && opts.waitForProjections) {
      await opts.waitForProjections();
      rec = await fromReadModel(hash);
    }
    if (rec) {
      if (byHash.size > 100_000) byHash.clear();
      byHash.set(hash, rec);
      return rec;
    }
    // Its KeyIssued may have been heard while the queries ran: then it is not unknown.
    rec = byHash.get(hash) ?? null;
    if (!rec) rememberUnknown(hash);
    return rec;
  }

  return {
    /** The key for a secret, or null when unknown or revoked. */
    async lookup(secret: string): Promise<KeyRecord | null> {
      const hash = hashKey(secret);
      let rec = byHash.get(hash) ?? null;
      if (!rec) {
        if (knownUnknown(hash)) return null;
        let pending = inflight.get(hash);
        if (!pending) {
          pending = resolve(hash).finally(() => inflight.delete(hash));
          inflight.set(hash, pending);
        }
        rec = await pending;
      }
      if (!rec || rec.status !== 'active' || revoked.has(rec.keyId)) return null;
      return rec;
    },
    /** Unknown hashes currently remembered (for tests and metrics). */
    get negativeCacheSize() { return unknown.size; },
    close: () => { opts.localEvents?.off('events', apply); return subscription.close(); },
  };
}

export type KeyDirectory = Awaited<ReturnType<typeof createKeyDirectory>>;
