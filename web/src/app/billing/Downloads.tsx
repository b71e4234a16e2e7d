// Statements (the account's charges over a period, CSV) and the usage CSV (per UTC day and key),
// fetched with the session and offered as files. A polite status line says what was saved.
import { useState } from 'preact/hooks';
import { saveAsFile, suggestedName } from '../../shared/download.ts';
import type { BillingApi } from './api.ts';

const DAY_MS = 86_400_000;
const isoDay = (d: Date) => d.toISOString().slice(0, 10);

interface Props {
  api: BillingApi;
  onProblem: (err: unknown) => void;
}

export function Downloads({ api, onProblem }: Props) {
  const today = new Date();
  const [from, setFrom] = useState(isoDay(new Date(today.getTime() - 30 * DAY_MS)));
  const [to, setTo] = useState(isoDay(today));
  const [range, setRange] = useState('30');
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');

  const fetchFile = async (download: () => Promise<Response>, fallback: string) => {
    setBusy(true);
    setStatus('Preparing the file…');
    try {
      const res = await download();
      const name = suggestedName(res.headers.get('content-disposition'), 'csv', fallback);
      saveAsFile(await res.text(), name, 'text/csv');
      setStatus(`Downloaded ${name}.`);
    } catch (err) {
      setStatus('');
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  const statement = (ev: Event) => {
    ev.preventDefault();
    // The end day is included: the statement runs to the start of the next day (UTC).
    const end = new Date(Date.parse(`${to}T00:00:00Z`) + DAY_MS).toISOString();
    return fetchFile(() => api.statement(`${from}T00:00:00Z`, end), `statement-${from}-${to}.csv`);
  };
  const usage = (ev: Event) => {
    ev.preventDefault();
    return fetchFile(() => api.usageCsv(Number(range)), `usage-${range}d-by-key.csv`);
  };

  return (
    <section class="card" aria-labelledby="downloads-heading">
      <h2 id="downloads-heading">Statements and usage</h2>
      <form class="download-form" id="statement-form" onSubmit={statement} aria-label="Statement">
        <div class="field">
          <label for="statement-from">From (UTC day)</label>
          <input type="date" id="statement-from" value={from} max={to} required onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
        </div>
        <div class="field">
          <label for="statement-to">To (UTC day, included)</label>
          <input type="date" id="statement-to" value={to} min={from} required onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
        </div>
        <button type="submit" class="secondary" disabled={busy}>
          Download statement
        </button>
      </form>
      <form class="download-form" id="usage-form" onSubmit={usage} aria-label="Usage CSV">
        <div class="field">
          <label for="usage-range">Usage over</label>
          <select id="usage-range" value={range} onChange={(e) => setRange((e.target as HTMLSelectElement).value)}>
            <option value="7">the last 7 days</option>
            <option value="30">the last 30 days</option>
            <option value="90">the last 90 days</option>
          </select>
        </div>
        <button type="submit" class="secondary" disabled={busy}>
          Download usage CSV
        </button>
      </form>
      <p class="help">A statement lists every charge and adjustment with daily totals; the usage CSV has one row per UTC day and API key.</p>
      <p id="download-status" class="help" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
