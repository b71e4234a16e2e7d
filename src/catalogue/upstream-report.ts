// The upstream reconciliation report behind GET /admin/v1/upstream-report: per UTC day, channel
// and upstream model, the attempts and the tokens as the upstream reported them (to hold against
// its own usage export), and what customers were billed for those calls. Read from the
// upstream_daily read model.
import type { Ledger } from '../ledger/ledger.ts';
import { badRequest } from '../http/errors.ts';
import { UPSTREAM_COUNTS, upstreamReport, type UpstreamCount, type UpstreamDailyRow } from '../../projections/catalogue/upstream-report.ts';

export interface UpstreamReportQuery {
  /** First and last UTC day of the report (YYYY-MM-DD), both included. */
  from: string;
  to: string;
  format: 'json' | 'csv';
}

export interface UpstreamReport {
  from: string;
  to: string;
  rows: UpstreamDailyRow[];
  totals: Record<UpstreamCount, number>;
}

export const MAX_REPORT_DAYS = 366;
const DAY_MS = 86_400_000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/i;
const FORMAT = 'an ISO 8601 date (2026-03-01) or time with its zone (2026-03-01T12:00:00Z)';

/** The span a bound stands for: a date, its whole UTC day; a time, that instant. */
function parseBound(v: unknown, name: string): { start: number; end: number } {
  if (v === undefined) throw badRequest(`'${name}' is required: ${FORMAT}.`, name);
  const s = typeof v === 'string' ? v : '';
  const m = DATE.exec(s) ?? TIME.exec(s);
  // Each field checked: Date would roll 2026-02-30 over into March.
  const [y, mo, d, h = '0', mi = '0', sec = '0', oh = '0', om = '0'] = m ? m.slice(1) : [];
  const valid =
    m &&
    Number(mo) >= 1 &&
    Number(mo) <= 12 &&
    Number(d) >= 1 &&
    Number(d) <= new Date(Date.UTC(Number(y), Number(mo), 0)).getUTCDate() &&
    Number(h) <= 23 &&
    Number(mi) <= 59 &&
    Number(sec) <= 59 &&
    Number(oh) <= 23 &&
    Number(om) <= 59;
  if (!valid) throw badRequest(`'${name}' must be ${FORMAT}.`, name);
  const at = Date.parse(DATE.test(s) ? `${s}T00:00:00Z` : s);
  if (!(at >= Date.UTC(1970, 0, 1) && at < Date.UTC(10000, 0, 1))) throw badRequest(`'${name}' must be between 1970 and 9999.`, name);
  return { start: at, end: DATE.test(s) ? at + DAY_MS - 1 : at };
}

const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** Checks the query string: from and to (inverted, missing or over 366 days is a 400), format. */
export function upstreamReportQuery(query: Record<string, unknown>): UpstreamReportQuery {
  for (const k of Object.keys(query))
    if (!['from', 'to', 'format'].includes(k)) throw badRequest(`Unknown query parameter '${k}': use from, to and format.`, k);
  const from = parseBound(query.from, 'from');
  const to = parseBound(query.to, 'to');
  if (from.start > to.end) throw badRequest("'from' must not be after 'to'.", 'from');
  const first = utcDay(from.start);
  const last = utcDay(to.end);
  const days = (Date.parse(`${last}T00:00:00Z`) - Date.parse(`${first}T00:00:00Z`)) / DAY_MS + 1;
  if (days > MAX_REPORT_DAYS) throw badRequest(`The report covers at most ${MAX_REPORT_DAYS} days; ${first} to ${last} is ${days}.`, 'to');
  const format = query.format ?? 'json';
  if (format !== 'json' && format !== 'csv') throw badRequest("'format' must be json or csv.", 'format');
  return { from: first, to: last, format };
}

export async function buildUpstreamReport(ledger: Ledger, range: { from: string; to: string }): Promise<UpstreamReport> {
  const rows = await upstreamReport(ledger.readModels.db, ledger.rmSchema, range);
  const totals = Object.fromEntries(UPSTREAM_COUNTS.map((c) => [c, 0])) as Record<UpstreamCount, number>;
  for (const r of rows) for (const c of UPSTREAM_COUNTS) totals[c] += r[c];
  return { from: range.from, to: range.to, rows, totals };
}

export const UPSTREAM_REPORT_COLUMNS = ['day', 'channel', 'upstream_model', ...UPSTREAM_COUNTS] as const;

// Quoted when it holds a separator, or starts like a spreadsheet formula.
export const csvCell = (v: string | number) => {
  const s = String(v);
  return /[",\r\n]/.test(s) || /^[=+\-@\t]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** A header line, then one line per row. */
export function upstreamReportCsv(report: UpstreamReport): string {
  const lines = [UPSTREAM_REPORT_COLUMNS.join(',')];
  for (const r of report.rows) lines.push(UPSTREAM_REPORT_COLUMNS.map((c) => csvCell(r[c])).join(','));
  return lines.join('\n') + '\n';
}
