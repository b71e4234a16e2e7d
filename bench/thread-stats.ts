// A thread's scheduler figures from /proc (Linux): how long it ran, and how long it waited,
// runnable, for a CPU that another process or thread held.
import { readFileSync } from 'node:fs';

/** Milliseconds thread `tid` of process `pid` has run and has waited for a CPU (the main thread, the event loop, by default). */
export function schedstat(pid: number, tid = pid): { ran: number; queued: number } {
  const [ran, queued] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
  return { ran: Number(ran) / 1e6, queued: Number(queued) / 1e6 };
}
