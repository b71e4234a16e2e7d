// Payments the processor reported that could not be tied to an account, a price or the ledger's
// currency: kept for the operator (PaymentUnmatched), with nothing granted for them.
import { admin } from '../api/client.ts';
import type { List } from '../api/types.ts';
import { Loading } from '../../shared/components/Page.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { money } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';

/** GET /admin/v1/unmatched-payments: the PaymentUnmatched events as recorded. */
interface UnmatchedPayment {
  processor: string;
  processorPaymentId: string;
  amount: number;
  currency: string;
  reason: string;
  details: Record<string, string>;
}

export function UnmatchedCard() {
  const list = useLoaded(async () => (await admin<List<UnmatchedPayment>>('unmatched-payments')).data);
  return (
    <section class="card" aria-labelledby="unmatched-heading" aria-busy={list.busy ? 'true' : 'false'}>
      <h2 id="unmatched-heading">Unmatched payments</h2>
      <p class="help">Paid at the processor but not tied to an account or price (or in another currency): nothing was granted. Settle each by hand.</p>
      <ProblemRegion problem={list.problem} onDismiss={() => list.setProblem(null)} />
      {list.data ? (
        <DataTable
          caption="Unmatched payments"
          tableId="unmatched-table"
          columns={['Payment', 'Processor', '#Amount', 'Why', 'Details']}
          empty="No unmatched payments."
          rows={list.data.map((u) => (
            <tr key={`${u.processor}:${u.processorPaymentId}`} data-payment-id={u.processorPaymentId}>
              <th scope="row">
                <code>{u.processorPaymentId}</code>
              </th>
              <td>{u.processor}</td>
              <td class="num" data-col="amount" data-value={u.amount}>
                {money(u.amount, u.currency)}
              </td>
              <td>{u.reason}</td>
              <td>
                {Object.entries(u.details)
                  .map(([k, v]) => `${k}: ${v}`)
                  .join(', ')}
              </td>
            </tr>
          ))}
        />
      ) : (
        !list.failed && <Loading text="Reading the unmatched payments…" />
      )}
    </section>
  );
}
