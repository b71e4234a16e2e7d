// Resolves an API key secret to its key and account. Hits are cached in memory; revocations
// arrive as events (LISTEN/NOTIFY on PostgreSQL), so every process refuses a revoked key at once.
import type { Database } from '../eventstore/db.ts';
import type { EventEmitter } from 'node:events';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import { hashKey } from '../ledger/keys.ts';

export interface KeyRecord { keyId: string; accountId: string; status: 'active' | 'revoked' }

export async function createKeyDirectory(opts: { db: Database; store: EventStore; rmSchema: string; waitForProjections?: () => Promise<void>; localEvents?: EventEmitter }) {
  const byHash = new Map<string, KeyRecord>();
  const revoked = new Set<string>();

  const apply = (events: StoredEvent[]) => {
    for (const e of events) {
      if (e.type === 'KeyIssued') {
        const d = e.data as { keyId: string; accountId: string; hash: string };
        if (!byHash.has(d.hash)) byHash.set(d.hash, { keyId: d.keyId, accountId: d.accountId, status: revoked.has(d.keyId) ? 'revoked' : 'active' });
      } else if (e.type === 'KeyRevoked') {
        revoked.add(String(e.data.keyId));
        for (const rec of byHash.values()) if (rec.keyId === e.data.keyId) rec.status = 'revoked';
      }
    }
  };
  // Revocations made by this process apply before the revoking call returns; others' within
  // one notification round trip.
  opts.localEvents?.on('events', apply);
  const subscription: Subscription = opts.store.subscribe(await opts.store.headPosition(), async (events) => apply(events));

  async function fromReadModel(hash: string): Promise<KeyRecord | null> {
    const rows = await opts.db.query<{ key_id: string; account_id: string; status: 'active' | 'revoked' }>(
      `SELECT key_id, account_id, status FROM "${opts.rmSchema}".keys WHERE hash = $1`, [hash]);
    return rows[0] ? { keyId: rows[0].key_id, accountId: rows[0].account_id, status: rows[0].status } : null;
  }

  return {
    /** The key for a secret, or null when unknown or revoked. */
    async lookup(secret: string): Promise<KeyRecord | null> {
      const hash = hashKey(secret);
      let rec = byHash.get(hash) ?? null;
      if (!rec) {
        rec = await fromReadModel(hash);
        // A key issued a moment ago (maybe by another process) may not be projected yet, but
        // its KeyIssued event reaches our subscription within a notification round trip.
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
        }
      }
      if (!rec || rec.status !== 'active' || revoked.has(rec.keyId)) return null;
      return rec;
    },
    close: () => { opts.localEvents?.off('events', apply); return subscription.close(); },
  };
}

export type KeyDirectory = Awaited<ReturnType<typeof createKeyDirectory>>;
