// Failures counted per source (an address, an email address) over the last minute, in this
// process's memory: past `perMinute` the caller refuses the source with a 429 until its oldest
// failure is a minute old (admin tokens: only its wrong tokens, see routes/admin.ts). Bounded: at
// most `perMinute` failures for each of at most `maxSources` sources are remembered (the longest
// unseen is forgotten first).
import { ApiError } from './errors.ts';

const WINDOW_MS = 60_000;

export function failureThrottle(perMinute: number, opts: { maxSources?: number; now?: () => number } = {}) {
  const maxSources = opts.maxSources ?? 10_000;
  const now = opts.now ?? Date.now;
  const failures = new Map<string, number[]>();
  const recent = (source: string): number[] => {
    const list = failures.get(source);
    if (!list) return [];
    const since = now() - WINDOW_MS;
    while (list.length && list[0] <= since) list.shift();
    if (!list.length) failures.delete(source);
    return list;
  };
  return {
    /** Refuses the source while it is over its failures for the minute. */
    check(source: string, what: string): void {
      const list = recent(source);
      if (list.length < perMinute) return;
      const retry = Math.max(1, Math.ceil((list[0] + WINDOW_MS - now()) / 1000));
      throw new ApiError(429, `Too many ${what} in the last minute: retry after ${retry}s.`, 'requests', 'too_many_failures', null, {
        'retry-after': String(retry),
      });
    },
    record(source: string): void {
      const list = recent(source);
      failures.delete(source); // re-inserted last: the map's order is the order sources were last seen
      list.push(now());
      if (list.length > perMinute) list.shift();
      failures.set(source, list);
      if (failures.size > maxSources) failures.delete(failures.keys().next().value as string);
    },
    get sources(): number {
      return failures.size;
    },
  };
}

export type FailureThrottle = ReturnType<typeof failureThrottle>;
