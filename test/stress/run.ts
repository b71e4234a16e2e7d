// `npm run stress`: the long reliability suites, one process each, one after another (they are
// load tests: running them side by side would measure each other). Prints every scenario's
// output as it goes, then a summary table, and ends with one line "N passed, N failed".
//
//   npm run stress                         every scenario, full length (about 25 minutes)
//   npm run stress -- soak crash-pglite    only these (names as listed by --list)
//   npm run stress -- --quick              shorter: 60 s soak, 5 kills, 2 concurrency rounds, 120 replica steps a seed
//   STRESS_SOAK_SECONDS, STRESS_CRASHES, STRESS_ROUNDS, ... override any length (see each file)
//   DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join } from 'node:path';
import type { ScenarioResult } from './support/scenario.ts';

interface Scenario {
  name: string;
  file: string;
  args: string[];
  what: string;
}

const SCENARIOS: Scenario[] = [
  { name: 'audit-selftest', file: 'audit-selftest.ts', args: [], what: 'the audit reports every kind of damage it looks for' },
  { name: 'crash-postgres', file: 'crash.ts', args: ['postgres'], what: 'A. kill -9 under mixed load, PostgreSQL' },
  { name: 'crash-pglite', file: 'crash.ts', args: ['pglite'], what: 'A. kill -9 under mixed load, embedded PGlite with a data directory' },
  { name: 'client-disconnect', file: 'disconnect.ts', args: [], what: 'clients that leave before the reply is complete' },
  { name: 'concurrency', file: 'concurrency.ts', args: [], what: 'C. 500 simultaneous calls, 2 gateways + projector, quota for 100' },
  { name: 'soak', file: 'soak.ts', args: [], what: 'B. steady mixed load, memory and latency flat, ledger consistent' },
  {
    name: 'replica-random',
    file: '../replica-random.test.ts',
    args: ['--stress'],
    what: 'seeded random commands over 3 gateways + projector agree with a model (8 seeds x 300 steps, and a stall)',
  },
];

const args = process.argv.slice(2);
if (args.includes('--list')) {
  for (const s of SCENARIOS) console.log(`${s.name.padEnd(18)} ${s.what}`);
  process.exit(0);
}
const quick = args.includes('--quick');
const names = args.filter((a) => !a.startsWith('--'));
const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
if (unknown.length) {
  console.error(`unknown scenario(s): ${unknown.join(', ')}; try --list`);
  process.exit(2);
}
const chosen = SCENARIOS.filter((s) => names.length === 0 || names.includes(s.name));
const env: Record<string, string> = { ...(process.env as Record<string, string>), FORCE_COLOR: '0' };
env.DATABASE_URL ||= 'postgres://postgres@127.0.0.1:5432/test';
if (quick) {
  env.STRESS_SOAK_SECONDS ||= '60';
  env.STRESS_CRASHES ||= '5';
  env.STRESS_ROUNDS ||= '2';
  env.STRESS_IDEMPOTENT_RETRIES ||= '4';
  env.REPLICA_STEPS ||= '120';
}

const dir = new URL('.', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'tollgate-stress-results-'));
console.log(
  `stress: ${chosen.map((s) => s.name).join(', ')}${quick ? ' (quick)' : ''}; ${cpus().length} CPUs, load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}; ${new Date().toISOString()}\n`,
);

let current: ReturnType<typeof spawn> | null = null;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    current?.kill(signal);
    console.log(`\nstress: interrupted by ${signal}`);
    setTimeout(() => process.exit(130), 2000);
  });
}

function run(s: Scenario): Promise<ScenarioResult> {
  const resultFile = join(scratch, `${s.name}.json`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(dir, s.file), ...s.args], {
      env: { ...env, STRESS_RESULT_FILE: resultFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    current = child;
    let output = '';
    const relay = (d: Buffer) => {
      output += d;
      process.stdout.write(String(d).replace(/^(?=.)/gm, `  ${s.name} | `));
    };
    child.stdout.on('data', relay);
    child.stderr.on('data', relay);
    child.on('close', (code) => {
      const seconds = Math.round((Date.now() - started) / 1000);
      if (existsSync(resultFile)) {
        const r = JSON.parse(readFileSync(resultFile, 'utf8')) as ScenarioResult;
        resolve({ ...r, passed: r.passed && code === 0 });
        return;
      }
      // A uvu file (the self-test) or a scenario that died before it could report.
      const passed = Number(/Passed:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const total = Number(/Total:\s+(\d+)/.exec(output)?.[1] ?? 0);
      resolve({
        name: s.name,
        passed: code === 0 && total > 0 && passed === total,
        seconds,
        figures: total ? { tests: `${passed} / ${total} passed` } : {},
        violations: code === 0 ? [] : [`exited with ${code}: ${output.slice(-1500)}`],
        notes: [],
      });
    });
  });
}

const results: ScenarioResult[] = [];
for (const s of chosen) {
  console.log(`=== ${s.name}: ${s.what}`);
  results.push(await run(s));
  console.log('');
}
rmSync(scratch, { recursive: true, force: true });

console.log('Summary');
console.log(`${'scenario'.padEnd(18)} ${'result'.padEnd(6)} ${'time'.padStart(6)}  figures`);
for (const r of results) {
  const figures = Object.entries(r.figures);
  console.log(
    `${r.name.padEnd(18)} ${(r.passed ? 'ok' : 'FAIL').padEnd(6)} ${`${r.seconds}s`.padStart(6)}  ${figures.length ? `${figures[0][0]}: ${figures[0][1]}` : ''}`,
  );
  for (const [k, v] of figures.slice(1)) console.log(`${''.padEnd(33)}${k}: ${v}`);
  for (const v of r.violations.slice(0, 5)) console.log(`${''.padEnd(33)}VIOLATION ${v.split('\n')[0].slice(0, 300)}`);
  if (r.violations.length > 5) console.log(`${''.padEnd(33)}… ${r.violations.length - 5} more violations`);
  for (const n of r.notes) console.log(`${''.padEnd(33)}note: ${n}`);
}
const passed = results.filter((r) => r.passed).length;
console.log(`\n${passed} passed, ${results.length - passed} failed`);
process.exitCode = passed === results.length ? 0 : 1;
