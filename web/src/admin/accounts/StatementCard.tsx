// An account's statement for a range of UTC days, downloaded as CSV or JSON (fetched with the token
// in the header and offered as a file), with its totals said on the page.
import { useRef, useState } from 'preact/hooks';
import { saveAsFile } from '../../shared/download.ts';
import { adminCall, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { InputField } from '../../shared/components/Field.tsx';
import { Result } from '../../shared/components/Page.tsx';
import { dayUtc, fmt } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The statement's charges, adjustments and net, from its JSON or the CSV's "total" line. */
function summary(text: string, format: string): string {
  let t: number[];
  if (format === 'json') {
    const s = JSON.parse(text) as { totals: { charges: number; adjustments: number; net: number } };
    t = [s.totals.charges, s.totals.adjustments, s.totals.net];
  } else {
    const total =
      text
        .split('\n')
        .find((l) => l.startsWith('total,'))
        ?.split(',') ?? [];
    t = [1, 2, 3].map((i) => Number(total[i] ?? 0));
  }
  return `${fmt(t[0])} charges, ${fmt(t[1])} adjustments, net ${fmt(t[2])} tokens`;
}

export function StatementCard({ accountId }: { accountId: string }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const today = dayUtc();
  const [from, setFrom] = useState(`${today.slice(0, 8)}01`);
  const [to, setTo] = useState(today);
  const [format, setFormat] = useState<'csv' | 'json'>('csv');
  const [done, setDone] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setDone('');
    const res = await action.run(async () => {
      if (!DAY.test(from)) throw clientProblem('Choose the first day.', 'from');
      if (!DAY.test(to)) throw clientProblem('Choose the last day.', 'to');
      if (from > to) throw clientProblem('The first day must not be after the last day.', 'from');
      const end = new Date(`${to}T00:00:00Z`);
      end.setUTCDate(end.getUTCDate() + 1);
      const q = `from=${enc(`${from}T00:00:00Z`)}&to=${enc(end.toISOString())}${format === 'csv' ? '&format=csv' : ''}`;
      return (await adminCall(`accounts/${enc(accountId)}/statement?${q}`)).text();
    });
    if (res === undefined) return;
    const name = `statement-${accountId}-${from}-to-${to}.${format}`;
    saveAsFile(res, name, format === 'csv' ? 'text/csv' : 'application/json');
    setDone(`Downloaded ${name}: ${summary(res, format)}.`);
  };
  return (
    <section class="card" aria-labelledby="statement-heading">
      <h2 id="statement-heading">Statement</h2>
      <p class="help">Every charge and adjustment in the period, with request ids and daily totals.</p>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField id="st-from" label="From (UTC day)" type="date" name="from" required value={from} onValue={(v) => setFrom(v)} />
        <InputField id="st-to" label="To (UTC day, included)" type="date" name="to" required value={to} onValue={(v) => setTo(v)} />
        <fieldset class="field">
          <legend>Format</legend>
          <div class="radio-row">
            {(['csv', 'json'] as const).map((f) => (
              <label key={f} for={`st-${f}`} class="radio">
                <input type="radio" id={`st-${f}`} name="format" value={f} checked={format === f} onChange={() => setFormat(f)} /> {f.toUpperCase()}
              </label>
            ))}
          </div>
        </fieldset>
        <FormActions submit="Download statement" busy={action.busy} />
      </form>
      {action.region()}
      <Result>{done}</Result>
    </section>
  );
}
