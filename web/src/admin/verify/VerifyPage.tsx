// Verify the ledger: runs the audit with its progress as a bar ("Checked N of M events (phase)",
// indeterminate until the first line, read out as aria-valuetext) and the elapsed time, then the
// verdict and the counts, with any problems in tables.
import { useEffect, useReducer, useState } from 'preact/hooks';
import { announce } from '../../shared/components/announce.tsx';
import { Heading } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { fmt } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { ProgressBar } from '../../shared/components/ProgressBar.tsx';
import { onChange, run, startVerify } from './stream.ts';

const PHASES: Record<string, string> = { chains: 'hash chains', 'read models': 'read models' };

export function VerifyPage() {
  const [, bump] = useReducer((n: number) => n + 1, 0);
  const redraw = () => bump(undefined);
  const [full, setFull] = useState(false);
  useEffect(() => onChange(redraw), []);

  const p = run.progress;
  const text = p ? `Checked ${fmt(p.done)} of ${fmt(p.total)} events (${PHASES[p.phase] ?? p.phase})` : 'Starting…';

  const start = () => {
    announce('Verifying the ledger. This may take a while.');
    // The bar is not a live region (it changes several times a second); a new phase is said once.
    startVerify(full, (phase) => phase === 'read models' && announce('Hash chains checked. Now comparing the read models.'));
  };
  const r = !run.running && !run.error ? run.result : null;
  return (
    <>
      <Heading text="Verify the ledger" intro="Checks that no event was edited and that the read models equal what the events make of them." />
      <section class="card" aria-labelledby="verify-heading" aria-busy={run.running ? 'true' : 'false'}>
        <h2 id="verify-heading">Audit</h2>
        <p>
          Reads the events since the last verification that passed: it recomputes their SHA-256 hash chains from where that one left them, applies them to the
          copy of the read models it kept, and compares every row they changed with the live one. A full verification walks every event and rebuilds every read
          model into a scratch schema to compare row by row; it may take a while on a long ledger. The first verification is always full. It reads only.
        </p>
        <div class="row">
          <label class="check" for="verify-full">
            <input type="checkbox" id="verify-full" name="full" checked={full} disabled={run.running} onChange={(e) => setFull(e.currentTarget.checked)} />{' '}
            Full: read the whole log again
          </label>
          <button type="button" id="verify-run" disabled={run.running} onClick={start}>
            Run verify
          </button>
        </div>
        <ProgressBar id="verify" label="Verifying the ledger…" run={run} text={text} />
        <div class="verify-result" role="status" aria-live="polite">
          {r && (
            <>
              <p class={`verdict ${r.ok ? 'ok' : 'bad'}`} id="verify-verdict" data-ok={String(r.ok)}>
                {r.ok ? '✓ The ledger is intact' : '✗ The ledger did not verify'}
              </p>
              <dl class="facts inline">
                <dt>Verification</dt>
                <dd data-field="mode" data-value={r.mode}>
                  {r.mode === 'full' || !r.since ? 'Full' : `Since the checkpoint of ${new Date(r.since.verifiedAt).toLocaleString()}`}
                </dd>
                <dt>Events read</dt>
                <dd data-field="checked_events" data-value={r.checkedEvents}>
                  {fmt(r.checkedEvents)}
                </dd>
                <dt>Events verified in all</dt>
                <dd data-field="events" data-value={r.events}>
                  {fmt(r.events)}
                </dd>
                <dt>Streams</dt>
                <dd data-field="streams" data-value={r.streams}>
                  {fmt(r.streams)}
                </dd>
                <dt>Hash-chain problems</dt>
                <dd data-field="chain_problems" data-value={r.chainProblems.length}>
                  {fmt(r.chainProblems.length)}
                </dd>
                <dt>Read-model differences</dt>
                <dd data-field="read_model_differences" data-value={r.readModelDifferences.length}>
                  {fmt(r.readModelDifferences.length)}
                </dd>
                <dt>Took</dt>
                <dd>{`${(run.took / 1000).toFixed(1)} s`}</dd>
              </dl>
              {r.chainProblems.length > 0 && (
                <DataTable
                  caption="Hash-chain problems"
                  captionVisible
                  columns={['Stream', '#Revision', '#Position', 'Problem']}
                  rows={r.chainProblems.slice(0, 50).map((x, i) => (
                    <tr key={i}>
                      <th scope="row">{x.stream}</th>
                      <Num value={x.revision} />
                      <Num value={x.position} />
                      <td>{x.problem}</td>
                    </tr>
                  ))}
                />
              )}
              {r.readModelDifferences.length > 0 && (
                <DataTable
                  caption="Read-model differences"
                  captionVisible
                  columns={['Table', 'Row']}
                  rows={r.readModelDifferences.slice(0, 50).map((d, i) => (
                    <tr key={i}>
                      <th scope="row">{d.table}</th>
                      <td>{d.key}</td>
                    </tr>
                  ))}
                />
              )}
            </>
          )}
        </div>
        <ProblemRegion problem={run.running ? null : run.error} onDismiss={() => ((run.error = null), redraw())} />
      </section>
    </>
  );
}
