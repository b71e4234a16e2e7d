// A failed call, readably: what went wrong, the gateway's own message, what to do, the status and
// code; a "Enter a key" button when the key was the problem, and Dismiss. Shown inside an alert
// region (role="alert"), so a screen reader reads it out when it appears. The words come from
// `explain` with the page's advice, or from the ProblemWording a page provides (the console's).
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { explain, USER_ADVICE, type Explained } from '../problem.ts';

type Advice = Parameters<typeof explain>[1];

/** How the problems of the pages below it are worded; the key holder's advice unless provided. */
export const ProblemWording = createContext<(problem: unknown, advice?: Advice) => Explained>(explain);

export interface ProblemProps {
  problem: unknown;
  /** Put before the title, e.g. "The CSV could not be downloaded: ". */
  prefix?: string;
  advice?: Advice;
  onKey?: () => void;
  onDismiss: () => void;
}

export function ProblemBox({ problem, prefix = '', advice = USER_ADVICE, onKey, onDismiss }: ProblemProps) {
  const e = useContext(ProblemWording)(problem, advice);
  const meta = [e.status ? `HTTP ${e.status}` : null, e.code].filter(Boolean).join(' · ');
  return (
    <div class="problem-box">
      <p class="problem-title">
        {prefix}
        {e.title}
      </p>
      {e.message && <p class="problem-message">{e.message}</p>}
      <p class="problem-action">
        <strong>What to do: </strong>
        {e.action}
      </p>
      <div class="problem-actions">
        {meta && <span class="problem-meta">{meta}</span>}
        {(e.status === 401 || e.code === 'missing_api_key') && onKey && (
          <button type="button" class="secondary small" onClick={onKey}>
            Enter a key
          </button>
        )}
        <button type="button" class="secondary small" aria-label="Dismiss this error" onClick={onDismiss}>
          Dismiss
        </button>
      </div>
    </div>
  );
}

/** An alert region; empty until there is a problem to show. */
export function ProblemRegion(props: Omit<ProblemProps, 'problem'> & { problem: unknown | null; id?: string }) {
  const { id, problem, ...rest } = props;
  return (
    <div id={id} class="problem" role="alert" aria-live="assertive">
      {problem != null && <ProblemBox problem={problem} {...rest} />}
    </div>
  );
}
