// Changes that every gateway keeps in memory (a key revoked, a price, a channel switched off) are
// answered only once every other live gateway has read them: from the moment the operator has the
// answer, no gateway decides a call on the old state, and a call pays nothing for it (no read of the
// log per request).
//
// Each gateway tells the others how far its caches have read the log (NOTIFY on `<schema>_seen`,
// "<process> <position>", sent after a read that brought such a change). The process that made
// the change waits until every other gateway with a live lease (src/eventstore/process-lease.ts)
// has told a position at or past the change's, within a bound: a gateway that cannot read the log
// cannot reach the ledger either, so it answers no metered call meanwhile. Embedded PGlite has one
// process: nothing to wait for.
import { EventEmitter } from 'node:events';
import type { Database } from './db.ts';
import { leaseTable } from './process-lease.ts';

/** How long a change's answer waits for the other gateways at most. */
export const SEEN_EVERYWHERE_MS = 2000;

export interface SeenEverywhere {
  /** Tells the other gateways that this one's caches have read the log up to `position`. */
  announce(position: number): void;
  /** Resolves once every other live gateway has read up to `position`, or after `boundMs`: the ids of those that had not. */
  wait(position: number, boundMs?: number): Promise<string[]>;
  close(): Promise<void>;
}

export async function createSeenEverywhere(db: Database, schema: string, processId: string): Promise<SeenEverywhere> {
  if (db.kind !== 'postgres')
    return {
      announce: () => undefined,
      wait: async () => [],
      close: async () => undefined,
    };
  const channel = `${schema}_seen`;
  const seen = new Map<string, number>();
  const heard = new EventEmitter();
  heard.setMaxListeners(0);
  const unlisten = await db.listen(channel, (payload) => {
    const [sender, at] = payload.split(' ');
    const position = Number(at);
    if (!sender || !Number.isFinite(position) || position <= (seen.get(sender) ?? -1)) return;
    seen.set(sender, position);
    heard.emit('seen');
  });

  // Coalesced: while one announcement is on its way, later positions wait and go as one.
  let sending = false;
  let toSend = 0;
  let sent = 0;
  function announce(position: number): void {
    toSend = Math.max(toSend, position);
    if (sending || toSend <= sent) return;
    sending = true;
    const now = toSend;
    db.query('SELECT pg_notify($1, $2)', [channel, `${processId} ${now}`])
      .then(() => (sent = Math.max(sent, now)))
      .catch(() => undefined)
      .finally(() => {
        sending = false;
        if (toSend > sent) announce(toSend);
      });
  }

  async function wait(position: number, boundMs = SEEN_EVERYWHERE_MS): Promise<string[]> {
    const others = (
      await db.query<{ process_id: string }>(`SELECT process_id FROM ${leaseTable(schema)} WHERE expires_at > now() AND process_id <> $1`, [processId])
    ).map((r) => r.process_id);
    const behind = () => others.filter((p) => (seen.get(p) ?? -1) < position);
    if (behind().length === 0) return [];
    return new Promise<string[]>((resolve) => {
      const check = () => {
        if (behind().length > 0) return;
        done();
      };
      const timer = setTimeout(() => done(), boundMs);
      const done = () => {
        clearTimeout(timer);
        heard.off('seen', check);
        resolve(behind());
      };
      heard.on('seen', check);
    });
  }

  return {
    announce,
    wait,
    async close() {
      heard.removeAllListeners();
      await unlisten();
    },
  };
}
