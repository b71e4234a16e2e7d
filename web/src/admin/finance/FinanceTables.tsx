// The finance section's tables: the figures per day (what the charts draw), the money
// reconciliation per account, and upstream cost and margin per model and channel.
import type { MoneyLine, MoneyReconciliation } from '../api/types.ts';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { fmt, money } from '../../shared/format.ts';
import type { CostLine, Day } from './daily.ts';

/** A money cell: formatted, right-aligned, its minor units in data-value. */
const Money = ({ v, c, col }: { v: number; c: string; col?: string }) => (
  <td class="num" data-col={col} data-value={v}>
    {money(v, c)}
  </td>
);

export function DaysTable({ days, currency }: { days: Day[]; currency: string }) {
  return (
    <DataTable
      caption="Revenue recognised, breakage, refunded revenue, upstream cost, margin and deferred revenue per UTC day"
      tableId="finance-days-table"
      empty="No revenue, cost or deferred revenue in this range."
      columns={['Day', '#Revenue recognised', '#Breakage', '#Refunded revenue', '#Upstream cost', '#Margin', '#Deferred at the day’s end']}
      rows={days.map((d) => (
        <tr key={d.day} data-day={d.day}>
          <th scope="row">{d.day}</th>
          <Money v={d.revenue} c={currency} col="revenue" />
          <Money v={d.breakage} c={currency} col="breakage" />
          <Money v={d.refunded_revenue} c={currency} col="refunded_revenue" />
          <Money v={d.upstream_cost} c={currency} col="upstream_cost" />
          <Money v={d.margin} c={currency} col="margin" />
          <Money v={d.deferred} c={currency} col="deferred" />
        </tr>
      ))}
    />
  );
}

const RECON_COLS = ['payments', 'refunds', 'revenue', 'refunded_revenue', 'breakage', 'deferred_change', 'tax', 'tax_refunded', 'difference'] as const;

function ReconRow({ line, currency, total }: { line: MoneyLine; currency: string; total?: boolean }) {
  return (
    <tr data-account={total ? '(total)' : line.account_id} class={line.difference !== 0 ? 'differs' : undefined}>
      <th scope="row">{total ? 'Total' : line.account_id}</th>
      {RECON_COLS.map((c) => (
        <Money key={c} v={line[c]} c={currency} col={c} />
      ))}
      <td class="note">{line.difference === 0 ? 'Agrees' : `Differs: events ${line.event_ids.join(', ')}`}</td>
    </tr>
  );
}

export function MoneyReconciliationTable({ recon }: { recon: MoneyReconciliation }) {
  return (
    <DataTable
      caption="Money reconciliation per account: payments − refunds = revenue + refunded revenue + breakage + change in deferred + tax − tax refunded"
      tableId="money-recon-table"
      columns={[
        'Account',
        '#Payments',
        '#Refunds',
        '#Revenue',
        '#Refunded revenue',
        '#Breakage',
        '#Deferred change',
        '#Tax',
        '#Tax refunded',
        '#Difference',
        'Result',
      ]}
      empty="No money moved in this range."
      rows={recon.lines.map((l) => (
        <ReconRow key={l.account_id} line={l} currency={recon.currency} />
      ))}
      foot={<ReconRow line={recon.total} currency={recon.currency} total />}
    />
  );
}

export function CostTable({ lines, currency }: { lines: CostLine[]; currency: string }) {
  const sum = (k: keyof Omit<CostLine, 'model' | 'channel'>) => lines.reduce((s, l) => s + l[k], 0);
  return (
    <DataTable
      caption="Upstream cost and margin per model and channel"
      tableId="cost-table"
      columns={['Model', 'Channel', '#Revenue', '#Upstream cost', '#Unpriced calls', '#Margin']}
      empty="No calls in this range."
      rows={lines.map((l) => (
        <tr key={`${l.model}/${l.channel}`} data-model={l.model} data-channel={l.channel}>
          <th scope="row">{l.model || '—'}</th>
          <td>{l.channel || '—'}</td>
          <Money v={l.revenue} c={currency} col="revenue" />
          <Money v={l.upstream_cost} c={currency} col="upstream_cost" />
          <td class="num" data-col="unpriced_calls" data-value={l.unpriced_calls}>
            {fmt(l.unpriced_calls)}
          </td>
          <Money v={l.margin} c={currency} col="margin" />
        </tr>
      ))}
      foot={
        lines.length ? (
          <tr data-model="(total)">
            <th scope="row" colSpan={2}>
              Total
            </th>
            <Money v={sum('revenue')} c={currency} col="revenue" />
            <Money v={sum('upstream_cost')} c={currency} col="upstream_cost" />
            <td class="num" data-col="unpriced_calls" data-value={sum('unpriced_calls')}>
              {fmt(sum('unpriced_calls'))}
            </td>
            <Money v={sum('margin')} c={currency} col="margin" />
          </tr>
        ) : undefined
      }
    />
  );
}
