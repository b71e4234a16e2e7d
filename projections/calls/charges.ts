// The charges log: one row a charge and a correction of one, with the reads of statements,
// usage exports and corrections.
import type { EventDataByType } from '../../src/ledger/events.ts';
import type { Queryable } from '../../src/eventstore/db.ts';
import { dayOf, defineProjection, eventData as data, type Row } from '../runner/row-projection.ts';

export interface ChargeRow extends Row {
  event_id: string;
  position: number;
  account_id: string;
  key_id: string | null;
  request_id: string;
  model: string;
  kind: 'chat' | 'image' | 'adjustment';
  at: string;
  day: string;
  prompt_tokens: number;
  completion_tokens: number;
  images: number;
  tokens_per_image: number;
  multiplier_milli: number;
  billed: number;
  from_quota: number;
  from_extra: number;
  correction_id: string | null;
  charge_event_id: string | null;
  cached_tokens: number;
  cache_write_tokens: number;
  cache_read_milli: number;
  cache_write_milli: number;
}

/** The per-request log behind statements: one row per charge and per adjustment. */
export const charges = defineProjection<ChargeRow>({
  name: 'charges',
  table: 'charges',
  columns: `event_id text NOT NULL, position bigint NOT NULL, account_id text NOT NULL, key_id text, request_id text NOT NULL,
    model text NOT NULL, kind text NOT NULL, at timestamptz NOT NULL, day text NOT NULL, prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL, images bigint NOT NULL, tokens_per_image bigint NOT NULL, multiplier_milli integer NOT NULL, billed bigint NOT NULL,
    from_quota bigint NOT NULL, from_extra bigint NOT NULL, correction_id text, charge_event_id text`,
  addedColumns: [
    'cached_tokens bigint NOT NULL DEFAULT 0',
    'cache_write_tokens bigint NOT NULL DEFAULT 0',
    'cache_read_milli integer NOT NULL DEFAULT 1000',
    'cache_write_milli integer NOT NULL DEFAULT 1000',
  ],
  // charge_event_id: a charge's adjustments, for what is billed for it now (corrections).
  // (…, at, position): the order statements and corrections page in, so a page is an index range
  // that stops at its LIMIT instead of sorting the rest of the period.
  indexes: ['account_id, at, position', 'model, at, position', 'charge_event_id'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ChargeAdjusted']),
  keysOf: (e) => [e.id],
  keyedByEvent: true,
  evolve(_row, e) {
    if (e.type === 'ChargeAdjusted') {
      const d = data<'ChargeAdjusted'>(e);
      return {
        event_id: e.id,
        position: e.position,
        at: e.timestamp,
        day: dayOf(e.timestamp),
        account_id: d.accountId,
        key_id: null,
        request_id: d.requestId,
        model: d.model,
        kind: 'adjustment',
        prompt_tokens: 0,
        completion_tokens: 0,
        images: 0,
        tokens_per_image: 0,
        multiplier_milli: d.multiplierMilliCorrected,
        billed: d.delta,
        from_quota: d.quotaDelta,
        from_extra: d.extraDelta - (d.extraCredited ?? 0),
        correction_id: d.correctionId,
        charge_event_id: d.chargeEventId,
        cached_tokens: 0,
        cache_write_tokens: 0,
        cache_read_milli: 1000,
        cache_write_milli: 1000,
      };
    }
    const d = data<'ChatCharged'>(e) as Partial<EventDataByType['ChatCharged'] & EventDataByType['ImageCharged']> & EventDataByType['ChatCharged'];
    // Fields written out, not spread: a spread-built literal takes V8's slow path, and this runs
    // once per charge on every rebuild.
    return {
      event_id: e.id,
      position: e.position,
      at: e.timestamp,
      day: dayOf(e.timestamp),
      account_id: d.accountId,
      key_id: d.keyId,
      request_id: d.requestId,
      model: d.model,
      kind: e.type === 'ChatCharged' ? 'chat' : 'image',
      prompt_tokens: d.promptTokens ?? 0,
      completion_tokens: d.completionTokens ?? 0,
      images: d.images ?? 0,
      tokens_per_image: d.tokensPerImage ?? 0,
      multiplier_milli: d.multiplierMilli,
      billed: d.billed,
      from_quota: d.fromQuota,
      from_extra: d.fromExtra,
      correction_id: null,
      charge_event_id: null,
      cached_tokens: d.cachedTokens ?? 0,
      cache_write_tokens: d.cacheWriteTokens ?? 0,
      cache_read_milli: d.cacheReadMilli ?? 1000,
      cache_write_milli: d.cacheWriteMilli ?? 1000,
    };
  },
});

/**
 * For a statement: a page of an account's charges and adjustments in [from, to), by time then log
 * position, after `after` (one index range of (account_id, at) per page).
 */
export async function ofAccountPage(
  db: Queryable,
  schema: string,
  accountId: string,
  from: string,
  to: string,
  after: ChargeCursor | null,
  limit: number,
): Promise<ChargeRow[]> {
  return pageAfter(db, `SELECT * FROM "${schema}".charges WHERE account_id = $1 AND at >= $2 AND at < $3`, [accountId, from, to], after, limit);
}

/** Where a page of charges ends: the next page starts after it (charge time, then log position). */
export interface ChargeCursor {
  at: string;
  position: number;
}

/** The rows of `select` (three parameters) by time then log position, after `after`: keyset paging. */
function pageAfter(db: Queryable, select: string, params: unknown[], after: ChargeCursor | null, limit: number): Promise<ChargeRow[]> {
  return after
    ? // at >= $4 as well: the bound the (…, at) index starts its range at (the row comparison alone would scan from the window's start).
      db.query<ChargeRow>(`${select} AND at >= $4::timestamptz AND (at, position) > ($4::timestamptz, $5::bigint) ORDER BY at, position LIMIT ${limit}`, [
        ...params,
        after.at,
        after.position,
      ])
    : db.query<ChargeRow>(`${select} ORDER BY at, position LIMIT ${limit}`, params);
}

/** A correction's window: the charges of `model` of these kinds charged in [from, to). */
export interface ChargeWindow {
  model: string;
  kinds: ReadonlyArray<'chat' | 'image'>;
  from: string;
  to: string;
}

const windowSql = (schema: string, w: ChargeWindow) => `FROM "${schema}".charges WHERE model = $1 AND kind IN (${kindList(w.kinds)}) AND at >= $2 AND at < $3`;

/**
 * For a correction: a page of the charges of `model` of these kinds charged in [from, to), by
 * charge time then log position, after `after`. Each page is one index range (model, at), so a
 * page costs the same at the end of a window of a million charges as at its start.
 */
export async function chargesPage(db: Queryable, schema: string, w: ChargeWindow, after: ChargeCursor | null, limit: number): Promise<ChargeRow[]> {
  return pageAfter(db, `SELECT * ${windowSql(schema, w)}`, [w.model, w.from, w.to], after, limit);
}

/**
 * Gathers the charge log's planner statistics if PostgreSQL has none yet (never analysed:
 * autovacuum off, or not come by since the table filled). Without them the look-up of a page's
 * adjustments by 2,000 charge ids was planned as a scan of the whole log: 0.4 s a page at 100,000
 * charges.
 */
export async function ensureChargeStatistics(db: Queryable, schema: string): Promise<void> {
  const [r] = await db.query<{ reltuples: string | number }>(
    `SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'charges'`,
    [schema],
  );
  if (r && Number(r.reltuples) < 0) await db.query(`ANALYZE "${schema}".charges`);
}

/** For a correction's progress: how many charges its window holds. */
export async function chargesInWindowCount(db: Queryable, schema: string, w: ChargeWindow): Promise<number> {
  const [r] = await db.query<{ n: string | number }>(`SELECT count(*) AS n ${windowSql(schema, w)}`, [w.model, w.from, w.to]);
  return Number(r.n);
}

export interface AdjustmentOfCharge {
  charge_event_id: string;
  correction_id: string;
  /** The adjustment's delta. */
  billed: number;
  /** Its quotaDelta. */
  from_quota: number;
  multiplier_milli: number;
}

/** For a correction: the adjustments already applied to these charges, in log order. */
export async function adjustmentsOfCharges(db: Queryable, schema: string, chargeEventIds: string[]): Promise<AdjustmentOfCharge[]> {
  if (chargeEventIds.length === 0) return [];
  return db.query<AdjustmentOfCharge>(
    `SELECT charge_event_id, correction_id, billed, from_quota, multiplier_milli FROM "${schema}".charges
    WHERE charge_event_id = ANY($1::text[]) AND kind = 'adjustment' ORDER BY position`,
    [chargeEventIds],
  );
}

const kindList = (kinds: ReadonlyArray<'chat' | 'image'>) =>
  kinds
    .filter((k) => k === 'chat' || k === 'image')
    .map((k) => `'${k}'`)
    .join(', ') || 'NULL';
