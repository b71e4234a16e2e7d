// Statements: every charge and adjustment of an account in a period, with request ids, and
// daily totals. Built from the charge log read model; the audit compares it with the events.
import type { Ledger } from '../ledger/ledger.ts';
import type { ChargeRow } from '../../projections/read-models.ts';

export interface StatementLine {
  at: string; day: string; kind: string; request_id: string; model: string; prompt_tokens: number; completion_tokens: number;
  images: number; multiplier: number; billed: number; from_quota: number; from_extra: number; event_id: string; correction_id: string | null;
}

export interface Statement {
  account_id: string; from: string; to: string;
  lines: StatementLine[];
  daily: Array<{ day: string; charges: number; adjustments: number; billed: number }>;
  totals: { charges: number; adjustments: number; billed: number; adjusted: number; net: number };
}

export async function buildStatement(ledger: Ledger, accountId: string, from: Date, to: Date): Promise<Statement> {
  await ledger.caughtUp();
  const rows = await ledger.db.query<ChargeRow>(
    `SELECT * FROM "${ledger.rmSchema}".charges WHERE account_id = $1 AND at >= $2 AND at < $3 ORDER BY position`,
    [accountId, from.toISOString(), to.toISOString()]);
  const lines: StatementLine[] = rows.map((r) => ({
    at: new Date(r.at).toISOString(), day: r.day, kind: r.kind, request_id: r.request_id, model: r.model,
    prompt_tokens: Number(r.prompt_tokens), completion_tokens: Number(r.completion_tokens), images: Number(r.images),
    multiplier: r.multiplier_milli / 1000, billed: Number(r.billed), from_quota: Number(r.from_quota), from_extra: Number(r.from_extra),
    event_id: r.event_id, correction_id: r.correction_id,
  }));
  const days = new Map<string, { day: string; charges: number; adjustments: number; billed: number }>();
  const totals = { charges: 0, adjustments: 0, billed: 0, adjusted: 0, net: 0 };
  for (const l of lines) {
    const d = days.get(l.day) ?? { day: l.day, charges: 0, adjustments: 0, billed: 0 };
    days.set(l.day, d);
    d.billed += l.billed;
    if (l.kind === 'adjustment') { d.adjustments++; totals.adjustments++; totals.adjusted += l.billed; }
    else { d.charges++; totals.charges++; totals.billed += l.billed; }
  }
  totals.net = totals.billed + totals.adjusted;
  return { account_id: accountId, from: from.toISOString(), to: to.toISOString(), lines, daily: [...days.values()], totals };
}

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n\r]/.test(s) || /^[=+\-@\t]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function statementCsv(s: Statement): string {
  const cols: (keyof StatementLine)[] = ['at', 'day', 'kind', 'request_id', 'model', 'prompt_tokens', 'completion_tokens', 'images', 'multiplier', 'billed', 'from_quota', 'from_extra', 'event_id', 'correction_id'];
  const out = [cols.join(',')];
  for (const l of s.lines) out.push(cols.map((c) => csvCell(l[c])).join(','));
  out.push('');
  out.push('day,charges,adjustments,billed');
  for (const d of s.daily) out.push([d.day, d.charges, d.adjustments, d.billed].join(','));
  out.push('');
  out.push(`total,${s.totals.charges},${s.totals.adjustments},${s.totals.net}`);
  return out.join('\n') + '\n';
}
