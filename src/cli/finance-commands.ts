// `tollgate finance report|reconcile|journal` and `tollgate period close|reopen|list`: the finance
// admin API (src/books/admin-finance-routes.ts) from the command line; from and to are UTC days.
import type { MoneyLine as Line } from '../books/finance-reconcile.ts';
import { CliError, requiredOption, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

const FORMATS: Record<string, string[]> = { report: ['json', 'csv'], reconcile: ['json'], journal: ['hledger', 'csv', 'json'] };
const PATHS: Record<string, string> = { report: '/finance/report', reconcile: '/finance/reconciliation', journal: '/finance/journal' };

export async function runFinanceCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  const v = p.values;
  const format = (v.format as string | undefined) ?? FORMATS[sub][0];
  if (!FORMATS[sub].includes(format)) throw new CliError(`--format must be ${FORMATS[sub].join(' or ')}, got '${format}'.`, 2);
  const q = new URLSearchParams({ from: requiredOption(v.from, 'from'), to: requiredOption(v.to, 'to'), format });
  const text = await (await c.request('GET', `${PATHS[sub]}?${q}`)).text();
  if (format !== 'json') {
    process.stdout.write(text);
    return;
  }
  const r = JSON.parse(text);
  if (sub === 'reconcile') {
    const show = (l: Line) =>
      `${l.account_id}\tpayments-refunds=${l.payments - l.refunds}\trevenue=${l.revenue}\trefunded_revenue=${l.refunded_revenue}\tbreakage=${l.breakage}\ttax=${l.tax}\ttax_refunded=${l.tax_refunded}\tdeferred_change=${l.deferred_change}\tdifference=${l.difference}${l.event_ids.length ? `\tevents=${l.event_ids.join(',')}` : ''}`;
    return out([...r.lines.map(show), show(r.total)].join('\n'), r);
  }
  if (sub === 'report') {
    const t = r.totals;
    return out(
      `${r.rows.length} rows (${r.currency} minor units); payments ${t.payments}, fees ${t.fees}, refunds ${t.refunds}, disputes ${t.disputes}, revenue ${t.revenue}, breakage ${t.breakage}, tax ${t.tax}, tax refunded ${t.tax_refunded}`,
      r,
    );
  }
  return out(`${r.entries.length} journal entries`, r);
}

interface PeriodBody {
  period: string;
  status: string;
  closed_at: string;
  closed_by: string;
  override_reason: string | null;
  reopen_reason: string | null;
}

const showPeriod = (p: PeriodBody) =>
  `${p.period}\t${p.status}\tclosed ${p.closed_at} by ${p.closed_by}${p.override_reason ? ` (override: ${p.override_reason})` : ''}${
    p.status === 'reopened' ? `\treopened: ${p.reopen_reason}` : ''
  }`;

/** `period close YYYY-MM [--reason R]`, `period reopen YYYY-MM --reason R`, `period list`. */
export async function runPeriodCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  if (sub === 'list') {
    const r = await c.json<{ data: PeriodBody[] }>('GET', '/finance/periods');
    return out(r.data.length ? r.data.map(showPeriod).join('\n') : 'no month closed yet', r);
  }
  const period = p.positionals[2];
  if (!period) throw new CliError(`period ${sub} needs the month, as YYYY-MM.`, 2);
  const reason = p.values.reason as string | undefined;
  if (sub === 'reopen' && !reason) throw new CliError('period reopen needs --reason.', 2);
  const r = await c.json<PeriodBody>('POST', `/finance/periods/${encodeURIComponent(period)}/${sub}`, reason === undefined ? {} : { reason });
  return out(showPeriod(r), r);
}
