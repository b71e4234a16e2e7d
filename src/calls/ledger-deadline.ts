// One metered call's bound on waiting for the ledger, shared by all its steps (reading the
// account, the hold, the charge, resolving a charge whose outcome is unknown, the release). Each
// step alone is bounded by the pool's timeouts; without a shared bound a call that meets a stalled
// database at two steps waits out both. The upstream call's own time is not counted.
import { DatabaseDeadlinePassed } from '../eventstore/errors.ts';

/** TOLLGATE_LEDGER_DEADLINE_MS: the default worst case a stalled database adds to a call. */
export const LEDGER_DEADLINE_MS = 5000;

export interface LedgerBudget {
  /**
   * Waits for `step` within what is left of the bound; past it, calls `onLate` (the step goes
   * on in the background: whoever cares about its outcome is told there) and throws
   * DatabaseDeadlinePassed.
   */
  wait<T>(step: Promise<T>, onLate?: () => void): Promise<T>;
  /** Set once a step outlived the bound: loops of that call stop sending anything more. */
  readonly expired: boolean;
  /** What is left of the bound (ms), as of the end of the last step. */
  readonly leftMs: number;
}

export function ledgerBudget(boundMs: number): LedgerBudget {
  let leftMs = boundMs;
  let expired = false;
  return {
    get expired() {
      return expired;
    },
    get leftMs() {
      return Math.max(0, leftMs);
    },
    async wait<T>(step: Promise<T>, onLate?: () => void): Promise<T> {
      step.catch(() => undefined); // a step that fails after the bound is nobody's unhandled rejection
      if (expired) {
        onLate?.();
        throw new DatabaseDeadlinePassed(boundMs);
      }
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => {
            expired = true;
            onLate?.();
            reject(new DatabaseDeadlinePassed(boundMs));
          },
          Math.max(0, leftMs),
        );
      });
      try {
        return await Promise.race([step, late]);
      } finally {
        clearTimeout(timer);
        leftMs -= Date.now() - started;
      }
    },
  };
}
