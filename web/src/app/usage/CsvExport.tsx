// "Download CSV": GET /v1/usage?group_by=key&format=csv for the selected range, fetched with the
// saved key in the Authorization header and offered as a file. A failure goes to the page's alert
// region (onProblem); the status line says what was saved.
import { useState } from 'preact/hooks';
import { saveAsFile, suggestedName } from '../../shared/download.ts';
import { fmt } from '../../shared/format.ts';
import { v1 } from '../../shared/v1.ts';

export function CsvExport({ days, onProblem, onDone }: { days: number; onProblem: (err: unknown) => void; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  const download = async () => {
    setBusy(true);
    setStatus('Preparing the CSV…');
    try {
      const res = await v1.call(`usage?group_by=key&format=csv&range=${days}d`);
      const text = await res.text();
      const name = suggestedName(res.headers.get('content-disposition'), 'csv', `usage-${days}d-by-key.csv`);
      saveAsFile(text, name, 'text/csv');
      const rows = Math.max(0, text.split('\n').filter((l) => l.trim()).length - 1);
      setStatus(`Downloaded ${name} (${fmt(rows)} row${rows === 1 ? '' : 's'}, the last ${days} days).`);
      onDone();
    } catch (err) {
      setStatus('');
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="csv-export">
      <button
        type="button"
        id="download-csv"
        class="secondary"
        aria-describedby="csv-help"
        disabled={busy}
        aria-busy={busy ? 'true' : undefined}
        onClick={download}
      >
        Download CSV
      </button>
      <p id="csv-help" class="visually-hidden">
        Your usage in the selected range, one row per UTC day and API key, as a CSV file.
      </p>
      <p id="csv-status" class="help" role="status" aria-live="polite">
        {status}
      </p>
    </div>
  );
}
