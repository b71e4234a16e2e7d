// The double-entry journal of a range of UTC days, downloaded as an hledger journal, CSV or JSON.
import { useRef, useState } from 'preact/hooks';
import { saveAsFile } from '../../shared/download.ts';
import { adminCall } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { Result } from '../../shared/components/Page.tsx';
import { fmt } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';

const FORMATS = { hledger: ['journal', 'text/plain'], csv: ['csv', 'text/csv'], json: ['json', 'application/json'] } as const;
type Format = keyof typeof FORMATS;

export function JournalDownload({ from, to }: { from: string; to: string }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [format, setFormat] = useState<Format>('hledger');
  const [done, setDone] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setDone('');
    const text = await action.run(async () => {
      if (!from || !to) throw clientProblem('Choose the range above first.', 'format');
      return (await adminCall(`finance/journal?from=${from}&to=${to}&format=${format}`)).text();
    });
    if (text === undefined) return;
    const [ext, type] = FORMATS[format];
    const name = `journal-${from}-to-${to}.${ext}`;
    saveAsFile(text, name, type);
    const lines = text.split('\n').filter((l) => l.trim()).length;
    setDone(`Downloaded ${name} (${fmt(lines)} lines).`);
  };
  return (
    <section class="card" aria-labelledby="journal-heading">
      <h2 id="journal-heading">Journal</h2>
      <p class="help">
        Double entry for the range above (cash, processor fees, deferred revenue, recognised revenue, breakage, refunds, dispute losses, upstream cost and
        payable).
      </p>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <fieldset class="field">
          <legend>Format</legend>
          <div class="radio-row">
            {(Object.keys(FORMATS) as Format[]).map((f) => (
              <label key={f} for={`journal-${f}`} class="radio">
                <input type="radio" id={`journal-${f}`} name="format" value={f} checked={format === f} onChange={() => setFormat(f)} />{' '}
                {f === 'hledger' ? 'hledger' : f.toUpperCase()}
              </label>
            ))}
          </div>
        </fieldset>
        <FormActions submit="Download journal" busy={action.busy} />
      </form>
      {action.region()}
      <Result>{done}</Result>
    </section>
  );
}
