// The upstream cost fold (issue 41): each call is priced as it is folded, at the rate in force at
// its time, and booked in its series (one UTC day of one channel and upstream model, in log
// order) by the one rounding rule. A rate set after the fact re-books the series it reaches. The
// reports then sum rows (upstream_cost_days) instead of pricing every call of a window when read.
// The whole-window pricing in upstream-cost.ts (forEachPricedCall) stays as the reference it is
// tested against.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import { InvariantViolation } from '../../src/ledger/errors.ts';
import { bookedExact } from '../../src/money/money.ts';
import { COST_DENOMINATOR, exactCost, rateInForce, withRate } from '../../src/money/upstream-cost.ts';
import { dayOf, defineProjection, eventData, type Row } from '../runner/row-projection.ts';
import { q } from '../runner/sql.ts';
import type { UpstreamCostRow } from './upstream-cost.ts';
import {
  callRowOf,
  rateOfRow,
  type StoredRate,
  upstreamCalls,
  upstreamCostDayChanges,
  upstreamCostDays,
  upstreamCostRates,
  usageOfRow,
} from './cost-tables.ts';
import { noteDayChanges } from '../runner/day-changes.ts';

const CHARGES = new Set(['ChatCharged', 'ImageCharged']);
const pairKey = (channel: string, upstreamModel: string) => JSON.stringify([channel, upstreamModel]);
const seriesKey = (day: string, channel: string, upstreamModel: string) => JSON.stringify([day, channel, upstreamModel]);
const utcDay = (iso: string) => new Date(Date.parse(iso)).toISOString().slice(0, 10);

/** Calls of a series re-read per query when a rate re-books them. */
const REBOOK_PAGE = 5_000;

/** What a page changes in a row of upstream_cost_days. */
type DayChange = Omit<UpstreamCostRow, 'cost_minor' | 'charge_event_ids' | 'rate_event_ids'> & { cost_minor: bigint };

/** A call's cost: the rate that priced it, the exact cost and what its series booked for it (nulls: unpriced). */
interface CallCost {
  rate_event_id: string | null;
  exact: string | null;
  cost_minor: string | null;
}

/** The fold of one page: the rates and series totals it has read, and the writes it owes. */
class CostPage {
  /** Per channel and upstream model, the rates known at this point of the page (effective time, then log order). */
  private rates = new Map<string, StoredRate[]>();
  /** Each series' exact total at this point of the page (as loaded, then as folded). */
  private totals = new Map<string, bigint>();
  private newCalls: Row[] = [];
  private rebooked: Row[] = [];
  private changedTotals = new Set<string>();
  private days = new Map<string, DayChange>();
  /** The last event that changed each day's cost or rates in force (log order). */
  private changedDays = new Map<string, number>();

  /** `before`: the page's first position (rates read from the table are those set before it; the page's own come as it folds). */
  constructor(
    private readonly tx: Queryable,
    private readonly schema: string,
    private readonly before: number,
  ) {}

  /** Reads the rates of these channels and upstream models not read yet, and the series totals not known yet. */
  async load(pairs: Array<[string, string]>, series: string[]): Promise<void> {
    const missing = pairs.filter(([c, m]) => !this.rates.has(pairKey(c, m)));
    if (missing.length > 0) {
      for (const [c, m] of missing) this.rates.set(pairKey(c, m), []);
      const rows = await this.tx.query<Row>(
        `SELECT * FROM ${q(this.schema, upstreamCostRates.table)} r
         WHERE r.position < $3 AND (r.channel, r.upstream_model) IN (SELECT * FROM unnest($1::text[], $2::text[]))
         ORDER BY r.channel, r.upstream_model, r.effective_at, r.position`,
        [missing.map((p) => p[0]), missing.map((p) => p[1]), this.before],
      );
      for (const r of rows) this.rates.get(pairKey(String(r.channel), String(r.upstream_model)))!.push(rateOfRow(r));
    }
    const unknown = series.filter((k) => !this.totals.has(k));
    if (unknown.length > 0) {
      for (const k of unknown) this.totals.set(k, 0n);
      const rows = await this.tx.query<Row>(`SELECT key, exact_total FROM ${q(this.schema, upstreamCost.table)} WHERE key = ANY($1::text[])`, [unknown]);
      for (const r of rows) this.totals.set(String(r.key), BigInt(String(r.exact_total)));
    }
  }

