// Runs every test/*.test.ts file in its own process (servers, ports and embedded databases stay
// isolated), two at a time, and ends with one line "N passed, N failed".
// A failure always shows: each file runs with uvu-guard.ts, so a hook's error is printed and fails
// it (uvu alone drops an error thrown in test.before: no test runs, nothing is printed, exit 0), and
// whatever the test library does, a file that exits 0 although fewer tests passed than it declared,
// or that printed no uvu summary at all, is counted as failed and its output shown.
// TEST_DIR runs another folder's *.test.ts (test/test-runner.test.ts runs its fixtures);
// TEST_HOOK_GUARD=off runs the files without uvu-guard.ts.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join, resolve } from 'node:path';

const dir = process.env.TEST_DIR ? resolve(process.env.TEST_DIR) : fileURLToPath(new URL('..', import.meta.url));
const guard = process.env.TEST_HOOK_GUARD === 'off' ? [] : ['--import', pathToFileURL(fileURLToPath(new URL('./uvu-guard.ts', import.meta.url))).href];
const v8Flags = wasmAbortWorkarounds();
const filter = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.test.ts'))
  .filter((f) => filter.length === 0 || filter.some((x) => f.includes(x)))
  .sort();
const parallel = Number(process.env.TEST_PARALLEL ?? 2);

interface Outcome {
  file: string;
  passed: number;
  failed: number;
  skipped: number;
  code: number | null;
  output: string;
  /** Why the file counts as failed although its own report did not say so (null: it did, or it passed). */
  note: string | null;
}

/**
 * Node 24's V8 aborted PGlite test processes on CI (issue 44, nodejs/node#64500), first with
 * `Check failed: jit_page.has_value()` and later with `jit_page_->allocations_.erase(addr) == 1`.
 * The second one's stack runs from a wasm-to-JS wrapper's tier-up into wasm code GC, which frees an
 * import wrapper already marked dying (fixed in V8 by "[wasm] Fix lookup of wrappers marked
 * is_dying", not yet in a Node 24 release). Test processes open hundreds of embedded databases, so
 * they run with wasm code GC off (`--no-wasm-code-gc`, known to every Node we support: the code it
 * would free stays until the process ends) and, where this Node's V8 has the flag, with the PKU
 * code-page guard off too (Node 22 and later), which removed the first abort. NODE_OPTIONS cannot
 * carry V8 flags, hence the probe. The gateway sets the first flag itself (src/eventstore/wasm-once.ts).
 */
function wasmAbortWorkarounds(): string[] {
  const options = spawnSync(process.execPath, ['--v8-options'], { encoding: 'utf8' }).stdout ?? '';
  const flags = /^\s*--wasm-code-gc\b/m.test(options) ? ['--no-wasm-code-gc'] : [];
  if (/^\s*--memory-protection-keys\b/m.test(options)) flags.push('--no-memory-protection-keys');
  return flags;
}

function runFile(file: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...v8Flags, '--import', 'tsx', ...guard, join(dir, file)], {
      env: { ...process.env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), Number(process.env.TEST_FILE_TIMEOUT_MS ?? 600_000));
    child.on('close', (code) => {
      clearTimeout(timer);
      const summary = /Total:\s+(\d+)/.exec(output);
      const total = Number(summary?.[1] ?? 0);
      const passed = Number(/Passed:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const missing = Math.max(0, total - passed - skipped);
      // A file that crashed before uvu's summary, or failed after it, counts as one failure at least.
      const failed = code === 0 && summary ? missing : Math.max(1, missing);
      const note = !summary
        ? `printed no uvu summary (exit ${code}): it crashed or stopped before uvu reported`
        : code === 0 && missing > 0
          ? `exited 0 although only ${passed} of its ${total} tests passed: a hook failed without a message (uvu drops errors thrown in test.before)`
          : null;
      resolve({ file, passed, failed, skipped, code, output, note });
    });
  });
}

const queue = [...files];
const outcomes: Outcome[] = [];
await Promise.all(
  Array.from({ length: parallel }, async () => {
    for (let f = queue.shift(); f; f = queue.shift()) {
      const o = await runFile(f);
      outcomes.push(o);
      const status = o.code === 0 && o.failed === 0 ? 'ok  ' : 'FAIL';
      console.log(`${status} ${o.file}: ${o.passed} passed, ${o.failed} failed${o.skipped ? `, ${o.skipped} skipped` : ''}${o.note ? ` (${o.note})` : ''}`);
      if (status === 'FAIL' || process.env.TEST_VERBOSE)
        console.log(
          o.output
            .split('\n')
            .map((l) => '    ' + l)
            .join('\n'),
        );
    }
  }),
);

const passed = outcomes.reduce((n, o) => n + o.passed, 0);
const failed = outcomes.reduce((n, o) => n + o.failed, 0);
const skipped = outcomes.reduce((n, o) => n + o.skipped, 0);
console.log(`\n${process.env.DATABASE_URL ? 'postgres' : 'pglite'}: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exitCode = failed > 0 || outcomes.some((o) => o.code !== 0 || o.note) ? 1 : 0;
