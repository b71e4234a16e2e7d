// A correction's report as the operator reads it: the summary of its terms, the table per account
// (with the total), and per account the charges with the chain of earlier corrections of each.
import type { CorrectionReport } from '../api/types.ts';
import { enc } from '../api/client.ts';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { fmt, signed, whenExact } from '../../shared/format.ts';

export const COMPONENTS: Record<string, { label: string; help: string; step: number }> = {
  multiplier: { label: 'Multiplier', help: 'The right multiplier, e.g. 1.25.', step: 0.001 },
  cache_read_weight: { label: 'Cache read weight', help: 'The right price of a cached prompt token (1 = a plain one).', step: 0.001 },
  cache_write_weight: { label: 'Cache write weight', help: 'The right price of a cache-written prompt token.', step: 0.001 },
  image_tokens: { label: 'Tokens per image', help: 'The right number of tokens counted per image.', step: 1 },
};

const COLS = ['charges', 'billedOriginally', 'billedNow', 'corrected'] as const;
const diffClass = (d: number) => `num diff ${d < 0 ? 'down' : d > 0 ? 'up' : ''}`;

export function ReconciliationTable({ report, idBase }: { report: CorrectionReport; idBase: string }) {
  const t = report.totals;
  return (
    <DataTable
      caption={`Reconciliation per account: billed and corrected tokens of ${report.modelId}`}
      tableId={`${idBase}-table`}
      columns={['Account', '#Charges', '#Billed originally', '#Billed now', '#Corrected', '#Difference']}
      empty="No charge in this window."
      rows={report.accounts.map((a) => (
        <tr key={a.accountId} data-account={a.accountId}>
          <th scope="row">
            <a href={`#/accounts/${enc(a.accountId)}`}>{a.accountId}</a>
          </th>
          {COLS.map((c) => (
            <Num key={c} value={a[c]} data-col={c} />
          ))}
          <td class={diffClass(a.difference)} data-col="difference" data-value={a.difference}>
            {signed(a.difference)}
          </td>
        </tr>
      ))}
      foot={
        <tr data-account="(total)">
          <th scope="row">Total</th>
          {COLS.map((c) => (
            <Num key={c} value={t[c]} data-col={c} />
          ))}
          <td class="num" data-col="difference" data-value={t.difference}>
            {signed(t.difference)}
          </td>
        </tr>
      }
    />
  );
}

/** Per account, the charges and the chain of earlier corrections of each. */
export function ChargeDetails({ report }: { report: CorrectionReport }) {
  return (
    <>
      {report.accounts.map((a) => (
        <details key={a.accountId} class="charges">
          <summary>{`${a.accountId}: ${fmt(a.charges)} charge${a.charges === 1 ? '' : 's'}`}</summary>
          <DataTable
            caption={`Charges of ${a.accountId}`}
            columns={['Request', 'Time', '#Billed originally', '#Billed now', '#Corrected', '#Difference', 'Earlier corrections']}
            rows={a.items.map((c) => (
              <tr key={c.requestId}>
                <th scope="row">
                  <code>{c.requestId}</code>
                </th>
                <td>{whenExact(c.at)}</td>
                <Num value={c.billedOriginally} />
                <Num value={c.billedNow} />
                <Num value={c.corrected} />
                <td class="num">{signed(c.difference)}</td>
                <td class="models">{c.adjustments.length ? c.adjustments.map((x) => `${x.correctionId.slice(0, 8)}… ${signed(x.delta)}`).join(', ') : '—'}</td>
              </tr>
            ))}
          />
        </details>
      ))}
    </>
  );
}

export function ReportSummary({ report }: { report: CorrectionReport }) {
  const what =
    report.component === 'image_tokens'
      ? `${fmt(report.value)} tokens per image`
      : `${COMPONENTS[report.component]?.label ?? report.component} ${report.value / 1000}`;
  return (
    <dl class="facts inline">
      <dt>Correction id</dt>
      <dd>
        <code data-field="correction_id">{report.correctionId}</code>
      </dd>
      <dt>Model</dt>
      <dd>{report.modelId}</dd>
      <dt>Corrected to</dt>
      <dd>{what}</dd>
      <dt>Window</dt>
      <dd>{`${whenExact(report.from)} to ${whenExact(report.to)}`}</dd>
      <dt>Accounts, charges</dt>
      <dd>{`${fmt(report.accounts.length)}, ${fmt(report.totals.charges)}`}</dd>
      <dt>Total difference</dt>
      <dd data-field="total_difference" data-value={report.totals.difference}>
        {`${signed(report.totals.difference)} tokens`}
      </dd>
    </dl>
  );
}
