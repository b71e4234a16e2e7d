// Abort helpers shared by the adapters: a client disconnect must stop upstream work promptly.
import { setImmediate as nextTurn, setTimeout as sleepFor } from 'node:timers/promises';

/** The error thrown when `signal` aborts: its reason, or a standard AbortError. */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return new DOMException('The operation was aborted', 'AbortError');
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortError(signal);
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

/** Waits `ms` (or just yields to the event loop when 0); rejects as soon as `signal` aborts. */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  throwIfAborted(signal);
  try {
    if (ms > 0) await sleepFor(ms, undefined, { signal });
    else await nextTurn(undefined, { signal });
  } catch (error) {
    if (signal.aborted) throw abortError(signal);
    throw error;
  }
}

/** A controller for one piece of work that also aborts when `signal` does (at once if it already has). */
export function abortedWith(signal: AbortSignal): AbortController {
  const abort = new AbortController();
  if (signal.aborted) abort.abort();
  else signal.addEventListener('abort', () => abort.abort(), { once: true });
  return abort;
}
