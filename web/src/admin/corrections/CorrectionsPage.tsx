// Corrections: the terms (model, what to correct, the right value, the window, a reason), a dry run
// shown as a summary, a chart and tables, then "Apply correction" after a confirmation. A change
// of the form after a dry run disables Apply until the dry run is run again. Applying shows its
// progress as verify's (NDJSON progress lines read by api/ndjson.ts), a bar of charges adjusted.
import { useEffect, useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, adminCall } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Field, InputField, plain } from '../../shared/components/Field.tsx';
import { Heading } from '../../shared/components/Page.tsx';
import { fmt, isoToLocal, localToIso, milli, signed } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { ProgressBar } from '../../shared/components/ProgressBar.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import { readProgressStream } from '../api/ndjson.ts';
import type { AppliedCorrection, CorrectionReport, List, Model } from '../api/types.ts';
import { ChargeDetails, COMPONENTS, ReconciliationTable, ReportSummary } from './Reconciliation.tsx';
import { ReconciliationChart } from './ReconciliationChart.tsx';

type Body = Record<string, unknown>;

/** A progress line of an apply: charges of the window gone through in this pass, and adjustments appended so far. */
interface ApplyProgress {
  done: number;
  total: number;
  appended: number;
  pass: number;
}

async function applyWithProgress(body: Body, onProgress: (p: ApplyProgress) => void): Promise<AppliedCorrection> {
  const res = await adminCall('corrections', { method: 'POST', body: { ...body, dry_run: false }, accept: 'application/x-ndjson' });
  return readProgressStream<AppliedCorrection>(res, {
    progress: 'correction.progress',
    onProgress: (m) => onProgress({ done: Number(m.done) || 0, total: Number(m.total) || 0, appended: Number(m.appended) || 0, pass: Number(m.pass) || 1 }),
    result: 'reconciliation',
    what: 'correction',
    advice: 'Run the same correction again to finish it: what was appended stays, and nothing is appended twice.',
  });
}

