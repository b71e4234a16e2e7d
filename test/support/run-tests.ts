// Runs every test/*.test.ts file in its own process (servers, ports and embedded databases stay
// isolated), two at a time, and ends with one line "N passed, N failed".
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const dir = fileURLToPath(new URL('..', import.meta.url));
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
}

function runFile(file: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(dir, file)], {
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
      const total = Number(/Total:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const passed = Number(/Passed:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(output)?.[1] ?? 0);
      // A file that crashed before uvu's summary counts as one failure.
      const failed = code === 0 ? Math.max(0, total - passed - skipped) : Math.max(1, total - passed - skipped);
      resolve({ file, passed, failed, skipped, code, output });
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
      const status = o.code === 0 ? 'ok  ' : 'FAIL';
      console.log(`${status} ${o.file}: ${o.passed} passed, ${o.failed} failed${o.skipped ? `, ${o.skipped} skipped` : ''}`);
      if (o.code !== 0 || process.env.TEST_VERBOSE)
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
process.exitCode = failed > 0 || outcomes.some((o) => o.code !== 0) ? 1 : 0;
