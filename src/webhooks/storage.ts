// The webhook dispatcher's tables, and the only SQL of src/webhooks. They live in the event
// store's schema (not the read models' one, which a rebuild replaces): the dispatcher's checkpoint,
// the registrations it has seen (a projection of WebhookRegistered / WebhookRemoved, moved with the
// checkpoint), and the deliveries: an outbox keyed by (webhook, notification id) with status,
// attempts, next attempt, last error and response status. The outbox rows and the checkpoint
// commit in one transaction, so a restart neither loses a notification nor queues one twice.
import pg from 'pg';
import { sessionBounds, type Database, type Queryable } from '../eventstore/db.ts';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed', 'cancelled'];

/** A registration as the dispatcher keeps it. */
export interface RegistryRow {
  webhookId: string;
  accountId: string;
  url: string;
  events: string[];
  thresholds: number[];
  expiringDays: number;
  signingKeyId: string;
  registeredAt: string;
  position: number;
  removedMs: number | null;
}

/** A notification for one webhook, to be queued. */
export interface OutboxRow {
  deliveryId: string;
  webhookId: string;
  accountId: string;
  notificationId: string;
  type: string;
  /** The JSON body, exactly as it is sent (and signed) on every attempt. */
  body: string;
  createdMs: number;
  nextAttemptMs: number;
  deadlineMs: number;
}

export interface DeliveryRow extends OutboxRow {
  seq: number;
  status: DeliveryStatus;
  attempts: number;
  lastAttemptMs: number | null;
  lastError: string | null;
  responseStatus: number | null;
  deliveredMs: number | null;
  replays: number;
}

/** The next delivery of one webhook, with what sending it needs. */
export interface HeadRow extends DeliveryRow {
  url: string;
  signingKeyId: string;
}

export class CheckpointMoved extends Error {
  constructor(readonly actual: number) {
    super(`webhook checkpoint moved to ${actual} by another dispatcher`);
  }
}

const t = (schema: string, table: string) => `"${schema}".${table}`;

