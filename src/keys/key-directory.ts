// Resolves an API key secret to its key and account. Hits are cached in memory; revocations
// arrive as events through the event feed (src/eventstore/event-feed.ts), and a revocation is
// answered only once every other gateway has read it (src/eventstore/seen-everywhere.ts): a key
// revoked on another gateway is refused from the moment the revocation was answered.
//
// A key's expiry (KeyControlsSet) and its rotation deadline (KeyRotated) come the same way; the
// record carries both, and authentication refuses the key from that instant on, even before any
// later event says so (a rotated key's KeyRevoked follows: see noticeRotationDue).
//
// Misses are cached too, briefly: a flood of one unknown key would otherwise cost ~4 queries per
// request (read model, event store head and read, read model again). A negative entry is dropped
// as soon as a KeyIssued event with its hash is heard (at once for this process's issues, within
// one feed poll for another's), so a key issued later works at once.
import { caughtUpWithin } from '../eventstore/event-feed.ts';
import type { Database } from '../eventstore/db.ts';
import type { EventEmitter } from 'node:events';
import type { EventStore, StoredEvent, Subscription } from '../eventstore/port.ts';
import { hashKey } from './secrets.ts';
import * as keys from '../../projections/keys/keys.ts';
import * as checkpoint from '../../projections/runner/checkpoint.ts';

/** What the directory reads events from: the store, or a feed shared with other caches. */
type EventSource = Pick<EventStore, 'subscribe'>;

export interface KeyRecord {
  keyId: string;
  accountId: string;
  status: 'active' | 'revoked';
  /** ISO 8601 times: the key's own expiry, and the end of a rotated key's grace period. */
  expiresAt: string | null;
  rotationDeadline: string | null;
  /** When the key was revoked (set with status 'revoked'; null when only the status is known). */
  revokedAt: string | null;
}

/** What events said of a key's times (they win over a read model row that may be behind). */
interface KeyTimes {
  expiresAt?: string | null;
  rotationDeadline?: string | null;
}

/** Unknown key hashes remembered (oldest dropped first) and for how long. */
const NEGATIVE_CACHE_SIZE = 4096;
const NEGATIVE_CACHE_TTL_MS = 30_000;

export async function createKeyDirectory(opts: {
  db: Database;
  store: EventSource;
  rmSchema: string;
  waitForProjections?: () => Promise<void>;
  localEvents?: EventEmitter;
  /** Revokes a rotated key whose grace period is over (reason 'rotated'); called once per key and process. */
  revokeRotated?: (keyId: string) => Promise<unknown>;
}) {
  const byHash = new Map<string, KeyRecord>();
  const byKeyId = new Map<string, KeyRecord>();
  /** Revoked key ids and when (the KeyRevoked's time). */
  const revoked = new Map<string, string>();
  const withRevocation = (rec: KeyRecord): KeyRecord => {
    const at = revoked.get(rec.keyId);
    if (at !== undefined) {
      rec.status = 'revoked';
      rec.revokedAt ??= at;
    }
    return rec;
  };
  const times = new Map<string, KeyTimes>();
  const revoking = new Set<string>();
  const withTimes = (rec: KeyRecord): KeyRecord => {
    const t = times.get(rec.keyId);
    if (t?.expiresAt !== undefined) rec.expiresAt = t.expiresAt;
    if (t?.rotationDeadline !== undefined) rec.rotationDeadline = t.rotationDeadline;
    return rec;
  };
  const heard = (keyId: string, t: KeyTimes) => {
    times.set(keyId, { ...times.get(keyId), ...t });
    const rec = byKeyId.get(keyId);
    if (rec) withTimes(rec);
  };
  const remember = (hash: string, rec: KeyRecord) => {
    if (byHash.size > 100_000) {
      byHash.clear();
      byKeyId.clear();
    }
    byHash.set(hash, rec);
    byKeyId.set(rec.keyId, rec);
  };
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
        if (!byHash.has(d.hash))
          remember(
            d.hash,
            withRevocation(withTimes({ keyId: d.keyId, accountId: d.accountId, status: 'active', expiresAt: null, rotationDeadline: null, revokedAt: null })),
          );
      } else if (e.type === 'KeyRevoked') {
        revoked.set(String(e.data.keyId), e.timestamp);
        const rec = byKeyId.get(String(e.data.keyId));
        if (rec) withRevocation(rec);
      } else if (e.type === 'KeyControlsSet') {
        heard(String(e.data.keyId), { expiresAt: (e.data.expiresAt as string | null) ?? null });
      } else if (e.type === 'KeyRotated') {
        heard(String(e.data.keyId), { rotationDeadline: String(e.data.revokeAt) });
      }
    }
  };
  // Revocations made by this process apply before the revoking call returns; another's before
  // that one answers (see seen-everywhere.ts).
  opts.localEvents?.on('events', apply);
  // From the read models' checkpoint: a key issued or revoked before this start but not yet
  // projected (a projector started later) is heard too; the rows hold everything before it.
  const subscription: Subscription = opts.store.subscribe(await checkpoint.read(opts.db, opts.rmSchema), async (events) => apply(events));

  async function fromReadModel(hash: string): Promise<KeyRecord | null> {
    const row = await keys.byHash(opts.db, opts.rmSchema, hash);
    return row
      ? withRevocation(
          withTimes({
            keyId: row.key_id,
            accountId: row.account_id,
            status: row.status,
            expiresAt: row.expires_at ?? null,
            rotationDeadline: row.rotation_deadline ?? null,
            revokedAt: row.revoked_at ?? null,
          }),
        )
      : null;
  }

  /** A hash not in memory: the read model, then the store up to its head, then the projections. */
  async function resolve(hash: string): Promise<KeyRecord | null> {
    let rec = await fromReadModel(hash);
    // A key issued a moment ago (maybe by another process) may not be projected yet, but
    // its KeyIssued event is in the store: read up to the head now.
    if (!rec) {
      await caughtUpWithin(subscription, 1000);
      rec = byHash.get(hash) ?? null;
    }
    if (!rec && opts.waitForProjections) {
      await opts.waitForProjections();
      rec = await fromReadModel(hash);
    }
    if (rec) {
      remember(hash, rec);
      return rec;
    }
    // Its KeyIssued may have been heard while the queries ran: then it is not unknown.
    rec = byHash.get(hash) ?? null;
    if (!rec) rememberUnknown(hash);
    return rec;
  }

  return {
    /** The key for a secret (revoked ones too: status says so), or null when unknown. */
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
      return rec && withRevocation(rec);
    },
    /**
     * A rotated key was refused after its deadline: revoke it now if no KeyRevoked says so yet
     * (once per key in this process; the sweeper does it too, and a conflict means another did).
     */
    noticeRotationDue(rec: KeyRecord): void {
      if (!opts.revokeRotated || revoking.has(rec.keyId) || rec.status !== 'active') return;
      revoking.add(rec.keyId);
      opts.revokeRotated(rec.keyId).catch(() => revoking.delete(rec.keyId));
    },
    /** Unknown hashes currently remembered (for tests and metrics). */
    get negativeCacheSize() {
      return unknown.size;
    },
    close: () => {
      opts.localEvents?.off('events', apply);
      return subscription.close();
    },
  };
}

export type KeyDirectory = Awaited<ReturnType<typeof createKeyDirectory>>;