  /** A call folded: priced, booked after the calls of its series so far, added to its day. */
  charge(e: ProjectedEvent): void {
    const row = callRowOf(e);
    const series = seriesKey(String(row.day), String(row.channel), String(row.upstream_model));
    const cost = this.book(row, series);
    this.newCalls.push({ key: e.id, ...row, ...cost });
    this.addToDay(row, 1, cost, null);
    this.changedDays.set(String(row.day), e.position);
  }

  /** A rate set: known from here on, and every series it reaches booked again. */
  async rate(e: ProjectedEvent): Promise<void> {
    const d = eventData<'UpstreamCostRateSet'>(e);
    const pair = pairKey(d.channel, d.upstreamModel);
    await this.load([[d.channel, d.upstreamModel]], []);
    const rate: StoredRate = { ...d, eventId: e.id, position: e.position };
    const rates = withRate(this.rates.get(pair)!, rate);
    this.rates.set(pair, rates);
    // It prices the calls from its effective time to the next rate's (of two at one time, the later set wins).
    const from = Date.parse(d.effectiveAt);
    const next = rates.find((r) => Date.parse(r.effectiveAt) > from);
    // The series re-read come from the table: the page's calls so far go there first.
    await this.flush();
    await this.rebook(d.channel, d.upstreamModel, utcDay(d.effectiveAt), next ? utcDay(next.effectiveAt) : null, e.position);
  }

  /**
   * Books every call of the channel's series from `fromDay` to `toDay` (null: the last) again, in
   * log order. Each of those days changes (its cost, or at least the rates in force on it) at `position`.
   */
  private async rebook(channel: string, upstreamModel: string, fromDay: string, toDay: string | null, position: number): Promise<void> {
    let after: [string, number] = [fromDay, -1];
    let day = '';
    let series = '';
    for (;;) {
      const rows = await this.tx.query<Row>(
        `SELECT * FROM ${q(this.schema, upstreamCalls.table)}
         WHERE channel = $1 AND upstream_model = $2 AND (day > $3 OR (day = $3 AND position > $4)) ${toDay ? 'AND day <= $5' : ''}
         ORDER BY day, position LIMIT ${REBOOK_PAGE}`,
        toDay ? [channel, upstreamModel, after[0], after[1], toDay] : [channel, upstreamModel, after[0], after[1]],
      );
      for (const r of rows) {
        if (r.day !== day) {
          day = String(r.day);
          this.changedDays.set(day, position);
          series = seriesKey(day, channel, upstreamModel);
          this.totals.set(series, 0n);
          this.changedTotals.add(series);
        }
        const was: CallCost = {
          rate_event_id: r.rate_event_id === null ? null : String(r.rate_event_id),
          exact: r.exact === null ? null : String(r.exact),
          cost_minor: r.cost_minor === null ? null : String(r.cost_minor),
        };
        const at = r.at instanceof Date ? r.at.toISOString() : String(r.at);
        const cost = this.book({ ...r, at }, series);
        if (cost.rate_event_id === was.rate_event_id && cost.exact === was.exact && cost.cost_minor === was.cost_minor) continue;
        this.rebooked.push({ day: r.day, channel, upstream_model: upstreamModel, position: Number(r.position), ...cost });
        this.addToDay(r, 0, cost, was);
      }
      if (rows.length < REBOOK_PAGE) return;
      const last = rows[rows.length - 1];
      after = [String(last.day), Number(last.position)];
    }
  }

  /** The call's cost at the rate in force at its time, booked after its series' total so far (which it moves). */
  private book(row: Row, series: string): CallCost {
    const rate = rateInForce(this.rates.get(pairKey(String(row.channel), String(row.upstream_model))) ?? [], String(row.at));
    const exact = rate ? exactCost(rate, usageOfRow(row)) : null;
    if (rate === null || exact === null) return { rate_event_id: rate?.eventId ?? null, exact: null, cost_minor: null };
    const before = this.totals.get(series);
    if (before === undefined) throw new InvariantViolation(`series ${series} folded before its total was read`);
    this.totals.set(series, before + exact);
    this.changedTotals.add(series);
    return { rate_event_id: rate.eventId, exact: exact.toString(), cost_minor: bookedExact(before, before + exact, COST_DENOMINATOR).toString() };
  }

