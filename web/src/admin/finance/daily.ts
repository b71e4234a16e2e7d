// The finance report folded per UTC day (revenue recognised, breakage, refunded revenue, upstream
// cost, margin, deferred at the day's end) and per model and channel (revenue, upstream cost, margin): sums of the
// gateway's own figures, for the charts and tables; nothing is computed anew.
import type { FinanceReport } from '../api/types.ts';

export interface Day {
  day: string;
  revenue: number;
  breakage: number;
  refunded_revenue: number;
  upstream_cost: number;
  margin: number;
  deferred: number;
}

function* days(from: string, to: string): Generator<string> {
  for (let d = new Date(`${from}T00:00:00Z`); d.toISOString().slice(0, 10) <= to; d.setUTCDate(d.getUTCDate() + 1)) yield d.toISOString().slice(0, 10);
}

export function perDay(report: FinanceReport): Day[] {
  const by = new Map<string, Day>();
  for (const day of days(report.from, report.to)) by.set(day, { day, revenue: 0, breakage: 0, refunded_revenue: 0, upstream_cost: 0, margin: 0, deferred: 0 });
  for (const r of report.rows) {
    const d = by.get(r.day);
    if (!d) continue;
    d.revenue += r.revenue;
    d.breakage += r.breakage;
    d.refunded_revenue += r.refunded_revenue;
    d.upstream_cost += r.upstream_cost;
    d.margin += r.margin;
  }
  for (const r of report.deferred) {
    const d = by.get(r.day);
    if (d) d.deferred += r.deferred;
  }
  return [...by.values()];
}

export interface CostLine {
  model: string;
  channel: string;
  revenue: number;
  upstream_cost: number;
  unpriced_calls: number;
  margin: number;
}

/** Per model and channel (the rows that name one), in model order. */
export function perModel(report: FinanceReport): CostLine[] {
  const by = new Map<string, CostLine>();
  for (const r of report.rows) {
    if (!r.model && !r.channel) continue;
    const key = `${r.model}\u0000${r.channel}`;
    const line = by.get(key) ?? { model: r.model, channel: r.channel, revenue: 0, upstream_cost: 0, unpriced_calls: 0, margin: 0 };
    line.revenue += r.revenue;
    line.upstream_cost += r.upstream_cost;
    line.unpriced_calls += r.unpriced_calls;
    line.margin += r.margin;
    by.set(key, line);
  }
  return [...by.values()].sort((a, b) => a.model.localeCompare(b.model) || a.channel.localeCompare(b.channel));
}
