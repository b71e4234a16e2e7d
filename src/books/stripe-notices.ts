// Stripe's notices as received: each event kept raw (its id, type, the id of the object it is
// about, when Stripe created it, the exact body it was signed over, when it came) before any
// handler reads it, so a handler fixed later can be run again over what already came
// (stripe-replay.ts). One row per Stripe event id, however often Stripe delivers it; the last
// handling's outcome (or error) is written beside it. In the event store's schema, beside the
// idempotency claims: not part of the ledger (what a notice booked is there), shared by every
// gateway on the database.
import type { Database, Queryable } from '../eventstore/db.ts';

/** A stored notice, as a replay reads it. */
export interface StoredNotice {
  seq: number;
  eventId: string;
  type: string;
  objectId: string | null;
  created: Date;
  receivedAt: Date;
  /** The body exactly as Stripe sent (and signed) it. */
  body: string;
}

/** Which stored notices a replay runs over, in the order they came. */
export interface NoticeSelection {
  /** Only notices received at or after this time. */
  since?: Date;
  /** Only this notice. */
  eventId?: string;
  /** Only notices that came after this one (paging). */
  startingAfter?: string;
  limit: number;
}

interface NoticeRow {
  seq: number | string;
  event_id: string;
  type: string;
  object_id: string | null;
  created: Date | string;
  received_at: Date | string;
  body: string;
}

const noticeOf = (r: NoticeRow): StoredNotice => ({
  seq: Number(r.seq),
  eventId: r.event_id,
  type: r.type,
  objectId: r.object_id,
  created: new Date(r.created),
  receivedAt: new Date(r.received_at),
  body: r.body,
});

export async function ensureStripeNoticeTable(db: Database, schema: string): Promise<void> {
  await db.transaction(async (tx) => {
    // Two gateways starting at once would race on CREATE ... IF NOT EXISTS.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${schema}:stripe-notices-ddl`]);
    await tx.query(`CREATE TABLE IF NOT EXISTS "${schema}".stripe_notices (
      event_id text PRIMARY KEY, seq bigserial NOT NULL UNIQUE, type text NOT NULL, object_id text, created timestamptz NOT NULL,
      body text NOT NULL, received_at timestamptz NOT NULL DEFAULT now(), handled_at timestamptz, outcome text, error text)`);
    await tx.query(`CREATE INDEX IF NOT EXISTS stripe_notices_object ON "${schema}".stripe_notices (object_id, created)`);
    await tx.query(`CREATE INDEX IF NOT EXISTS stripe_notices_received ON "${schema}".stripe_notices (received_at)`);
  });
}

export function stripeNoticeStore(db: Queryable, schema: string) {
  const table = `"${schema}".stripe_notices`;
  return {
    /** Keeps a notice; false when its event id was kept already (a delivery again: the first copy stays). */
    async keep(n: { eventId: string; type: string; objectId: string | null; created: number; body: string }): Promise<boolean> {
      const rows = await db.query(
        `INSERT INTO ${table} (event_id, type, object_id, created, body) VALUES ($1, $2, $3, to_timestamp($4::float8), $5)
         ON CONFLICT (event_id) DO NOTHING RETURNING 1`,
        [n.eventId, n.type, n.objectId, n.created, n.body],
      );
      return rows.length > 0;
    },
    /** What the last handling of a notice came to: its outcome, or the error it stopped on. */
    async handled(eventId: string, result: { outcome: string } | { error: string }): Promise<void> {
      await db.query(`UPDATE ${table} SET handled_at = now(), outcome = $2, error = $3 WHERE event_id = $1`, [
        eventId,
        'outcome' in result ? result.outcome : null,
        'error' in result ? result.error.slice(0, 1000) : null,
      ]);
    },
    /** Stored notices in the order they came, as `sel` picks them. */
    async select(sel: NoticeSelection): Promise<StoredNotice[]> {
      const rows = await db.query<NoticeRow>(
        `SELECT seq, event_id, type, object_id, created, received_at, body FROM ${table}
          WHERE ($1::timestamptz IS NULL OR received_at >= $1::timestamptz)
            AND ($2::text IS NULL OR event_id = $2::text)
            AND ($3::text IS NULL OR seq > (SELECT seq FROM ${table} WHERE event_id = $3::text))
          ORDER BY seq LIMIT $4::int`,
        [sel.since?.toISOString() ?? null, sel.eventId ?? null, sel.startingAfter ?? null, sel.limit],
      );
      return rows.map(noticeOf);
    },
    /**
     * The id of a notice of one of `types` about the same object that Stripe created after `n`
     * (the same second: that came after it), or null. Such a notice carries the object's later state.
     */
    async laterAbout(n: Pick<StoredNotice, 'objectId' | 'created' | 'seq'>, types: readonly string[]): Promise<string | null> {
      if (!n.objectId) return null;
      const [row] = await db.query<{ event_id: string }>(
        `SELECT event_id FROM ${table} WHERE object_id = $1 AND type = ANY($2::text[]) AND (created, seq) > ($3::timestamptz, $4::bigint)
          ORDER BY created DESC, seq DESC LIMIT 1`,
        [n.objectId, [...types], n.created.toISOString(), n.seq],
      );
      return row?.event_id ?? null;
    },
  };
}

export type StripeNoticeStore = ReturnType<typeof stripeNoticeStore>;
