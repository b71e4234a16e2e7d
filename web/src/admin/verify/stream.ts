// POST /admin/v1/verify with its progress: NDJSON lines {object: "verification.progress", phase,
// done, total}, then the result ({object: "verification", …}) or, if it failed once the answer had
// begun, {object: "error", status, error}, read by api/ndjson.ts. The run is kept here while the
// operator looks at other sections; the verify view subscribes to it.
import { adminCall } from '../api/client.ts';
import { readProgressStream } from '../api/ndjson.ts';
import type { Verification } from '../api/types.ts';

export interface Progress {
  phase: string;
  done: number;
  total: number;
}

async function verifyWithProgress(full: boolean, onProgress: (p: Progress) => void): Promise<Verification> {
  const res = await adminCall('verify', { method: 'POST', accept: 'application/x-ndjson', body: { full } });
  return readProgressStream<Verification>(res, {
    progress: 'verification.progress',
    onProgress: (m) => onProgress({ phase: String(m.phase), done: Number(m.done) || 0, total: Number(m.total) || 0 }),
    result: 'verification',
    what: 'verification',
  });
}

export interface VerifyRun {
  running: boolean;
  startedAt: number;
  took: number;
  progress: Progress | null;
  result: Verification | null;
  error: unknown;
}

export const run: VerifyRun = { running: false, startedAt: 0, took: 0, progress: null, result: null, error: null };
const changes = new EventTarget();
export const onChange = (fn: () => void): (() => void) => {
  changes.addEventListener('change', fn);
  return () => changes.removeEventListener('change', fn);
};
const changed = () => changes.dispatchEvent(new Event('change'));

/**
 * Starts a run (`full`: the whole log, otherwise from the last checkpoint on); `onPhase` is told
 * when the second phase begins (said once to screen readers).
 */
export function startVerify(full: boolean, onPhase: (phase: string) => void): void {
  Object.assign(run, { running: true, startedAt: Date.now(), took: 0, progress: null, result: null, error: null });
  changed();
  verifyWithProgress(full, (p) => {
    if (run.progress?.phase !== p.phase) onPhase(p.phase);
    run.progress = p;
    changed();
  })
    .then((r) => {
      run.result = r;
    })
    .catch((err) => {
      run.error = err;
    })
    .finally(() => {
      run.took = Date.now() - run.startedAt;
      run.running = false;
      changed();
    });
}
