// The upstream-bills reconciliation: per UTC day, channel and upstream model, the cost Tollgate
// computed (its calls at the rates in force, booked by the rounding rule) against the cost the
// provider's imported bill shows. Each line has its difference (Tollgate - bill) and whether it is
// within the tolerance, and names the events behind it: the bill, the rates, the charges.
import type { Ledger } from '../ledger/ledger.ts';
import { bookedCalls } from '../../projections/catalogue/upstream-cost.ts';
import { billLinesBetween } from '../../projections/catalogue/upstream-bills.ts';
import { csvCell } from './upstream-report.ts';

export type LineStatus = 'agrees' | 'differs' | 'not_billed' | 'no_calls' | 'unpriced';

export interface ReconciliationLine {
  day: string;
  channel: string;
  upstream_model: string;
  calls: number;
  unpriced_calls: number;
  /** Minor units; null when no bill covers the line. */
  tollgate_cost_minor: string;
  bill_cost_minor: string | null;
  difference_minor: string | null;
  status: LineStatus;
  bill_event_id: string | null;
  rate_event_ids: string[];
  /** The charges behind the line when it does not agree (empty when it does). */
  charge_event_ids: string[];
}

export interface Reconciliation {
  from: string;
  to: string;
  currency: string;
  tolerance_minor: number;
  lines: ReconciliationLine[];
  totals: { tollgate_cost_minor: string; bill_cost_minor: string; difference_minor: string; lines_differing: number };
}

const abs = (n: bigint) => (n < 0n ? -n : n);

/** Builds the lines: a day, channel and upstream model with calls or a bill line, or both. */
export async function reconcileBills(ledger: Ledger, range: { from: string; to: string }, currency: string, toleranceMinor: number): Promise<Reconciliation> {
  const { db } = ledger.readModels;
  const calls = await bookedCalls(db, ledger.rmSchema, range.from, range.to);
  const bills = await billLinesBetween(db, ledger.rmSchema, range.from, range.to);
  type Acc = ReconciliationLine & { cost: bigint; charges: string[]; rates: Set<string> };
  const byKey = new Map<string, Acc>();
  const lineOf = (day: string, channel: string, upstream_model: string): Acc => {
    const key = JSON.stringify([day, channel, upstream_model]);
    let l = byKey.get(key);
    if (!l) {
      l = {
        day,
        channel,
        upstream_model,
        calls: 0,
        unpriced_calls: 0,
        tollgate_cost_minor: '0',
        bill_cost_minor: null,
        difference_minor: null,
        status: 'not_billed',
        bill_event_id: null,
        rate_event_ids: [],
        charge_event_ids: [],
        cost: 0n,
        charges: [],
        rates: new Set(),
      };
      byKey.set(key, l);
    }
    return l;
  };
  for (const c of calls) {
    const l = lineOf(c.day, c.channel, c.upstream_model);
    l.calls++;
    l.charges.push(c.event_id);
    if (c.cost_minor === null) l.unpriced_calls++;
    else l.cost += c.cost_minor;
    if (c.rate_event_id) l.rates.add(c.rate_event_id);
  }
  for (const b of bills) {
    const l = lineOf(b.day, b.channel, b.upstream_model);
    l.bill_cost_minor = String(b.cost_minor);
    l.bill_event_id = b.event_id;
  }
  let tollgate = 0n;
  let billed = 0n;
  let differing = 0;
  const lines = [...byKey.values()].map(({ cost, charges, rates, ...l }): ReconciliationLine => {
    l.tollgate_cost_minor = cost.toString();
    l.rate_event_ids = [...rates].sort();
    tollgate += cost;
    if (l.bill_cost_minor !== null) {
      const diff = cost - BigInt(l.bill_cost_minor);
      billed += BigInt(l.bill_cost_minor);
      l.difference_minor = diff.toString();
      l.status = l.unpriced_calls > 0 ? 'unpriced' : abs(diff) <= BigInt(toleranceMinor) ? 'agrees' : l.calls === 0 ? 'no_calls' : 'differs';
    } else if (l.unpriced_calls > 0) l.status = 'unpriced';
    if (l.status !== 'agrees') {
      differing++;
      l.charge_event_ids = charges;
    }
    return l;
  });
  const order = (a: ReconciliationLine, b: ReconciliationLine) =>
    Buffer.compare(Buffer.from(JSON.stringify([a.day, a.channel, a.upstream_model])), Buffer.from(JSON.stringify([b.day, b.channel, b.upstream_model])));
  return {
    from: range.from,
    to: range.to,
    currency,
    tolerance_minor: toleranceMinor,
    lines: lines.sort(order),
    totals: {
      tollgate_cost_minor: tollgate.toString(),
      bill_cost_minor: billed.toString(),
      difference_minor: (tollgate - billed).toString(),
      lines_differing: differing,
    },
  };
}

const CSV_COLUMNS = [
  'day',
  'channel',
  'upstream_model',
  'calls',
  'unpriced_calls',
  'tollgate_cost_minor',
  'bill_cost_minor',
  'difference_minor',
  'status',
  'bill_event_id',
  'rate_event_ids',
  'charge_event_ids',
] as const;

/** A header line, then one line per reconciliation line (event ids joined by spaces). */
export function reconciliationCsv(r: Reconciliation): string {
  const value = (l: ReconciliationLine, c: (typeof CSV_COLUMNS)[number]) => {
    const v = l[c];
    return Array.isArray(v) ? v.join(' ') : v === null ? '' : v;
  };
  return [CSV_COLUMNS.join(','), ...r.lines.map((l) => CSV_COLUMNS.map((c) => csvCell(value(l, c))).join(','))].join('\n') + '\n';
}
