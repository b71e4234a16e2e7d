// The hook a form uses to run an action: the button busy meanwhile, the error shown in the form's
// alert region and the field it names marked.
import type { RefObject } from 'preact';
import { useState } from 'preact/hooks';
import { ProblemRegion } from './components/ProblemBox.tsx';
import { ApiProblem } from './problem.ts';

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
