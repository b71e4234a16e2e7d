// How a loop that talks to the database lives through an outage: it waits longer after each
// failure (up to a cap), and its log says once that it failed and once that it recovered, not
// once per retry.
export interface OutageLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface OutageReporter {
  /** A failure: logged if it starts an outage; returns how long to wait before the next try. */
  failed(err: unknown): number;
  /** A success: ends the outage (logged with its length) if there was one. */
  ok(): void;
  readonly failing: boolean;
}

export function outageReporter(log: OutageLog, what: string, backoff: { baseMs?: number; maxMs?: number } = {}): OutageReporter {
  const base = backoff.baseMs ?? 250;
  const max = backoff.maxMs ?? 5000;
  let since: number | null = null;
  let failures = 0;
  return {
    failed(err) {
      failures++;
      if (since === null) {
        since = Date.now();
        log.warn({ err: (err as Error)?.message ?? String(err) }, `${what} failed; retrying with backoff until the database answers`);
      }
      return Math.min(max, base * 2 ** Math.min(failures - 1, 16));
    },
    ok() {
      if (since !== null) log.info({ outageMs: Date.now() - since, failures }, `${what} recovered`);
      since = null;
      failures = 0;
    },
    get failing() {
      return since !== null;
    },
  };
}
