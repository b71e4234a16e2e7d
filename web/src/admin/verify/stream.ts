// POST /admin/v1/verify with its progress: NDJSON lines {object: "verification.progress", phase,
// done, total}, then the result ({object: "verification", …}) or, if it failed once the answer had
// begun, {object: "error", status, error}. The run is kept here while the operator looks at other
// sections; the verify view subscribes to it.
import { ApiProblem } from '../../shared/problem.ts';
import { adminCall } from '../api/client.ts';
import type { Verification } from '../api/types.ts';

export interface Progress {
  phase: string;
  done: number;
  total: number;
}

async function verifyWithProgress(onProgress: (p: Progress) => void): Promise<Verification> {
  const res = await adminCall('verify', { method: 'POST', accept: 'application/x-ndjson' });
  // A gateway that answers one JSON body (no progress) is read as such.
  if (!/^application\/x-ndjson/i.test(res.headers.get('content-type') ?? '') || !res.body) return res.json();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let last: Record<string, unknown> | null = null;
  const take = (text: string) => {
    if (!text.trim()) return;
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(text);
    } catch {
      throw new ApiProblem(502, { message: 'The gateway sent a line of its verification that is not JSON.', code: 'bad_stream' });
    }
    if (msg?.object === 'verification.progress') onProgress({ phase: String(msg.phase), done: Number(msg.done) || 0, total: Number(msg.total) || 0 });
    else last = msg;
  };
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch {
      throw new ApiProblem(0, { message: 'The connection to the gateway was cut while it verified.', code: 'network_error' });
    }
    if (chunk.done) break;
    buffered += decoder.decode(chunk.value, { stream: true });
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      take(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  }
  take(buffered + decoder.decode());
  const end = last as Record<string, unknown> | null;
  if (end?.object === 'verification') return end as unknown as Verification;
  // The HTTP status was 200, sent before the failure: the line carries the one it would have had.
  if (end?.object === 'error') throw new ApiProblem(Number(end.status) || 500, (end.error ?? {}) as Record<string, unknown>);
  throw new ApiProblem(0, { message: 'The verification ended before its result arrived (the connection was cut).', code: 'network_error' });
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

/** Starts a run; `onPhase` is told when the second phase begins (said once to screen readers). */
export function startVerify(onPhase: (phase: string) => void): void {
  Object.assign(run, { running: true, startedAt: Date.now(), took: 0, progress: null, result: null, error: null });
  changed();
  verifyWithProgress((p) => {
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