export async function ensureTables(db: Database, schema: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  await db.transaction(async (tx) => {
    // Concurrent first starts race on CREATE ... IF NOT EXISTS.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${schema}:webhooks-ddl`]);
    for (const stmt of [
      `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
      `CREATE TABLE IF NOT EXISTS ${t(schema, 'webhook_checkpoint')} (name text PRIMARY KEY, position bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
      `INSERT INTO ${t(schema, 'webhook_checkpoint')} (name, position) VALUES ('dispatcher', 0) ON CONFLICT DO NOTHING`,
      `CREATE TABLE IF NOT EXISTS ${t(schema, 'webhook_registry')} (
        webhook_id text PRIMARY KEY, account_id text NOT NULL, url text NOT NULL, events jsonb NOT NULL, thresholds jsonb NOT NULL,
        expiring_days integer NOT NULL, signing_key_id text NOT NULL, registered_at text NOT NULL, position bigint NOT NULL, removed_ms bigint)`,
      `CREATE INDEX IF NOT EXISTS webhook_registry_account ON ${t(schema, 'webhook_registry')} (account_id)`,
      `CREATE SEQUENCE IF NOT EXISTS ${t(schema, 'webhook_delivery_seq')}`,
      `CREATE TABLE IF NOT EXISTS ${t(schema, 'webhook_deliveries')} (
        delivery_id text PRIMARY KEY,
        seq bigint NOT NULL DEFAULT nextval('${t(schema, 'webhook_delivery_seq')}'),
        webhook_id text NOT NULL, account_id text NOT NULL, notification_id text NOT NULL, type text NOT NULL, body text NOT NULL,
        created_ms bigint NOT NULL, status text NOT NULL DEFAULT 'pending', attempts integer NOT NULL DEFAULT 0,
        next_attempt_ms bigint NOT NULL, deadline_ms bigint NOT NULL, last_attempt_ms bigint, last_error text, response_status integer,
        delivered_ms bigint, replays integer NOT NULL DEFAULT 0,
        UNIQUE (webhook_id, notification_id))`,
      `CREATE UNIQUE INDEX IF NOT EXISTS webhook_deliveries_seq ON ${t(schema, 'webhook_deliveries')} (seq)`,
      `CREATE INDEX IF NOT EXISTS webhook_deliveries_pending ON ${t(schema, 'webhook_deliveries')} (webhook_id, seq) WHERE status = 'pending'`,
      `CREATE INDEX IF NOT EXISTS webhook_deliveries_log ON ${t(schema, 'webhook_deliveries')} (webhook_id, seq DESC)`,
    ])
      await tx.query(stmt);
  });
}

export async function readCheckpoint(db: Queryable, schema: string): Promise<number> {
  const [row] = await db.query<{ position: number }>(`SELECT position FROM ${t(schema, 'webhook_checkpoint')} WHERE name = 'dispatcher'`);
  return Number(row?.position ?? 0);
}

interface RegistryRecord {
  webhook_id: string;
  account_id: string;
  url: string;
  events: string[];
  thresholds: number[];
  expiring_days: number;
  signing_key_id: string;
  registered_at: string;
  position: number;
  removed_ms: number | null;
}

const registryRow = (r: RegistryRecord): RegistryRow => ({
  webhookId: r.webhook_id,
  accountId: r.account_id,
  url: r.url,
  events: r.events,
  thresholds: r.thresholds,
  expiringDays: Number(r.expiring_days),
  signingKeyId: r.signing_key_id,
  registeredAt: r.registered_at,
  position: Number(r.position),
  removedMs: r.removed_ms === null ? null : Number(r.removed_ms),
});

/** Registrations not removed, as of the checkpoint. */
export async function activeRegistrations(db: Queryable, schema: string): Promise<RegistryRow[]> {
  const rows = await db.query<RegistryRecord>(`SELECT * FROM ${t(schema, 'webhook_registry')} WHERE removed_ms IS NULL ORDER BY position`);
  return rows.map(registryRow);
}

export async function registration(db: Queryable, schema: string, webhookId: string): Promise<RegistryRow | null> {
  const [row] = await db.query<RegistryRecord>(`SELECT * FROM ${t(schema, 'webhook_registry')} WHERE webhook_id = $1`, [webhookId]);
  return row ? registryRow(row) : null;
}

async function insertOutbox(tx: Queryable, schema: string, rows: OutboxRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const col = <K extends keyof OutboxRow>(k: K) => rows.map((r) => r[k]);
  // In the given order, so the sequence numbers follow it; a notification already queued for the
  // webhook is left as it is.
  const inserted = await tx.query(
    `INSERT INTO ${t(schema, 'webhook_deliveries')} (delivery_id, webhook_id, account_id, notification_id, type, body, created_ms, next_attempt_ms, deadline_ms)
     SELECT d, w, a, n, ty, b, c, na, dl
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[])
            WITH ORDINALITY AS u(d, w, a, n, ty, b, c, na, dl, ord)
      ORDER BY ord
     ON CONFLICT DO NOTHING RETURNING delivery_id`,
    [
      col('deliveryId'),
      col('webhookId'),
      col('accountId'),
      col('notificationId'),
      col('type'),
      col('body'),
      col('createdMs'),
      col('nextAttemptMs'),
      col('deadlineMs'),
    ],
  );
  return inserted.length;
}

export interface Batch {
  /** The checkpoint this batch follows; another value means another dispatcher got there (CheckpointMoved). */
  expected: number;
  position: number;
  registered: RegistryRow[];
  rows: OutboxRow[];
  removed: Array<{ webhookId: string; removedMs: number }>;
}

/** One batch of the log: registrations, queued notifications, removals and the checkpoint, in one transaction. */
export async function commitBatch(db: Database, schema: string, b: Batch): Promise<number> {
  return db.transaction(async (tx) => {
    const [cp] = await tx.query<{ position: number }>(`SELECT position FROM ${t(schema, 'webhook_checkpoint')} WHERE name = 'dispatcher' FOR UPDATE`);
    if (Number(cp.position) !== b.expected) throw new CheckpointMoved(Number(cp.position));
    for (const r of b.registered) {
      await tx.query(
        `INSERT INTO ${t(schema, 'webhook_registry')} (webhook_id, account_id, url, events, thresholds, expiring_days, signing_key_id, registered_at, position)
         VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7, $8, $9) ON CONFLICT (webhook_id) DO NOTHING`,
        [r.webhookId, r.accountId, r.url, JSON.stringify(r.events), JSON.stringify(r.thresholds), r.expiringDays, r.signingKeyId, r.registeredAt, r.position],
      );
    }
    const inserted = await insertOutbox(tx, schema, b.rows);
    // After the rows: a webhook removed in this batch gets none of them either.
    for (const r of b.removed) {
      await tx.query(`UPDATE ${t(schema, 'webhook_registry')} SET removed_ms = $2 WHERE webhook_id = $1 AND removed_ms IS NULL`, [r.webhookId, r.removedMs]);
      await tx.query(
        `UPDATE ${t(schema, 'webhook_deliveries')} SET status = 'cancelled', last_error = 'webhook removed' WHERE webhook_id = $1 AND status = 'pending'`,
        [r.webhookId],
      );
    }
    await tx.query(`UPDATE ${t(schema, 'webhook_checkpoint')} SET position = $1, updated_at = now() WHERE name = 'dispatcher'`, [b.position]);
    return inserted;
  });
}

/** Notifications found by the clock (no checkpoint move); returns how many were new. */
export async function queue(db: Database, schema: string, rows: OutboxRow[]): Promise<number> {
  return db.transaction((tx) => insertOutbox(tx, schema, rows));
}

interface DeliveryRecord {
  delivery_id: string;
  seq: number;
  webhook_id: string;
  account_id: string;
  notification_id: string;
  type: string;
  body: string;
  created_ms: number;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_ms: number;
  deadline_ms: number;
  last_attempt_ms: number | null;
  last_error: string | null;
  response_status: number | null;
  delivered_ms: number | null;
  replays: number;
  url?: string;
  signing_key_id?: string;
}

const num = (v: number | null) => (v === null ? null : Number(v));
const deliveryRow = (r: DeliveryRecord): DeliveryRow => ({
  deliveryId: r.delivery_id,
  seq: Number(r.seq),
  webhookId: r.webhook_id,
  accountId: r.account_id,
  notificationId: r.notification_id,
  type: r.type,
  body: r.body,
  createdMs: Number(r.created_ms),
  status: r.status,
  attempts: Number(r.attempts),
  nextAttemptMs: Number(r.next_attempt_ms),
  deadlineMs: Number(r.deadline_ms),
  lastAttemptMs: num(r.last_attempt_ms),
  lastError: r.last_error,
  responseStatus: num(r.response_status),
  deliveredMs: num(r.delivered_ms),
  replays: Number(r.replays),
});

/**
 * The next delivery of each webhook with one pending (its oldest: a later one waits until it is
 * delivered or given up), skipping webhooks in `busy`, soonest due first.
 */
export async function pendingHeads(db: Queryable, schema: string, busy: string[], limit: number): Promise<HeadRow[]> {
  const rows = await db.query<DeliveryRecord>(
    `SELECT h.*, w.url, w.signing_key_id FROM (
       SELECT DISTINCT ON (webhook_id) * FROM ${t(schema, 'webhook_deliveries')} WHERE status = 'pending' ORDER BY webhook_id, seq
     ) h JOIN ${t(schema, 'webhook_registry')} w ON w.webhook_id = h.webhook_id AND w.removed_ms IS NULL
     WHERE NOT (h.webhook_id = ANY($1::text[]))
     ORDER BY h.next_attempt_ms LIMIT $2`,
    [busy, limit],
  );
  return rows.map((r) => ({ ...deliveryRow(r), url: r.url!, signingKeyId: r.signing_key_id! }));
}

export interface AttemptOutcome {
  deliveryId: string;
  /** The attempts count the sender saw: a row changed meanwhile (replayed, cancelled) is left alone. */
  attemptsBefore: number;
  atMs: number;
  status: DeliveryStatus;
  responseStatus: number | null;
  error: string | null;
  nextAttemptMs: number;
}

export async function recordAttempt(db: Queryable, schema: string, o: AttemptOutcome): Promise<boolean> {
  const rows = await db.query(
    `UPDATE ${t(schema, 'webhook_deliveries')}
        SET attempts = attempts + 1, last_attempt_ms = $3, status = $4, response_status = $5, last_error = $6, next_attempt_ms = $7,
            delivered_ms = CASE WHEN $4 = 'delivered' THEN $3::bigint ELSE delivered_ms END
      WHERE delivery_id = $1 AND status = 'pending' AND attempts = $2 RETURNING delivery_id`,
    [o.deliveryId, o.attemptsBefore, o.atMs, o.status, o.responseStatus, o.error, o.nextAttemptMs],
  );
  return rows.length === 1;
}

/** A webhook's deliveries, newest first. */
export async function deliveries(
  db: Queryable,
  schema: string,
  webhookId: string,
  q: { status?: DeliveryStatus; limit: number; beforeSeq?: number },
): Promise<DeliveryRow[]> {
  const rows = await db.query<DeliveryRecord>(
    `SELECT * FROM ${t(schema, 'webhook_deliveries')}
      WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::bigint IS NULL OR seq < $3)
      ORDER BY seq DESC LIMIT $4`,
    [webhookId, q.status ?? null, q.beforeSeq ?? null, q.limit],
  );
  return rows.map(deliveryRow);
}

export type ReplayResult = { ok: true; row: DeliveryRow } | { ok: false; reason: 'not_found' | 'pending' | 'removed' };

/**
 * Queues a delivery again, behind what the webhook has queued now: attempts start over, with a
 * new deadline. Refused while it is still pending, or when its webhook was removed.
 */
export async function replay(db: Database, schema: string, webhookId: string, deliveryId: string, nowMs: number, deadlineMs: number): Promise<ReplayResult> {
  return db.transaction(async (tx) => {
    const [row] = await tx.query<DeliveryRecord>(`SELECT * FROM ${t(schema, 'webhook_deliveries')} WHERE delivery_id = $1 AND webhook_id = $2 FOR UPDATE`, [
      deliveryId,
      webhookId,
    ]);
    if (!row) return { ok: false, reason: 'not_found' } as const;
    if (row.status === 'pending') return { ok: false, reason: 'pending' } as const;
    const [reg] = await tx.query<{ removed_ms: number | null }>(`SELECT removed_ms FROM ${t(schema, 'webhook_registry')} WHERE webhook_id = $1`, [webhookId]);
    if (!reg || reg.removed_ms !== null) return { ok: false, reason: 'removed' } as const;
    const [updated] = await tx.query<DeliveryRecord>(
      `UPDATE ${t(schema, 'webhook_deliveries')}
          SET status = 'pending', attempts = 0, next_attempt_ms = $2, deadline_ms = $3, replays = replays + 1,
              seq = nextval('${t(schema, 'webhook_delivery_seq')}')
        WHERE delivery_id = $1 RETURNING *`,
      [deliveryId, nowMs, deadlineMs],
    );
    return { ok: true, row: deliveryRow(updated) } as const;
  });
}

export interface Lease {
  release(): Promise<void>;
}

/**
 * The dispatcher's lease on PostgreSQL: a session advisory lock on a connection of its own, taken
 * if free (null if another process holds it). It ends with the session, so a process that dies
 * hands it on. `onLost` is told if the connection fails while it is held.
 */
export async function tryLease(url: string, name: string, onLost: (err: Error) => void): Promise<Lease | null> {
  const client = new pg.Client({ connectionString: url, ...sessionBounds });
  let released = false;
  client.on('error', (err) => {
    if (!released) onLost(err);
  });
  await client.connect();
  try {
    const [row] = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [name])).rows;
    if (!row?.ok) {
      released = true;
      await client.end();
      return null;
    }
  } catch (err) {
    released = true;
    await client.end().catch(() => undefined);
    throw err;
  }
  return {
    async release() {
      if (released) return;
      released = true;
      await client.end().catch(() => undefined);
    },
  };
}
