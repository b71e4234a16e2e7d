// An error region (role="alert") showing what went wrong and what to do, and the hook every form
// uses to run an action: the button busy meanwhile, the error shown and the field it names marked.
import type { RefObject } from 'preact';
import { useState } from 'preact/hooks';
import { ApiProblem } from '../../shared/problem.ts';
import { explainAdmin } from '../api/explain.ts';

export function ProblemRegion({ problem, onDismiss, id }: { problem: unknown; onDismiss: () => void; id?: string }) {
  const e = problem == null ? null : explainAdmin(problem);
  const meta = e ? [e.status ? `HTTP ${e.status}` : null, e.code].filter(Boolean).join(' · ') : '';
  return (
    <div class="problem" id={id} role="alert" aria-live="assertive">
      {e && (
        <div class="problem-box">
          <p class="problem-title">{e.title}</p>
          {e.message && <p class="problem-message">{e.message}</p>}
          <p class="problem-action">
            <strong>What to do: </strong>
            {e.action}
          </p>
          <div class="problem-actions">
            {meta && <span class="problem-meta">{meta}</span>}
            <button type="button" class="secondary small" aria-label="Dismiss this error" onClick={onDismiss}>
              Dismiss
            </button>
          </div>
        </div>
      )}
    </div>
  );
}

export interface Action {
  busy: boolean;
  problem: unknown;
  setProblem: (p: unknown) => void;
  /** Runs `work`; its error is shown (and the field it names, in `form`, marked and focused). */
  run<T>(work: () => Promise<T>): Promise<T | undefined>;
  /** The error region of this action. */
  region: (id?: string) => preact.JSX.Element;
}

export function clearInvalid(form: HTMLElement | null): void {
  for (const n of form?.querySelectorAll('[aria-invalid="true"]') ?? []) n.removeAttribute('aria-invalid');
}

/** Marks the field named `param` in `form` as invalid and puts the cursor in it. */
export function markInvalid(form: HTMLElement | null, param: string | null): void {
  if (!form || !param) return;
  const bad = form.querySelector<HTMLElement>(`[name="${CSS.escape(param)}"]`);
  if (!bad) return;
  bad.setAttribute('aria-invalid', 'true');
  bad.focus();
}

export function useAction(form?: RefObject<HTMLElement | null>): Action {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  async function run<T>(work: () => Promise<T>): Promise<T | undefined> {
    setBusy(true);
    setProblem(null);
    clearInvalid(form?.current ?? null);
    try {
      return await work();
    } catch (err) {
      setProblem(err);
      if (err instanceof ApiProblem) markInvalid(form?.current ?? null, err.param);
      return undefined;
    } finally {
      setBusy(false);
    }
  }
  const region = (id?: string) => <ProblemRegion id={id} problem={problem} onDismiss={() => setProblem(null)} />;
  return { busy, problem, setProblem, run, region };
}
