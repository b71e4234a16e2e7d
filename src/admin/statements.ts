// Statements: every charge and adjustment of an account in a period, with request ids, and
// daily totals. Built from the charge log read model; the audit compares it with the events.
// Every adjustment names its correction and the charge it adjusts; a charge corrected twice has
// two adjustment lines, and the net is what is billed now.
import type { Ledger } from '../ledger/ledger.ts';
import { ofAccountBetween } from '../../projections/read-models.ts';

export interface StatementLine {
  at: string;
  day: string;
  kind: string;
  request_id: string;
  model: string;
  prompt_tokens: number;
  completion_tokens: number;
  /** Within prompt_tokens: served from / written to the upstream's prompt cache. */
  cached_tokens: number;
  cache_write_tokens: number;
  images: number;
  multiplier: number;
  billed: number;
  from_quota: number;
  from_extra: number;
  event_id: string;
  correction_id: string | null;
  /** On an adjustment line: the charge it adjusts (JSON only; the CSV columns are unchanged). */
  charge_event_id?: string;
}

/** Per correction: how many of the period's adjustment lines it made and their sum. */
export interface StatementCorrection {
  correction_id: string;
  adjustments: number;
  adjusted: number;
}

export interface Statement {
  account_id: string;
  from: string;
  to: string;
  lines: StatementLine[];
  daily: Array<{ day: string; charges: number; adjustments: number; billed: number }>;
  totals: { charges: number; adjustments: number; billed: number; adjusted: number; net: number };
  corrections: StatementCorrection[];
}

export async function buildStatement(ledger: Ledger, accountId: string, from: Date, to: Date): Promise<Statement> {
  await ledger.caughtUp();
  const rows = await ofAccountBetween(ledger.readModels.db, ledger.rmSchema, accountId, from.toISOString(), to.toISOString());
  const lines: StatementLine[] = rows.map((r) => ({
    at: new Date(r.at).toISOString(),
    day: r.day,
    kind: r.kind,
    request_id: r.request_id,
    model: r.model,
    prompt_tokens: Number(r.prompt_tokens),
    completion_tokens: Number(r.completion_tokens),
    cached_tokens: Number(r.cached_tokens ?? 0),
    cache_write_tokens: Number(r.cache_write_tokens ?? 0),
    images: Number(r.images),
    multiplier: r.multiplier_milli / 1000,
    billed: Number(r.billed),
    from_quota: Number(r.from_quota),
    from_extra: Number(r.from_extra),
    event_id: r.event_id,
    correction_id: r.correction_id,
    ...(r.kind === 'adjustment' && r.charge_event_id ? { charge_event_id: r.charge_event_id } : {}),
  }));
  const days = new Map<string, { day: string; charges: number; adjustments: number; billed: number }>();
  const totals = { charges: 0, adjustments: 0, billed: 0, adjusted: 0, net: 0 };
  for (const l of lines) {
    const d = days.get(l.day) ?? { day: l.day, charges: 0, adjustments: 0, billed: 0 };
    days.set(l.day, d);
    d.billed += l.billed;
    if (l.kind === 'adjustment') {
      d.adjustments++;
      totals.adjustments++;
      totals.adjusted += l.billed;
    } else {
      d.charges++;
      totals.charges++;
      totals.billed += l.billed;
    }
  }
  totals.net = totals.billed + totals.adjusted;
  const corrections = new Map<string, StatementCorrection>();
  for (const l of lines) {
    if (l.kind !== 'adjustment' || !l.correction_id) continue;
    const c = corrections.get(l.correction_id) ?? { correction_id: l.correction_id, adjustments: 0, adjusted: 0 };
    corrections.set(l.correction_id, c);
    c.adjustments++;
    c.adjusted += l.billed;
  }
  return {
    account_id: accountId,
    from: from.toISOString(),
    to: to.toISOString(),
    lines,
    daily: [...days.values()],
    totals,
    corrections: [...corrections.values()],
  };
}

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n\r]/.test(s) || /^[=+\-@\t]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function statementCsv(s: Statement): string {
  // New columns go last, so a reader of the earlier columns by position is not misled.
  const cols: (keyof StatementLine)[] = [
    'at',
    'day',
    'kind',
    'request_id',
    'model',
    'prompt_tokens',
    'completion_tokens',
    'images',
    'multiplier',
    'billed',
    'from_quota',
    'from_extra',
    'event_id',
    'correction_id',
    'cached_tokens',
    'cache_write_tokens',
  ];
  const out = [cols.join(',')];
  for (const l of s.lines) out.push(cols.map((c) => csvCell(l[c])).join(','));
  out.push('');
  out.push('day,charges,adjustments,billed');
  for (const d of s.daily) out.push([d.day, d.charges, d.adjustments, d.billed].join(','));
  out.push('');
  out.push(`total,${s.totals.charges},${s.totals.adjustments},${s.totals.net}`);
  return out.join('\n') + '\n';
}
