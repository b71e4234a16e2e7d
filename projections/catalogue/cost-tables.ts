// The tables of upstream cost (issue 41): every call with its usage and booked cost, every rate
// set, each series' running exact total, and the cost summed per day. One fold keeps the calls,
// the series and the days (cost-book.ts); the rates are a plain row projection it reads.
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import type { EventDataByType } from '../../src/ledger/events.ts';
import type { CallUsage, CostRate } from '../../src/money/upstream-cost.ts';
import { dayOf, defineProjection, eventData, foldedTable, type Row } from '../runner/row-projection.ts';
import { UNRECORDED } from './upstream-report.ts';
import { DAY_CHANGE_COLUMNS } from '../runner/day-changes.ts';

/**
 * One row per answered call (chat or image charge; key: its event id): who, which channel, the
 * usage split as rates price it, and its cost: the rate that priced it, the exact cost (10^-12
 * minor units, as text) and the minor units booked for it in its series (null: unpriced).
 */
export const upstreamCalls = foldedTable(
  'upstream_calls',
  `event_id text NOT NULL, position bigint NOT NULL, at timestamptz NOT NULL, day text NOT NULL, account_id text NOT NULL,
    model text NOT NULL, request_id text NOT NULL, channel text NOT NULL, upstream_model text NOT NULL, input bigint NOT NULL,
    cache_read bigint NOT NULL, cache_write_5m bigint NOT NULL, cache_write_1h bigint NOT NULL, output bigint NOT NULL, images bigint NOT NULL`,
  // A series in log order (its re-pricing, the reconciliation); a window's calls in log order (the per-call list).
  ['day, channel, upstream_model, position', 'day, position'],
  // Added with the cost fold: a gateway upgraded from a version without it prices older calls with `tollgate replay`.
  { keyedByEvent: true, addedColumns: ['rate_event_id text', 'exact text', 'cost_minor bigint'] },
);

/** The usage columns of a call's row, from its charge event. */
export function callRowOf(e: ProjectedEvent): Row {
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
}

/** The booked cost per UTC day x account x model x channel x upstream model: the finance report's and the cost list's rows. */
export const upstreamCostDays = foldedTable(
  'upstream_cost_days',
  `day text NOT NULL, account_id text NOT NULL, model text NOT NULL, channel text NOT NULL, upstream_model text NOT NULL,
    calls bigint NOT NULL, unpriced_calls bigint NOT NULL, cost_minor bigint NOT NULL`,
  ['day'],
);

/** The last event that changed each UTC day's upstream cost or the rates in force on it (key: the day), as book_day_changes for the bookings. */
export const upstreamCostDayChanges = foldedTable('upstream_cost_day_changes', DAY_CHANGE_COLUMNS);

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

/** A rate as its row holds it, with the event that set it and that event's place in the log. */
export interface StoredRate extends CostRate {
  eventId: string;
  position: number;
}

export const rateOfRow = (r: Row): StoredRate => ({
  eventId: String(r.event_id),
  position: Number(r.position),
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

/** A call's usage as its row holds it. */
export const usageOfRow = (r: Row): CallUsage => ({
  input: Number(r.input),
  cacheRead: Number(r.cache_read),
  cacheWrite5m: Number(r.cache_write_5m),
  cacheWrite1h: Number(r.cache_write_1h),
  output: Number(r.output),
  images: Number(r.images),
});