  /** Adds a call (or the change of its cost from `was`) to its day's row. */
  private addToDay(r: Row, calls: number, cost: CallCost, was: CallCost | null): void {
    const key = JSON.stringify([r.day, r.account_id, r.model, r.channel, r.upstream_model]);
    let d = this.days.get(key);
    if (!d) {
      d = {
        day: String(r.day),
        account_id: String(r.account_id),
        model: String(r.model),
        channel: String(r.channel),
        upstream_model: String(r.upstream_model),
        calls: 0,
        unpriced_calls: 0,
        cost_minor: 0n,
      };
      this.days.set(key, d);
    }
    const unpriced = (c: CallCost | null) => (c !== null && c.cost_minor === null ? 1 : 0);
    const minor = (c: CallCost | null) => BigInt(c?.cost_minor ?? 0);
    d.calls += calls;
    d.unpriced_calls += unpriced(cost) - unpriced(was);
    d.cost_minor += minor(cost) - minor(was);
  }

  /** Writes what the page owes so far, in order (its reads after this see it). */
  async flush(): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    const send = (text: string, rows: Row[]) => {
      if (rows.length === 0) return;
      const w = this.tx.query(text, [JSON.stringify(rows)]);
      w.catch(() => undefined);
      writes.push(w);
    };
    const calls = q(this.schema, upstreamCalls.table);
    send(`INSERT INTO ${calls} SELECT * FROM json_populate_recordset(NULL::${calls}, $1::json)`, this.newCalls);
    // Found by the series index (a rebuild builds the key's index only at its end).
    send(
      `UPDATE ${calls} AS c SET rate_event_id = v.rate_event_id, exact = v.exact, cost_minor = v.cost_minor
       FROM json_populate_recordset(NULL::${calls}, $1::json) v
       WHERE c.day = v.day AND c.channel = v.channel AND c.upstream_model = v.upstream_model AND c.position = v.position`,
      this.rebooked,
    );
    const series = q(this.schema, upstreamCost.table);
    send(
      `INSERT INTO ${series} SELECT * FROM json_populate_recordset(NULL::${series}, $1::json) ON CONFLICT (key) DO UPDATE SET exact_total = excluded.exact_total`,
      [...this.changedTotals].map((key) => ({ key, exact_total: this.totals.get(key)!.toString() })),
    );
    const days = q(this.schema, upstreamCostDays.table);
    send(
      `INSERT INTO ${days} AS t SELECT * FROM json_populate_recordset(NULL::${days}, $1::json)
       ON CONFLICT (key) DO UPDATE SET calls = t.calls + excluded.calls, unpriced_calls = t.unpriced_calls + excluded.unpriced_calls,
         cost_minor = t.cost_minor + excluded.cost_minor`,
      [...this.days]
        .filter(([, d]) => d.calls !== 0 || d.unpriced_calls !== 0 || d.cost_minor !== 0n)
        .map(([key, d]) => ({ key, ...d, cost_minor: d.cost_minor.toString() })),
    );
    // (its rows are read out as it is called: clearing the map below is safe)
    writes.push(noteDayChanges(this.tx, this.schema, upstreamCostDayChanges.table, this.changedDays));
    this.newCalls = [];
    this.rebooked = [];
    this.changedTotals.clear();
    this.days.clear();
    this.changedDays.clear();
    await Promise.all(writes);
  }
}

/** Folds the page's charges and rates, in log order, and writes what they changed. */
async function foldPage(tx: Queryable, schema: string, events: ProjectedEvent[]): Promise<void> {
  const page = new CostPage(tx, schema, events[0].position);
  const pairs = new Map<string, [string, string]>();
  const series = new Set<string>();
  for (const e of events) {
    if (!CHARGES.has(e.type)) continue;
    const r = callRowOf(e);
    pairs.set(pairKey(String(r.channel), String(r.upstream_model)), [String(r.channel), String(r.upstream_model)]);
    series.add(seriesKey(dayOf(e.timestamp), String(r.channel), String(r.upstream_model)));
  }
  await page.load([...pairs.values()], [...series]);
  for (const e of events) {
    if (CHARGES.has(e.type)) page.charge(e);
    else await page.rate(e);
  }
  await page.flush();
}

/**
 * The upstream cost fold. Its table holds each series' running exact total (key: [day, channel,
 * upstream model] as JSON), where the series' next call is booked from; the calls and the days go
 * to the tables of cost-tables.ts. Rates are read from upstream_cost_rates (kept before it).
 */
export const upstreamCost = defineProjection<Row>({
  name: 'upstream_cost',
  table: 'upstream_cost_series',
  columns: 'exact_total text NOT NULL',
  handles: new Set([...CHARGES, 'UpstreamCostRateSet']),
  keysOf: () => {
    throw new InvariantViolation('upstream cost folds a page at a time (applyPage)');
  },
  evolve: () => {
    throw new InvariantViolation('upstream cost folds a page at a time (applyPage)');
  },
  applyPage: foldPage,
});
