// A long run's progress (verify, a correction's apply): a labelled <progress>, indeterminate until
// the first progress line, then done of total, read out as aria-valuetext (the bar is no live
// region: it changes several times a second), its text beside it and the time elapsed.
import { useEffect, useLayoutEffect, useReducer, useRef } from 'preact/hooks';

export interface ProgressBarProps {
  /** The region's class `${id}-progress`; ids `${id}-bar`, `${id}-status` and `${id}-elapsed`. */
  id: string;
  label: string;
  /** The run: its progress is null until the first progress line. */
  run: { running: boolean; startedAt: number; progress: { done: number; total: number } | null };
  text: string;
}

export function ProgressBar({ id, label, run, text }: ProgressBarProps) {
  const { running, startedAt, progress: p } = run;
  const bar = useRef<HTMLProgressElement>(null);
  const [, tick] = useReducer((n: number) => n + 1, 0);
  // The elapsed time ticks while the run goes on.
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(() => tick(undefined), 500);
    return () => clearInterval(timer);
  }, [running]);
  // The bar is set by hand: an indeterminate <progress> has no value or max attribute at all.
  useLayoutEffect(() => {
    const b = bar.current;
    if (!b) return;
    if (!p) {
      for (const a of ['value', 'max', 'aria-valuetext']) b.removeAttribute(a);
      return;
    }
    const max = Math.max(1, p.total);
    b.max = max;
    b.value = Math.min(p.done, max);
    b.setAttribute('aria-valuetext', text);
  });
  return (
    <div class={`progress-row ${id}-progress`} hidden={!running}>
      <label for={`${id}-bar`}>{label}</label>
      <progress id={`${id}-bar`} ref={bar} aria-describedby={`${id}-status ${id}-elapsed`} />
      <span id={`${id}-status`}>{text}</span>
      <span id={`${id}-elapsed`} class="muted">
        {running ? `${Math.floor((Date.now() - startedAt) / 1000)} s elapsed` : ''}
      </span>
    </div>
  );
}
