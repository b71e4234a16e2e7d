// uvu with hooks that cannot fail in silence. uvu 0.5.6 runs a suite's `before` hooks inside a
// try whose `finally` returns: an error thrown there is dropped, no test of the suite runs, nothing
// is printed and the file exits 0 (an `after.each` that throws after a failed test is dropped the
// same way). The test runner (run-tests.ts) makes every `import … from 'uvu'` of a test file load
// this module instead (uvu-guard.ts), so each hook's error is printed with its stack when it
// happens and fails the run:
// - a `before` that throws: every test of its suite fails, naming the hook's error (uvu counts them);
// - an `after` or `after.each` that throws: printed, and the process exits 1.
// `before.each` needs nothing: uvu already fails the test with its error.
import * as uvu from 'uvu';
import type { Callback, Test } from 'uvu';

let hookFailures = 0;
process.on('exit', () => {
  if (hookFailures === 0) return;
  process.stderr.write(`\n  ${hookFailures} uvu hook(s) failed: see their errors above.\n`);
  process.exitCode = 1;
});

function guard<T>(real: Test<T>, suiteName: string): Test<T> {
  let setupError: unknown = null;
  const where = suiteName ? ` of suite "${suiteName}"` : '';
  const failed = (hook: string, err: unknown) => {
    hookFailures++;
    process.stderr.write(`\n  ✘ test.${hook}${where} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n\n`);
  };
  const hook =
    (name: string, fn: Callback<T>): Callback<T> =>
    async (state) => {
      try {
        await fn(state);
      } catch (err) {
        failed(name, err);
        if (name === 'before') setupError ??= err;
      }
    };
  const guarded =
    (fn: Callback<T>): Callback<T> =>
    async (state) => {
      if (setupError !== null) throw new Error(`not run: test.before${where} failed: ${setupError instanceof Error ? setupError.message : String(setupError)}`);
      await fn(state);
    };
  const t = ((name: string, fn: Callback<T>) => real(name, guarded(fn))) as Test<T>;
  t.only = (name, fn) => real.only(name, guarded(fn));
  t.skip = (name, fn) => real.skip(name, fn);
  t.run = () => real.run();
  t.before = Object.assign((fn: Callback<T>) => real.before(hook('before', fn)), { each: (fn: Callback<T>) => real.before.each(fn) });
  t.after = Object.assign((fn: Callback<T>) => real.after(hook('after', fn)), { each: (fn: Callback<T>) => real.after.each(hook('after.each', fn)) });
  return t;
}

export const test: Test = guard(uvu.test, '');
export const suite = <T = Record<string, any>>(title?: string, context?: T): Test<T> => guard(uvu.suite(title, context), title ?? '');
export const exec = uvu.exec;