export function CorrectionsPage() {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const apply = useAction();
  const [models, setModels] = useState<Model[] | null>(null);
  const now = new Date();
  const [t, setT] = useState({
    model: '',
    component: 'multiplier',
    value: '',
    from: isoToLocal(new Date(now.getTime() - 86_400_000)),
    to: isoToLocal(new Date(Math.floor(now.getTime() / 1000) * 1000)),
    reason: '',
    alsoNow: false,
  });
  const [previewed, setPreviewed] = useState<{ body: Body; report: CorrectionReport } | null>(null);
  const [stale, setStale] = useState(false);
  const [applied, setApplied] = useState<AppliedCorrection | null>(null);
  const [run, setRun] = useState<{ running: boolean; startedAt: number; progress: ApplyProgress | null }>({ running: false, startedAt: 0, progress: null });
  const appliedRef = useRef<HTMLElement>(null);
  const set = (patch: Partial<typeof t>) => {
    setT((old) => ({ ...old, ...patch }));
    if (previewed) setStale(true);
  };

  useEffect(() => {
    admin<List<Model>>('models').then((m) => setModels(m.data), action.setProblem);
  }, []);
  useEffect(() => appliedRef.current?.focus(), [applied]);

  const c = COMPONENTS[t.component];
  const fromIso = localToIso(t.from);
  const toIso = localToIso(t.to);

  function terms(): Body {
    const body: Body = { model: t.model, component: t.component, reason: t.reason.trim() };
    if (!t.model) throw clientProblem('Choose the model.', 'model');
    const v = Number(t.value);
    if (t.value.trim() === '' || !Number.isFinite(v)) throw clientProblem(`Enter the right ${c.label.toLowerCase()}.`, 'value');
    body.value = v;
    body.from = fromIso;
    if (!fromIso) throw clientProblem('Choose when the window starts.', 'from');
    if (toIso) body.to = toIso;
    else if (!t.alsoNow) throw clientProblem('Choose when the window ends.', 'to');
    if (t.alsoNow) body.also_from_now = true;
    return body;
  }

  const preview = async (ev: Event) => {
    ev.preventDefault();
    setApplied(null);
    const res = await action.run(async () => {
      const body = terms();
      return { body, report: await admin<CorrectionReport>('corrections', { method: 'POST', body: { ...body, dry_run: true } }) };
    });
    if (!res) return;
    setPreviewed(res);
    setStale(false);
    const s = res.report.totals;
    announce(
      `Dry run: ${fmt(s.charges)} charges of ${fmt(res.report.accounts.length)} accounts; billed now ${fmt(s.billedNow)}, corrected ${fmt(s.corrected)}, difference ${signed(s.difference)}. Nothing was written.`,
    );
  };

  const applyNow = async () => {
    if (!previewed) return;
    const { report } = previewed;
    const s = report.totals;
    const answer = await confirmAction({
      title: 'Apply this correction?',
      body: [
        `${report.modelId}: ${fmt(s.charges)} charges of ${fmt(report.accounts.length)} accounts move from ${fmt(s.billedNow)} to ${fmt(s.corrected)} tokens (${signed(s.difference)}).`,
        'This appends the correction and one adjustment per charge to the ledger; charges are never edited. It can be undone only by another correction.',
      ],
      confirmLabel: 'Apply correction',
      danger: true,
    });
    if (!answer.confirmed) {
      announce('The correction was not applied.');
      return;
    }
    announce('Applying the correction. This may take a while.');
    setRun({ running: true, startedAt: Date.now(), progress: null });
    const res = await apply.run(() => applyWithProgress(previewed.body, (progress) => setRun((r) => ({ ...r, progress }))));
    setRun((r) => ({ ...r, running: false }));
    if (!res) return;
    setApplied(res);
  };

  const report = previewed?.report;
  const p = run.progress;
  const progressText = p
    ? `Adjusted ${fmt(p.done)} of ${fmt(p.total)} charges, ${fmt(p.appended)} adjustment${p.appended === 1 ? '' : 's'} appended (pass ${fmt(p.pass)})`
    : 'Starting…';
  const empty = !!report && report.accounts.length === 0;
  return (
    <>
      <Heading
        text="Corrections"
        intro="Re-price what a model was billed in a window: a dry run shows the reconciliation per account; applying appends adjustments, never edits a charge."
      />
      <section class="card" aria-labelledby="correction-form-heading">
        <h2 id="correction-form-heading">Correction</h2>
        <form ref={form} class="form-grid" noValidate onSubmit={preview}>
          <Field id="cx-model" label="Model">
            <select id="cx-model" name="model" required value={t.model} onChange={(e) => set({ model: e.currentTarget.value })}>
              <option value="">{models ? 'Choose a model' : 'Loading the models…'}</option>
              {(models ?? []).map((x) => (
                <option key={x.model_id} value={x.model_id}>{`${x.model_id} (now ×${milli(x.multiplier_milli)})`}</option>
              ))}
            </select>
          </Field>
          <Field id="cx-component" label="What to correct">
            <select id="cx-component" name="component" value={t.component} onChange={(e) => set({ component: e.currentTarget.value })}>
              {Object.entries(COMPONENTS).map(([k, x]) => (
                <option key={k} value={k}>
                  {x.label}
                </option>
              ))}
            </select>
          </Field>
          <InputField
            id="cx-value"
            label={c.label}
            help={c.help}
            type="number"
            name="value"
            min={0}
            step={c.step}
            inputMode="decimal"
            required
            value={t.value}
            onValue={(v) => set({ value: v })}
          />
          <div class="field">
            <label for="cx-from">From (your local time, included)</label>
            <input
              id="cx-from"
              type="datetime-local"
              name="from"
              step={1}
              required
              {...plain}
              aria-describedby="cx-from-utc"
              value={t.from}
              onInput={(e) => set({ from: e.currentTarget.value })}
            />
            <output for="cx-from" class="utc" id="cx-from-utc">
              {fromIso ? `= ${fromIso}` : ''}
            </output>
          </div>
          <div class="field">
            <label for="cx-to">To (your local time, excluded; in the past)</label>
            <input
              id="cx-to"
              type="datetime-local"
              name="to"
              step={1}
              {...plain}
              aria-describedby="cx-to-utc"
              value={t.to}
              onInput={(e) => set({ to: e.currentTarget.value })}
            />
            <output for="cx-to" class="utc" id="cx-to-utc">
              {toIso ? `= ${toIso}` : t.alsoNow ? 'empty: until the correction is applied' : ''}
            </output>
          </div>
          <InputField
            id="cx-reason"
            label="Reason for the correction"
            optional
            wide
            help="Recorded with the correction."
            type="text"
            name="reason"
            maxLength={500}
            value={t.reason}
            onValue={(v) => set({ reason: v })}
          />
          <div class="field check-field">
            <label class="check" for="cx-now">
              <input type="checkbox" id="cx-now" name="also_from_now" checked={t.alsoNow} onChange={(e) => set({ alsoNow: e.currentTarget.checked })} /> Also
              price the model at this value from now on
            </label>
            <p class="help">Then “To” may be left empty: the window ends when the correction is applied. Not for tokens per image.</p>
          </div>
          <FormActions submit="Preview (dry run)" busy={action.busy} />
        </form>
        {action.region()}
      </section>
      <div class="correction-output">
        {report && (
          <section class="card" aria-labelledby="dry-run-heading" id="dry-run" aria-busy={run.running ? 'true' : 'false'}>
            <h2 id="dry-run-heading">Dry run: what this correction would change</h2>
            <p class="help">Nothing has been written. Billed now is each charge plus every adjustment already applied to it; corrected is what it becomes.</p>
            <ReportSummary report={report} />
            <figure class="recon-figure">
              <ReconciliationChart report={report} />
              <figcaption>
                <span class="legend-item">
                  <span class="legend-swatch billed-now" aria-hidden="true" />
                  Billed now
                </span>
                <span class="legend-item">
                  <span class="legend-swatch corrected" aria-hidden="true" />
                  Corrected
                </span>
                <span class="legend-note">The table below holds the same numbers.</span>
              </figcaption>
            </figure>
            <ReconciliationTable report={report} idBase="dry-run" />
            <ChargeDetails report={report} />
            <div class="row apply-row">
              <button type="button" class="danger" disabled={empty || stale || !!applied || apply.busy} onClick={applyNow}>
                Apply correction
              </button>
              {empty && <span class="muted">Nothing to apply: no charge in this window.</span>}
            </div>
            <p class="help warn stale-note" hidden={!stale || !!applied}>
              The form changed after this dry run: run the dry run again before applying.
            </p>
            <ProgressBar id="cx-apply" label="Applying the correction…" run={run} text={progressText} />
            {apply.region()}
          </section>
        )}
      </div>
      <div class="applied-output">
        {applied && (
          <section class="card applied" aria-labelledby="applied-heading" id="applied" tabIndex={-1} ref={appliedRef}>
            <h2 id="applied-heading">Applied</h2>
            <div class="result-box" role="status">
              <p>{`Applied correction ${applied.correctionId.slice(0, 8)}…: ${fmt(applied.appended)} adjustment${applied.appended === 1 ? '' : 's'} appended, ${fmt(applied.already_applied)} already applied.`}</p>
            </div>
            <p class="help">Billed now is as it was before this correction; each difference is the adjustment appended.</p>
            <dl class="facts inline">
              <dt>Adjustments appended</dt>
              <dd data-field="appended" data-value={applied.appended}>
                {fmt(applied.appended)}
              </dd>
              <dt>Already applied</dt>
              <dd data-field="already_applied" data-value={applied.already_applied}>
                {fmt(applied.already_applied)}
              </dd>
              <dt>Passes</dt>
              <dd>{fmt(applied.passes)}</dd>
            </dl>
            <ReportSummary report={applied} />
            <ReconciliationTable report={applied} idBase="applied" />
          </section>
        )}
      </div>
    </>
  );
}
