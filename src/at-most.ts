// Work over a list with at most `width` items in flight: more would only queue for the same
// connections or cores.

/** Runs `fn` on each item, at most `width` at once, started in list order; once all have ended, rejects with the first failure. */
export async function eachAtMost<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  const waiting = [...items];
  const failures: unknown[] = [];
  const lane = async () => {
    for (let item = waiting.shift(); item !== undefined; item = waiting.shift()) {
      await fn(item).catch((e: unknown) => failures.push(e));
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, waiting.length) }, lane));
  if (failures.length > 0) throw failures[0];
}
