// A failed call, readably: what went wrong, the gateway's own message, what to do, the status and
// code; a "Enter a key" button when the key was the problem, and Dismiss. Shown inside the page's
// alert region (role="alert"), so a screen reader reads it out when it appears.
import { explain, USER_ADVICE, type Explained } from '../problem.ts';

export interface ProblemProps {
  problem: unknown;
  /** Put before the title, e.g. "The CSV could not be downloaded: ". */
  prefix?: string;
  advice?: Parameters<typeof explain>[1];
  onKey?: () => void;
  onDismiss: () => void;
}

export function ProblemBox({ problem, prefix = '', advice = USER_ADVICE, onKey, onDismiss }: ProblemProps) {
  const e: Explained = explain(problem, advice);
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

/** The page's alert region; empty until there is a problem to show. */
export function ProblemRegion(props: Omit<ProblemProps, 'problem'> & { problem: unknown | null; id?: string }) {
  const { id = 'problem', problem, ...rest } = props;
  return (
    <div id={id} class="problem" role="alert" aria-live="assertive">
      {problem != null && <ProblemBox problem={problem} {...rest} />}
    </div>
  );
}
