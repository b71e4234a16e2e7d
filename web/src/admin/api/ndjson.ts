// An operator's long call answered with its progress: NDJSON lines {object: <progress>, …}, then
// the result ({object: <result>, …}) or, if it failed once the answer had begun, {object: "error",
// status, error}. Verify and a correction's apply read theirs here. No DOM and no token: the caller
// makes the call (adminCall) and hands over the response.
import { ApiProblem } from '../../shared/problem.ts';

export interface ProgressStream {
  /** The `object` of the progress lines; each is told to onProgress as it arrives. */
  progress: string;
  onProgress: (line: Record<string, unknown>) => void;
  /** The `object` of the line that carries the result. */
  result: string;
  /** What runs, for the messages: "verification", "correction". */
  what: string;
  /** Said after a cut connection (what the operator can do about it). */
  advice?: string;
}

const cut = (message: string, advice = '') => new ApiProblem(0, { message: advice ? `${message} ${advice}` : message, code: 'network_error' });

/** The result of `res`; a gateway that answers one JSON body (no progress) is read as such. */
export async function readProgressStream<R>(res: Response, s: ProgressStream): Promise<R> {
  if (!/^application\/x-ndjson/i.test(res.headers.get('content-type') ?? '') || !res.body) return res.json() as Promise<R>;
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
      throw new ApiProblem(502, { message: `The gateway sent a line of its ${s.what} that is not JSON.`, code: 'bad_stream' });
    }
    if (msg?.object === s.progress) s.onProgress(msg);
    else last = msg;
  };
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch {
        throw cut(`The connection to the gateway was cut during the ${s.what}.`, s.advice);
      }
      if (chunk.done) break;
      buffered += decoder.decode(chunk.value, { stream: true });
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        take(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
      }
    }
    take(buffered + decoder.decode());
  } catch (err) {
    // A bad line ends the reading: the rest of the answer is not wanted.
    void reader.cancel().catch(() => undefined);
    throw err;
  }
  const end = last as Record<string, unknown> | null;
  if (end?.object === s.result) return end as R;
  // The HTTP status was 200, sent before the failure: the line carries the one it would have had.
  if (end?.object === 'error') throw new ApiProblem(Number(end.status) || 500, (end.error ?? {}) as Record<string, unknown>);
  throw cut(`The ${s.what} ended before its result arrived (the connection was cut).`, s.advice);
}
