// The test runner (test/support/run-tests.ts) never lets a failure pass in silence (issue #39 item
// 4: a setup that threw in a full run printed only "(0 / 7)"). It runs the fixtures in
// test/fixtures/runner/ as it runs the suite: a file whose test.before throws, one whose after hook
// throws once its tests passed, and one that passes. uvu alone prints nothing for the first and
// exits 0; through the runner both failures print their error and count, and the runner's own check
// (a file that exits 0 with fewer tests passed than declared, or with no summary) counts them even
// without the hook guard.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;
const FIXTURES = 'test/fixtures/runner';

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: ROOT,
      env: { ...process.env, FORCE_COLOR: '0', TEST_PARALLEL: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

test('uvu alone drops an error thrown in test.before: nothing printed, exit 0 (what the guard is for)', async () => {
  const { code, output } = await run([`${FIXTURES}/setup-throws.test.ts`]);
  assert.is(code, 0, output);
  assert.match(output, '(0 / 3)');
  assert.not.match(output, 'fixture setup failure');
});

test('the runner prints a failed setup and teardown with their errors and counts them', async () => {
  const { code, output } = await run(['test/support/run-tests.ts'], { TEST_DIR: FIXTURES });
  assert.is(code, 1, output);
  assert.match(output, 'FAIL setup-throws.test.ts: 0 passed, 3 failed');
  assert.match(output, 'Error: fixture setup failure: the database is not there');
  assert.match(output, /setup-throws\.test\.ts:\d+:\d+/, "the setup error's stack");
  assert.match(output, 'not run: test.before failed: fixture setup failure', 'each test names why it did not run');
  assert.match(output, 'FAIL teardown-throws.test.ts: 2 passed, 1 failed');
  assert.match(output, 'test.after of suite "teardown" failed: Error: fixture teardown failure: the server would not stop');
  assert.match(output, 'ok   passes.test.ts: 1 passed, 0 failed');
  assert.match(output, /^(pglite|postgres): 3 passed, 4 failed$/m);
});

test("without the hook guard, the runner's own check still counts the silent setup failure", async () => {
  const { code, output } = await run(['test/support/run-tests.ts'], { TEST_DIR: FIXTURES, TEST_HOOK_GUARD: 'off' });
  assert.is(code, 1, output);
  assert.match(output, 'FAIL setup-throws.test.ts: 0 passed, 3 failed (exited 0 although only 0 of its 3 tests passed');
  assert.match(output, 'FAIL teardown-throws.test.ts: 0 passed, 1 failed (printed no uvu summary (exit 1)');
  assert.match(output, /^(pglite|postgres): 1 passed, 4 failed$/m);
});

test("where this Node's V8 guards code pages with memory protection keys, test processes run with that guard off", async () => {
  const v8Options = spawnSync(process.execPath, ['--v8-options'], { encoding: 'utf8' }).stdout;
  const hasGuard = /^\s*--memory-protection-keys\b/m.test(v8Options);
  const report = join(mkdtempSync(join(tmpdir(), 'runner-flags-')), 'flags.json');
  const { code, output } = await run(['test/support/run-tests.ts', 'passes'], { TEST_DIR: FIXTURES, FIXTURE_FLAGS_FILE: report });
  assert.is(code, 0, output);
  const flags = JSON.parse(readFileSync(report, 'utf8')) as string[];
  assert.is(flags.includes('--no-memory-protection-keys'), hasGuard, `Node ${process.version}: ${flags.join(' ')}`);
});

test.run();
