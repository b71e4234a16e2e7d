// The PostgreSQL event store adapter; the same code runs on embedded PGlite.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from './db.ts';
import { eventStoreDdl } from './postgres-schema.ts';
import { eventBody } from './canonical.ts';
import { assertStreamName } from './stream-name.ts';
import { DuplicateEventError, WrongExpectedRevisionError } from './errors.ts';
import { pollingSubscription } from './subscription.ts';
import type {
  AppendRequest, AppendResult, EventHandler, EventStore, NewEvent, Snapshot, StoredEvent, Subscription,
} from './port.ts';

export interface PostgresStoreOptions {
  /** PostgreSQL schema holding the events; lets several ledgers share one database. */
  schema?: string;
  /** Throws for an event that breaks the catalogue; runs before anything is sent. */
  validate?: (event: NewEvent) => void;
  /** Fallback poll for subscribers in case a notification is missed. */
  pollIntervalMs?: number;
}

interface EventRow {
  position: number; id: string; stream: string; revision: number; type: string;
  data: Record<string, unknown>; metadata: StoredEvent['metadata']; created_at: Date;
  prev_hash: string; hash: string;
}

export async function createPostgresEventStore(db: Database, options: PostgresStoreOptions = {}): Promise<EventStore> {
  const schema = options.schema ?? 'tollgate';
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  const s = `"${schema}"`;
  const lockKey = hashToInt(schema);
  // Concurrent first starts race on CREATE ... IF NOT EXISTS; a session advisory lock orders them.
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [lockKey + 1]);
    for (const stmt of splitDdl(eventStoreDdl(schema, lockKey))) await tx.query(stmt);
  });

  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  await db.listen(`${schema}_events`, (payload) => appended.emit('position', Number(payload)));

  async function resolveExpected(req: AppendRequest): Promise<number> {
    if (req.expectedRevision === 'no_stream') return -1;
    if (req.expectedRevision === 'any') {
      const rows = await db.query<{ revision: number }>(`SELECT revision FROM ${s}.streams WHERE stream = $1`, [req.stream]);
      return rows[0]?.revision ?? -1;
    }
    return req.expectedRevision;
  }

  function prepare(req: AppendRequest, expected: number) {
    assertStreamName(req.stream);
    if (req.events.length === 0) throw new Error('an append needs at least one event');
    const timestamp = new Date().toISOString();
    const bodies = req.events.map((e, i) => {
      options.validate?.(e);
      return eventBody({
        id: e.id ?? randomUUID(), stream: req.stream, revision: expected + 1 + i, type: e.type,
        timestamp, data: e.data, metadata: e.metadata,
      });
    });
    const entry: Record<string, unknown> = { stream: req.stream, expected, events: bodies };
    if (req.snapshot !== undefined) entry.snapshot = req.snapshot;
    return entry;
  }

  async function appendMany(requests: AppendRequest[]): Promise<Array<AppendResult | Error>> {
    const results: Array<AppendResult | Error> = new Array(requests.length);
    const batch: Record<string, unknown>[] = [];
    const indexes: number[] = [];
    for (let i = 0; i < requests.length; i++) {
      try {
        batch.push(prepare(requests[i], await resolveExpected(requests[i])));
        indexes.push(i);
      } catch (err) {
        results[i] = err as Error;
      }
    }
    if (batch.length > 0) {
      const rows = await db.query<{ r: Array<Record<string, number | boolean | string>> }>(
        `SELECT ${s}.append($1::jsonb) AS r`, [JSON.stringify(batch)]);
      rows[0].r.forEach((r, j) => {
        const req = requests[indexes[j]];
        if (r.ok) {
          results[indexes[j]] = { stream: req.stream, revision: r.revision as number, firstPosition: r.first as number, lastPosition: r.last as number };
          appended.emit('position', r.last as number);
        } else if (r.duplicate) {
          results[indexes[j]] = new DuplicateEventError(String(r.duplicate));
        } else {
          results[indexes[j]] = new WrongExpectedRevisionError(req.stream, batch[j].expected as number, r.actual as number);
        }
      });
    }
    return results;
  }

  async function readAll(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    const rows = await db.query<EventRow>(
      `SELECT * FROM ${s}.events WHERE position > $1 ORDER BY position LIMIT $2`, [afterPosition, limit]);
    return rows.map(toStored);
  }

  return {
    kind: db.kind,
    async append(request) {
      const [result] = await appendMany([request]);
      if (result instanceof Error) throw result;
      return result;
    },
    appendMany,
    async readStream(stream, fromRevision = 0) {
      const rows = await db.query<EventRow>(
        `SELECT * FROM ${s}.events WHERE stream = $1 AND revision >= $2 ORDER BY revision`, [stream, fromRevision]);
      return rows.map(toStored);
    },
    readAll,
    async readSnapshot(stream): Promise<Snapshot | null> {
      const rows = await db.query<{ snapshot: unknown; snapshot_revision: number | null }>(
        `SELECT snapshot, snapshot_revision FROM ${s}.streams WHERE stream = $1`, [stream]);
      const row = rows[0];
      return row && row.snapshot_revision !== null ? { revision: row.snapshot_revision, state: row.snapshot } : null;
    },
    async headPosition() {
      const rows = await db.query<{ p: number | null }>(`SELECT max(position) AS p FROM ${s}.events`);
      return Number(rows[0].p ?? 0);
    },
    subscribe(afterPosition: number, handler: EventHandler): Subscription {
      return pollingSubscription({
        afterPosition, handler, readAll, head: async () => Number((await db.query<{ p: number | null }>(`SELECT max(position) AS p FROM ${s}.events`))[0].p ?? 0),
        notifier: appended, pollIntervalMs: options.pollIntervalMs ?? 1000,
      });
    },
    async close() {
      appended.removeAllListeners();
    },
  };
}

function toStored(r: EventRow): StoredEvent {
  return {
    id: r.id, type: r.type, stream: r.stream, revision: r.revision, position: Number(r.position),
    timestamp: r.created_at.toISOString(), data: r.data, metadata: r.metadata,
    prevHash: r.prev_hash, hash: r.hash,
  };
}

function hashToInt(text: string): number {
  let h = 0;
  for (const ch of text) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
  return h;
}

// Splits DDL at top-level semicolons, keeping $fn$ bodies whole (prepared statements take one each).
function splitDdl(ddl: string): string[] {
  const out: string[] = [];
  let current = '';
  let inBody = false;
  for (const line of ddl.split('\n')) {
    if ((line.match(/\$fn\$/g) ?? []).length % 2 === 1) inBody = !inBody;
    current += line + '\n';
    if (!inBody && line.trimEnd().endsWith(';')) {
      out.push(current.trim());
      current = '';
    }
  }
  if (current.trim()) out.push(current.trim());
  return out.filter((q) => q.replace(/--.*$/gm, '').trim().length > 0);
}
