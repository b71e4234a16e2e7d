// A movable clock for a gateway process under test, loaded with `--import` (after tsx). Events are
// dated by the process's `new Date()`, so a test whose events must fall in another month than the
// real one moves the process's clock: when TEST_CLOCK_FILE is set, `new Date()` and `Date.now()`
// are the real time plus the offset (milliseconds, a whole number) that the test writes to that
// file (whole: written aside and renamed into place). The file is checked at most every 20 ms (its
// mtime, synchronously), so a test waits a little longer than that after moving the clock. Date
// with arguments, Date.parse, Date.UTC and the prototype are untouched; so are timers and
// performance.now(), which keep the real time.
import { readFileSync, statSync } from 'node:fs';

const file = process.env.TEST_CLOCK_FILE;

if (file) {
  const RealDate = Date;
  const realNow = Date.now.bind(Date);
  let offset = 0;
  let checkedAt = -Infinity;
  let seenMtime = -1;
  const currentOffset = (): number => {
    const now = realNow();
    if (now - checkedAt < 20) return offset;
    checkedAt = now;
    try {
      const mtime = statSync(file).mtimeMs;
      if (mtime !== seenMtime) {
        const read = Number.parseInt(readFileSync(file, 'utf8'), 10);
        // A file caught half written keeps the offset until the next look.
        if (Number.isSafeInteger(read)) [offset, seenMtime] = [read, mtime];
      }
    } catch {
      offset = 0; // no file (yet): the real time
    }
    return offset;
  };

  class TestDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(realNow() + currentOffset());
      else super(...(args as [string]));
    }
    static override now(): number {
      return realNow() + currentOffset();
    }
    // Dates made before this module, or by Node's internals, are Dates too.
    static override [Symbol.hasInstance](value: unknown): boolean {
      return value instanceof RealDate;
    }
  }
  // `Date()` called without new gives the time as text; a class cannot be called, so keep that path too.
  const MovableDate = new Proxy(TestDate, {
    apply: () => new TestDate().toString(),
  });
  globalThis.Date = MovableDate as DateConstructor;
}
