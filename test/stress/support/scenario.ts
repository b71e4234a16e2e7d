// How a stress scenario reports: figures and violations printed as it goes, and one JSON result
// (written to STRESS_RESULT_FILE when the runner asks for it) that the summary table is made of.
import { writeFileSync } from 'node:fs';
import { killAllChildren } from './processes.ts';

export interface ScenarioResult {
  name: string;
  passed: boolean;
  seconds: number;
  /** The headline numbers, in print order. */
  figures: Record<string, string | number>;
  violations: string[];
  /** Findings that are not failures of this run (documented limits, defects outside test/stress). */
  notes: string[];
}

export interface ScenarioContext {
  figure(name: string, value: string | number): void;
  violation(message: string): void;
  note(message: string): void;
  log(message: string): void;
}

/** Runs one scenario; a thrown error is a failure with its message as the violation. */
export async function runScenario(name: string, body: (ctx: ScenarioContext) => Promise<void>): Promise<void> {
  const started = Date.now();
  const result: ScenarioResult = { name, passed: false, seconds: 0, figures: {}, violations: [], notes: [] };
  const ctx: ScenarioContext = {
    figure: (k, v) => {
      result.figures[k] = v;
    },
    violation: (m) => {
      if (result.violations.length < 100) result.violations.push(m);
      console.log(`  VIOLATION ${m}`);
    },
    note: (m) => {
      result.notes.push(m);
      console.log(`  note: ${m}`);
    },
    log: (m) => console.log(`[${name} +${((Date.now() - started) / 1000).toFixed(0)}s] ${m}`),
  };
  // Interrupted (Ctrl-C, or the runner stopped): no gateway or projector may outlive the run,
  // and the scratch storage goes too.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.log(`${name}: interrupted by ${signal}`);
      killAllChildren();
      const done = () => process.exit(130);
      setTimeout(done, 10_000).unref();
      void Promise.allSettled(interruptCleanups.map((f) => f())).then(done);
    });
  }
  try {
    await body(ctx);
  } catch (err) {
    ctx.violation(`aborted: ${(err as Error).stack ?? err}`.slice(0, 3000));
  }
  result.seconds = Math.round((Date.now() - started) / 1000);
  result.passed = result.violations.length === 0;
  console.log(`\n${name}: ${result.passed ? 'PASSED' : 'FAILED'} in ${result.seconds} s`);
  for (const [k, v] of Object.entries(result.figures)) console.log(`  ${k}: ${v}`);
  if (process.env.STRESS_RESULT_FILE) writeFileSync(process.env.STRESS_RESULT_FILE, JSON.stringify(result, null, 2));
  // Handles (sockets, timers) of killed children must not keep the scenario alive.
  process.exit(result.passed ? 0 : 1);
}

const interruptCleanups: Array<() => Promise<void> | void> = [];

/** Removes scratch storage if the run is interrupted (the scenario's own finally does it otherwise). */
export function atInterrupt(cleanup: () => Promise<void> | void): void {
  interruptCleanups.push(cleanup);
}

export function envNumber(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got '${v}'`);
  return n;
}

export const databaseUrl = (): string => process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
