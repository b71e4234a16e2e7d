// The month close: the months closed (and reopened) with who did it and why, a form that closes a
// month (its reconciliation at 0 and its upstream bills agreeing, or a reason that overrides the
// checks), and a reopen, reason required, after a confirmation.
import { useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, enc } from '../api/client.ts';
import type { List, Period } from '../api/types.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { InputField } from '../../shared/components/Field.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import { clientProblem } from '../../shared/problem.ts';
import { when } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

/** The month before this one (UTC), the one usually closed next. */
function lastMonth(): string {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)).toISOString().slice(0, 7);
}

export function PeriodsCard({ onChanged }: { onChanged: () => void }) {
  const periods = useLoaded(async () => (await admin<List<Period>>('finance/periods')).data);
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [month, setMonth] = useState(lastMonth());
  const [reason, setReason] = useState('');
  const [done, setDone] = useState('');

  const close = async (ev: Event) => {
    ev.preventDefault();
    setDone('');
    const closed = await action.run(async () => {
      if (!MONTH.test(month)) throw clientProblem('Choose the month to close.', 'period');
      return admin<Period>(`finance/periods/${enc(month)}/close`, { method: 'POST', body: reason.trim() ? { reason: reason.trim() } : {} });
    });
    if (!closed) return;
    setReason('');
    setDone(`${closed.period} is closed${closed.override_reason ? ' (its checks overridden)' : ''}.`);
    await periods.load();
    onChanged();
  };

  const reopen = async (p: Period) => {
    const answer = await confirmAction({
      title: `Reopen ${p.period}?`,
      body: [`Its figures may change again until it is closed once more. The reason is recorded.`],
      confirmLabel: 'Reopen month',
      danger: true,
      reason: { label: 'Reason', required: true },
    });
    if (!answer.confirmed) {
      announce('The month was not reopened.');
      return;
    }
    try {
      periods.setProblem(null);
      await admin<Period>(`finance/periods/${enc(p.period)}/reopen`, { method: 'POST', body: { reason: answer.reason } });
      setDone(`${p.period} is open again.`);
      await periods.load();
      onChanged();
    } catch (err) {
      periods.setProblem(err);
    }
  };

  return (
    <section class="card" aria-labelledby="periods-heading">
      <h2 id="periods-heading">Month close</h2>
      <p class="help">
        A closed month never changes: corrections, refunds and disputes that come later are booked in an open month. Closing needs the month over, its money
        reconciliation at 0 and its upstream bills agreeing; a reason closes it anyway and is recorded.
      </p>
      <form ref={form} class="form-grid" noValidate onSubmit={close}>
        <InputField id="period" label="Month" type="month" name="period" value={month} onValue={setMonth} />
        <InputField id="period-reason" label="Reason (to override the checks)" optional name="reason" value={reason} onValue={setReason} />
        <FormActions submit="Close month" busy={action.busy} />
      </form>
      {action.region()}
      <ProblemRegion problem={periods.problem} onDismiss={() => periods.setProblem(null)} />
      <Result>{done}</Result>
      <div aria-busy={periods.busy ? 'true' : 'false'}>
        {periods.data ? (
          <DataTable
            caption="Months closed"
            tableId="periods-table"
            columns={['Month', 'Status', 'Closed', 'Override', 'Reopened', 'Action']}
            empty="No month closed yet."
            rows={periods.data.map((p) => (
              <tr key={p.period} data-period={p.period} data-status={p.status}>
                <th scope="row">{p.period}</th>
                <td>
                  <Pill state={p.status === 'closed' ? 'closed' : 'open'} text={p.status === 'closed' ? 'Closed' : 'Reopened'} />
                </td>
                <td class="note">{`${when(p.closed_at)} by ${p.closed_by}`}</td>
                <td class="note">{p.override_reason ?? ''}</td>
                <td class="note">{p.reopened_at ? `${when(p.reopened_at)} by ${p.reopened_by}: “${p.reopen_reason}”` : ''}</td>
                <td>
                  {p.status === 'closed' && (
                    <button type="button" class="small secondary danger-text" aria-label={`Reopen ${p.period}`} onClick={() => reopen(p)}>
                      Reopen
                    </button>
                  )}
                </td>
              </tr>
            ))}
          />
        ) : (
          <Loading text={periods.failed ? 'The closed months could not be loaded.' : 'Loading the closed months…'} />
        )}
      </div>
    </section>
  );
}
