// Upstream cost: each call's usage as the upstream reported it (upstream_calls) and every cost rate
// set (upstream_cost_rates), both pure folds of the log. Cost is computed when read: each call at
// the rate in force at its time (the latest effective time at or before it; of two rates effective
// at the same time, the later set), so a rate fixed after the fact re-prices the calls it covers,
// and a rebuild from zero gives the same figures. A call no rate prices is unpriced, never free.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { EventDataByType } from '../../src/ledger/events.ts';
import { type CallUsage, COST_DENOMINATOR, type CostRate, exactCost } from '../../src/money/upstream-cost.ts';
import { bookedExact } from '../../src/money/money.ts';
import { dayOf, defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';
import { UNRECORDED } from './upstream-report.ts';

/** Which call: its charge event, time, account, public model and the channel that answered it. */
interface CallOf {
  event_id: string;
  position: number;
  at: string;
  day: string;
  account_id: string;
  model: string;
  request_id: string;
  channel: string;
  upstream_model: string;
}

interface CallRow extends Row, CallOf {
  input: number;
  cache_read: number;
  cache_write_5m: number;
  cache_write_1h: number;
  output: number;
  images: number;
}

/** One row per answered call (chat or image charge): who, which channel, and the usage split as rates price it. */
export const upstreamCalls = defineProjection<CallRow>({
  name: 'upstream_calls',
  table: 'upstream_calls',
  columns: `event_id text NOT NULL, position bigint NOT NULL, at timestamptz NOT NULL, day text NOT NULL, account_id text NOT NULL,
    model text NOT NULL, request_id text NOT NULL, channel text NOT NULL, upstream_model text NOT NULL, input bigint NOT NULL,
    cache_read bigint NOT NULL, cache_write_5m bigint NOT NULL, cache_write_1h bigint NOT NULL, output bigint NOT NULL, images bigint NOT NULL`,
  // (day, channel, upstream_model): a window's series; (at, position): the per-call listing's pages.
  indexes: ['day, channel, upstream_model', 'at, position'],
  handles: new Set(['ChatCharged', 'ImageCharged']),
  keysOf: (e) => [e.id],
  keyedByEvent: true,
  evolve(_row, e) {
    const d = eventData<'ChatCharged'>(e) as Partial<EventDataByType['ChatCharged'] & EventDataByType['ImageCharged']> & EventDataByType['ChatCharged'];
    const cached = d.cachedTokens ?? 0;
    const written = d.cacheWriteTokens ?? 0;
    const hour = Math.min(d.cacheWrite1hTokens ?? 0, written);
    return {
      event_id: e.id,
      position: e.position,
      at: e.timestamp,
      day: dayOf(e.timestamp),
      account_id: d.accountId,
      model: d.model,
      request_id: d.requestId,
      channel: d.channel || UNRECORDED,
      upstream_model: d.upstreamModel || UNRECORDED,
      // The prompt count includes the cached and cache-written tokens (the upstream report's rule).
      input: Math.max(0, (d.promptTokens ?? 0) - cached - written),
      cache_read: cached,
      // Charges before the split was recorded hold no 1-hour count: their writes are 5-minute ones.
      cache_write_5m: written - hour,
      cache_write_1h: hour,
      output: d.completionTokens ?? 0,
      images: d.images ?? 0,
    };
  },
});

/** The channel of each of these charges (keyed by its event id), for a correction's bookings. */
export async function callChannels(db: Queryable, schema: string, chargeEventIds: string[]): Promise<Map<string, string>> {
  const rows = await db.query<Row>(`SELECT key, channel FROM ${q(schema, upstreamCalls.table)} WHERE key = ANY($1::text[])`, [chargeEventIds]);
  return new Map(rows.map((r) => [String(r.key), String(r.channel)]));
}

interface RateRow extends Row {
  event_id: string;
  position: number;
  channel: string;
  upstream_model: string;
  effective_at: string;
  currency: string;
  input: string;
  cache_read: string;
  cache_write_5m: string;
  cache_write_1h: string;
  output: string;
  image: string | null;
}

/** Every cost rate ever set (history is kept: a rate applies to calls from its effective time on). */
export const upstreamCostRates = defineProjection<RateRow>({
  name: 'upstream_cost_rates',
  table: 'upstream_cost_rates',
  columns: `event_id text NOT NULL, position bigint NOT NULL, channel text NOT NULL, upstream_model text NOT NULL,
    effective_at timestamptz NOT NULL, currency text NOT NULL, input text NOT NULL, cache_read text NOT NULL,
    cache_write_5m text NOT NULL, cache_write_1h text NOT NULL, output text NOT NULL, image text`,
  indexes: ['channel, upstream_model, effective_at'],
  handles: new Set(['UpstreamCostRateSet']),
  keysOf: (e) => [e.id],
  keyedByEvent: true,
  evolve(_row, e) {
    const d = eventData<'UpstreamCostRateSet'>(e);
    return {
      event_id: e.id,
      position: e.position,
      channel: d.channel,
      upstream_model: d.upstreamModel,
      effective_at: d.effectiveAt,
      currency: d.currency,
      input: d.input,
      cache_read: d.cacheRead,
      cache_write_5m: d.cacheWrite5m,
      cache_write_1h: d.cacheWrite1h,
      output: d.output,
      image: d.image,
    };
  },
});

/** A rate as a row holds it, with the event that set it. */
export interface StoredRate extends CostRate {
  eventId: string;
}

const rateOfRow = (r: Row): StoredRate => ({
  eventId: String(r.event_id),
  channel: String(r.channel),
  upstreamModel: String(r.upstream_model),
  currency: String(r.currency),
  effectiveAt: r.effective_at instanceof Date ? r.effective_at.toISOString() : String(r.effective_at),
  input: String(r.input),
  cacheRead: String(r.cache_read),
  cacheWrite5m: String(r.cache_write_5m),
  cacheWrite1h: String(r.cache_write_1h),
  output: String(r.output),
  image: r.image === null ? null : String(r.image),
});

/** Every rate set, by channel, upstream model, effective time and log order. */
export async function allRates(db: Queryable, schema: string): Promise<StoredRate[]> {
  const rows = await db.query<Row>(
    `SELECT * FROM ${q(schema, upstreamCostRates.table)} ORDER BY channel COLLATE "C", upstream_model COLLATE "C", effective_at, position`,
  );
  return rows.map(rateOfRow);
}

/** One call with its cost: the rate that priced it and the minor units booked for it (null: unpriced). */
export interface PricedCall extends CallOf {
  usage: CallUsage;
  rate_event_id: string | null;
  /** Exact cost in 10^-12 minor units (null: unpriced). */
  exact: bigint | null;
  /** Minor units booked for the call by the rounding rule in its series (null: unpriced). */
  cost_minor: bigint | null;
}

const RATE_COLUMNS = [
  'event_id',
  'channel',
  'upstream_model',
  'effective_at',
  'currency',
  'input',
  'cache_read',
  'cache_write_5m',
  'cache_write_1h',
  'output',
  'image',
];

/** Calls read per query: each page is one short statement (the server's statement timeout bounds every one). */
const PAGE = 5_000;

/**
 * Every call of the UTC days `fromDay` to `toDay` (both included), priced and booked, to `each` in
 * log time order, a page at a time (the (at, position) index): each series (day, channel, upstream
 * model) keeps its running exact total, so each call books round(total after) - round(total
 * before), the same figures as booking each series whole. Memory: one page and the series' totals.
 */
export async function forEachPricedCall(db: Queryable, schema: string, fromDay: string, toDay: string, each: (c: PricedCall) => void): Promise<void> {
  const totals = new Map<string, bigint>();
  const from = `${fromDay}T00:00:00.000Z`;
  const to = new Date(Date.parse(`${toDay}T00:00:00.000Z`) + 86_400_000).toISOString();
  let after: [string, number] = [from, -1];
  for (;;) {
    const rows = await db.query<Row>(
      `SELECT c.*, ${RATE_COLUMNS.map((col) => `r.${col} AS rate_${col}`).join(', ')}
       FROM ${q(schema, upstreamCalls.table)} c
       LEFT JOIN LATERAL (
         SELECT * FROM ${q(schema, upstreamCostRates.table)} r
         WHERE r.channel = c.channel AND r.upstream_model = c.upstream_model AND r.effective_at <= c.at
         ORDER BY r.effective_at DESC, r.position DESC LIMIT 1) r ON true
       WHERE c.at < $2::timestamptz AND (c.at, c.position) > ($1::timestamptz, $3::bigint) AND c.day >= $4 AND c.day <= $5
       ORDER BY c.at, c.position LIMIT ${PAGE}`,
      [after[0], to, after[1], fromDay, toDay],
    );
    for (const r of rows) {
      const call = pricedCallOf(r);
      if (call.exact !== null) {
        const key = JSON.stringify([call.day, call.channel, call.upstream_model]);
        const before = totals.get(key) ?? 0n;
        totals.set(key, before + call.exact);
        call.cost_minor = bookedExact(before, before + call.exact, COST_DENOMINATOR);
      }
      each(call);
    }
    if (rows.length < PAGE) return;
    const last = rows[rows.length - 1];
    after = [last.at instanceof Date ? last.at.toISOString() : String(last.at), Number(last.position)];
  }
}

function pricedCallOf(r: Row): PricedCall {
  const usage: CallUsage = {
    input: Number(r.input),
    cacheRead: Number(r.cache_read),
    cacheWrite5m: Number(r.cache_write_5m),
    cacheWrite1h: Number(r.cache_write_1h),
    output: Number(r.output),
    images: Number(r.images),
  };
  const rate = r.rate_event_id === null ? null : rateOfRow(Object.fromEntries(RATE_COLUMNS.map((col) => [col, r[`rate_${col}`]])));
  return {
    event_id: String(r.event_id),
    position: Number(r.position),
    at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
    day: String(r.day),
    account_id: String(r.account_id),
    model: String(r.model),
    request_id: String(r.request_id),
    channel: String(r.channel),
    upstream_model: String(r.upstream_model),
    usage,
    rate_event_id: rate?.eventId ?? null,
    exact: rate ? exactCost(rate, usage) : null,
    cost_minor: null,
  };
}

/** The calls of the UTC days `fromDay` to `toDay` (both included), priced and booked, in log time order. */
export async function pricedCalls(db: Queryable, schema: string, fromDay: string, toDay: string): Promise<PricedCall[]> {
  const out: PricedCall[] = [];
  await forEachPricedCall(db, schema, fromDay, toDay, (c) => out.push(c));
  return out;
}

export interface UpstreamCostRow {
  day: string;
  account_id: string;
  model: string;
  channel: string;
  upstream_model: string;
  calls: number;
  unpriced_calls: number;
  /** Integer minor units of the ledger currency (the calls' booked costs; unpriced calls add nothing). */
  cost_minor: string;
  /** With `withEvents`: the charge events of the calls and the rate events that priced them (the journal's trail). */
  charge_event_ids?: string[];
  rate_event_ids?: string[];
}

/**
 * Upstream cost per UTC day x account x model x channel x upstream model, for the days `fromDay`
 * to `toDay` (YYYY-MM-DD, both included), in that order (byte order).
 */
export async function upstreamCostBetween(
  db: Queryable,
  schema: string,
  fromDay: string,
  toDay: string,
  opts: { withEvents?: boolean } = {},
): Promise<UpstreamCostRow[]> {
  const rows = new Map<string, UpstreamCostRow & { cost: bigint; charges: string[]; rates: Set<string> }>();
  await forEachPricedCall(db, schema, fromDay, toDay, (c) => {
    const key = JSON.stringify([c.day, c.account_id, c.model, c.channel, c.upstream_model]);
    let row = rows.get(key);
    if (!row) {
      row = {
        day: c.day,
        account_id: c.account_id,
        model: c.model,
        channel: c.channel,
        upstream_model: c.upstream_model,
        calls: 0,
        unpriced_calls: 0,
        cost_minor: '0',
        cost: 0n,
        charges: [],
        rates: new Set(),
      };
      rows.set(key, row);
    }
    row.calls++;
    if (c.cost_minor === null) row.unpriced_calls++;
    else row.cost += c.cost_minor;
    if (opts.withEvents) {
      row.charges.push(c.event_id);
      if (c.rate_event_id) row.rates.add(c.rate_event_id);
    }
  });
  const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
  return [...rows.values()]
    .map(({ cost, charges, rates, ...r }) => ({
      ...r,
      cost_minor: cost.toString(),
      ...(opts.withEvents ? { charge_event_ids: charges, rate_event_ids: [...rates] } : {}),
    }))
    .sort(
      (a, b) =>
        byteOrder(a.day, b.day) ||
        byteOrder(a.account_id, b.account_id) ||
        byteOrder(a.model, b.model) ||
        byteOrder(a.channel, b.channel) ||
        byteOrder(a.upstream_model, b.upstream_model),
    );
}
