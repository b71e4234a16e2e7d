// The account's payments, newest first, each with its receipt to download (a printable page,
// fetched with the session and offered as a file).
import { useState } from 'preact/hooks';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { saveAsFile } from '../../shared/download.ts';
import { dateOf, fmt } from '../../shared/format.ts';
import { Loading } from '../../shared/components/Page.tsx';
import type { BillingApi } from './api.ts';
import type { Payment } from './types.ts';

const PROCESSORS: Record<string, string> = { stripe: 'Card (Stripe)', code: 'Code', manual: 'Bank transfer' };

const TEXT_COLUMNS = new Set(['Item', 'Paid by']);

/** What was paid: in the settlement currency, or as paid in another one with what it was booked as and at which rate. */
const amountText = (p: Payment) =>
  p.paid_in ? `paid ${p.paid_in.display} ${p.paid_in.currency} (booked ${p.display} ${p.currency} at ${p.paid_in.rate})` : `${p.display} ${p.currency}`;

/** The amount as the customer paid it. */
const paidText = (p: Payment) => (p.paid_in ? `${p.paid_in.display} ${p.paid_in.currency}` : `${p.display} ${p.currency}`);

const itemText = (p: Payment) => (p.item.kind === 'plan' ? `Plan ${p.item.plan_id}` : `Pack ${p.item.pack_id}`) + ` · ${fmt(p.item.tokens)} tokens`;

interface Props {
  api: BillingApi;
  payments: Payment[] | null;
  onProblem: (err: unknown) => void;
}

export function PaymentsTable({ api, payments, onProblem }: Props) {
  const [status, setStatus] = useState('');
  const receipt = async (p: Payment) => {
    try {
      const res = await api.receipt(p.id);
      const name = `receipt-${p.id}.html`;
      saveAsFile(await res.text(), name, 'text/html');
      setStatus(`Downloaded ${name}.`);
    } catch (err) {
      onProblem(err);
    }
  };
  return (
    <section class="card" aria-labelledby="payments-heading">
      <h2 id="payments-heading">Payments</h2>
      {!payments ? (
        <Loading text="Loading the payments…" />
      ) : (
        <DataTable
          id="payments-table"
          labelledBy="payments-heading"
          caption="Payments and their receipts, newest first"
          columns={['Date', 'Item', 'Paid by', 'Amount', 'Refunded', 'Receipt'].map((label) => ({
            label,
            class: TEXT_COLUMNS.has(label) ? 'text-cell' : undefined,
          }))}
          empty="No payments yet."
          rows={[...payments].reverse().map((p) => (
            <tr key={p.id} data-payment={p.id}>
              <th scope="row">{dateOf(p.received_at)}</th>
              <td class="text-cell">{itemText(p)}</td>
              <td class="text-cell">{PROCESSORS[p.processor] ?? p.processor}</td>
              <td title={p.paid_in ? `Rate of ${p.paid_in.day}, ${p.paid_in.source}` : undefined}>{amountText(p)}</td>
              <td>{p.refunded === 0 ? '—' : p.refunded >= p.amount ? 'In full' : 'In part'}</td>
              <td>
                <button
                  type="button"
                  class="secondary small"
                  aria-label={`Download the receipt of ${dateOf(p.received_at)}, ${paidText(p)}`}
                  onClick={() => receipt(p)}
                >
                  Receipt
                </button>
              </td>
            </tr>
          ))}
        />
      )}
      <p id="receipt-status" class="help" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
