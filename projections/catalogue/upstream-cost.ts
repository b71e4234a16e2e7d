// Upstream cost as the reports read it. The cost fold (cost-book.ts) prices and books each call
// as it is folded, and keeps the cost per day (upstream_cost_days): the report, the cost list and
// the journal sum those rows. Pricing a window when read (forEachPricedCall: each call at the rate
// in force at its time, the latest effective at or before it, of two at the same time the later
// set, booked in its series in log order) stays as the reference the fold is tested against and
// as the whole-log fold's. A call no rate prices is unpriced, never free.
import type { Queryable } from '../../src/eventstore/db.ts';
import { type CallUsage, COST_DENOMINATOR, exactCost, rateInForce, ratesInForceDuring } from '../../src/money/upstream-cost.ts';
import { bookedExact } from '../../src/money/money.ts';
import type { Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';
import { rateOfRow, type StoredRate, upstreamCalls, upstreamCostDays, upstreamCostRates, usageOfRow } from './cost-tables.ts';

export { upstreamCalls, upstreamCostRates, type StoredRate } from './cost-tables.ts';

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

/** The channel of each of these charges (keyed by its event id), for a correction's bookings. */
export async function callChannels(db: Queryable, schema: string, chargeEventIds: string[]): Promise<Map<string, string>> {
  const rows = await db.query<Row>(`SELECT key, channel FROM ${q(schema, upstreamCalls.table)} WHERE key = ANY($1::text[])`, [chargeEventIds]);
  return new Map(rows.map((r) => [String(r.key), String(r.channel)]));
}

/** Every rate set, by channel, upstream model, effective time and log order. */
export async function allRates(db: Queryable, schema: string): Promise<StoredRate[]> {
  const rows = await db.query<Row>(
    `SELECT * FROM ${q(schema, upstreamCostRates.table)} ORDER BY channel COLLATE "C", upstream_model COLLATE "C", effective_at, position`,
  );
  return rows.map(rateOfRow);
}

/** Every rate set, per channel and upstream model (key: both as JSON), in effective time then log order. */
async function ratesByPair(db: Queryable, schema: string): Promise<Map<string, StoredRate[]>> {
  const rates = new Map<string, StoredRate[]>();
  for (const r of await allRates(db, schema)) {
    const pair = JSON.stringify([r.channel, r.upstreamModel]);
    rates.set(pair, [...(rates.get(pair) ?? []), r]);
  }
  return rates;
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

/** Calls read per query: each page is one short statement (the server's statement timeout bounds every one). */
const PAGE = 5_000;

/** The calls of the UTC days `fromDay` to `toDay` (both included), a page at a time in (day, log position) order. */
async function forEachCallRow(db: Queryable, schema: string, fromDay: string, toDay: string, each: (r: Row) => void): Promise<void> {
  let after: [string, number] = [fromDay, -1];
  for (;;) {
    const rows = await db.query<Row>(
      `SELECT * FROM ${q(schema, upstreamCalls.table)}
       WHERE (day > $1 OR (day = $1 AND position > $2)) AND day <= $3
       ORDER BY day, position LIMIT ${PAGE}`,
      [after[0], after[1], toDay],
    );
    for (const r of rows) each(r);
    if (rows.length < PAGE) return;
    const last = rows[rows.length - 1];
    after = [String(last.day), Number(last.position)];
  }
}

const callOfRow = (r: Row): CallOf & { usage: CallUsage } => ({
  event_id: String(r.event_id),
  position: Number(r.position),
  at: r.at instanceof Date ? r.at.toISOString() : String(r.at),
  day: String(r.day),
  account_id: String(r.account_id),
  model: String(r.model),
  request_id: String(r.request_id),
  channel: String(r.channel),
  upstream_model: String(r.upstream_model),
  usage: usageOfRow(r),
});

/**
 * The reference: every call of the UTC days `fromDay` to `toDay` (both included) priced now, at
 * every rate set, and booked in its series (day, channel, upstream model) in log order: each call
 * gets round(total after) - round(total before). The cost fold must agree with it call for call.
 * Memory: one page, the rates and the series' totals.
 */
export async function forEachPricedCall(db: Queryable, schema: string, fromDay: string, toDay: string, each: (c: PricedCall) => void): Promise<void> {
  const rates = await ratesByPair(db, schema);
  const totals = new Map<string, bigint>();
  await forEachCallRow(db, schema, fromDay, toDay, (r) => {
    const call = callOfRow(r);
    const rate = rateInForce(rates.get(JSON.stringify([call.channel, call.upstream_model])) ?? [], call.at);
    const exact = rate ? exactCost(rate, call.usage) : null;
    let cost_minor: bigint | null = null;
    if (exact !== null) {
      const key = JSON.stringify([call.day, call.channel, call.upstream_model]);
      const before = totals.get(key) ?? 0n;
      totals.set(key, before + exact);
      cost_minor = bookedExact(before, before + exact, COST_DENOMINATOR);
    }
    each({ ...call, rate_event_id: exact === null ? null : rate!.eventId, exact, cost_minor });
  });
}

/** The reference's calls of the UTC days `fromDay` to `toDay` (both included), in (day, log position) order. */
export async function pricedCalls(db: Queryable, schema: string, fromDay: string, toDay: string): Promise<PricedCall[]> {
  const out: PricedCall[] = [];
  await forEachPricedCall(db, schema, fromDay, toDay, (c) => out.push(c));
  return out;
}

/** A call as the cost fold booked it. */
const bookedCallOf = (r: Row): PricedCall => ({
  ...callOfRow(r),
  rate_event_id: r.exact === null ? null : String(r.rate_event_id),
  exact: r.exact === null ? null : BigInt(String(r.exact)),
  cost_minor: r.cost_minor === null ? null : BigInt(String(r.cost_minor)),
});

/** The calls of the UTC days `fromDay` to `toDay` (both included) as the cost fold booked them, in (day, log position) order. */
export async function bookedCalls(db: Queryable, schema: string, fromDay: string, toDay: string): Promise<PricedCall[]> {
  const out: PricedCall[] = [];
  await forEachCallRow(db, schema, fromDay, toDay, (r) => out.push(bookedCallOf(r)));
  return out;
}

/** A page of those calls in log order after position `after` (null: from the first), and whether more follow. */
export async function bookedCallsPage(
  db: Queryable,
  schema: string,
  fromDay: string,
  toDay: string,
  after: number | null,
  limit: number,
): Promise<{ calls: PricedCall[]; hasMore: boolean }> {
  const rows = await db.query<Row>(
    `SELECT * FROM ${q(schema, upstreamCalls.table)} WHERE day >= $1 AND day <= $2 AND position > $3 ORDER BY position LIMIT ${limit + 1}`,
    [fromDay, toDay, after ?? -1],
  );
  return { calls: rows.slice(0, limit).map(bookedCallOf), hasMore: rows.length > limit };
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
  /**
   * With `withRates`: the rate events in force on the day for its channel and upstream model (the
   * journal's trail; the calls themselves are listed by the per-call cost list).
   */
  rate_event_ids?: string[];
}

/**
 * The upstream cost of the days $1 to $2 summed per day, account, model and channel (the finance
 * report's rows), as a query for another read to join: columns day, account_id, model, channel,
 * upstream_cost (minor units) and unpriced_calls.
 */
export const upstreamCostPerRowSql = (schema: string): string =>
  `SELECT day, account_id, model, channel, sum(cost_minor)::bigint AS upstream_cost, sum(unpriced_calls)::bigint AS unpriced_calls
   FROM ${q(schema, upstreamCostDays.table)} WHERE day >= $1 AND day <= $2 AND calls > 0 GROUP BY day, account_id, model, channel`;

const BYTE_ORDER = (cols: string[], alias = '') => cols.map((c) => `${alias}${c} COLLATE "C"`).join(', ');
const ROW_COLUMNS = ['day', 'account_id', 'model', 'channel', 'upstream_model'];

/**
 * Upstream cost per UTC day x account x model x channel x upstream model, for the days `fromDay`
 * to `toDay` (YYYY-MM-DD, both included), in that order (byte order): the cost fold's rows. With
 * `withRates`, each row also names the rates in force on its day.
 */
export async function upstreamCostBetween(
  db: Queryable,
  schema: string,
  fromDay: string,
  toDay: string,
  opts: { withRates?: boolean } = {},
): Promise<UpstreamCostRow[]> {
  const rows = await db.query<Row>(
    `SELECT ${ROW_COLUMNS.join(', ')}, calls, unpriced_calls, cost_minor FROM ${q(schema, upstreamCostDays.table)}
     WHERE day >= $1 AND day <= $2 AND calls > 0 ORDER BY ${BYTE_ORDER(ROW_COLUMNS)}`,
    [fromDay, toDay],
  );
  const out: UpstreamCostRow[] = rows.map((r) => ({
    day: String(r.day),
    account_id: String(r.account_id),
    model: String(r.model),
    channel: String(r.channel),
    upstream_model: String(r.upstream_model),
    calls: Number(r.calls),
    unpriced_calls: Number(r.unpriced_calls),
    cost_minor: String(r.cost_minor),
  }));
  if (!opts.withRates) return out;
  const rates = await ratesByPair(db, schema);
  // Per channel, upstream model and day: a day has many rows (one per account and model). Keys
  // joined with a character no id holds (thousands of rows a window).
  const inForce = new Map<string, string[]>();
  for (const row of out) {
    const key = `${row.channel}\u0000${row.upstream_model}\u0000${row.day}`;
    let ids = inForce.get(key);
    if (!ids) {
      const start = `${row.day}T00:00:00.000Z`;
      const end = new Date(Date.parse(start) + 86_400_000).toISOString();
      ids = ratesInForceDuring(rates.get(JSON.stringify([row.channel, row.upstream_model])) ?? [], start, end).map((r) => r.eventId);
      inForce.set(key, ids);
    }
    row.rate_event_ids = ids;
  }
  return out;
}
