// Where a model call's wall time goes, step by step (issue 42's breakdown). Off unless the
// operator asks (TOLLGATE_CALL_PHASES=on): then each request carries a timeline whose marks
// split its time into consecutive phases that add up to the whole, and the ledger's own steps
// (deciding a batch, lingering, the append's round trip) add theirs beside them. The totals are
// on /metrics (tollgate_call_phase_seconds_total); `bench/c1-breakdown.ts` turns them into
// a table. Off, a timeline is a shared no-op and the ledger's clock reads nothing.
import { performance } from 'node:perf_hooks';

/** The phases of a non-streamed chat call's timeline, in the order it passes them (app.ts, chat-routes.ts, chat-call.ts). */
export const CHAT_CALL_PHASES = [
  'middleware',
  'auth',
  'invalid_limit',
  'body',
  'idempotency',
  'validate',
  'model',
  'count',
  'hold_decide',
  'upstream',
  'charge',
  'reply',
  'unwind',
  'respond',
] as const;

/** Steps timed within those phases: the ledger's (per batch), the store's, the log line and the metrics. */
export const STEPS_WITHIN_PHASES = [
  'ledger_decide',
  'ledger_linger',
  'ledger_append',
  'store_append',
  'store_sql',
  'ledger_answer_held',
  'access_log',
  'request_metrics',
] as const;

export type ChatCallPhase = (typeof CHAT_CALL_PHASES)[number];
export type StepWithinPhases = (typeof STEPS_WITHIN_PHASES)[number];

/** One phase's time so far, over every request (and every ledger batch) since the start. */
export interface PhaseTotal {
  phase: string;
  seconds: number;
  /** How many times it was recorded (a phase may recur within a call). */
  count: number;
}

/** One request's marks: each mark ends the phase it names, which began at the previous mark. */
export interface CallTimeline {
  mark(phase: ChatCallPhase): void;
}

export const NO_TIMELINE: CallTimeline = { mark: () => undefined };

let recording = false;
const totals = new Map<ChatCallPhase | StepWithinPhases, { ms: number; count: number }>();

/** Turns the recording on or off for the process (from the settings, at start-up). */
export function recordCallPhases(on: boolean): void {
  recording = on;
}

export const recordingPhases = (): boolean => recording;

/** Adds `ms` to a phase's total; nothing while off. */
export function addPhase(phase: ChatCallPhase | StepWithinPhases, ms: number): void {
  if (!recording) return;
  const t = totals.get(phase);
  if (t) {
    t.ms += ms;
    t.count++;
  } else totals.set(phase, { ms, count: 1 });
}

/** Now, for a phase timed around a step (0 while off: addPhase ignores it then). */
export const phaseClock = (): number => (recording ? performance.now() : 0);

/** The time since `startedAt` (a phaseClock reading) is `phase`'s. */
export function phaseSince(phase: StepWithinPhases, startedAt: number): void {
  if (recording) addPhase(phase, performance.now() - startedAt);
}

/** A new request's timeline, started now (the no-op one while off). */
export function startTimeline(): CallTimeline {
  if (!recording) return NO_TIMELINE;
  let last = performance.now();
  return {
    mark(phase) {
      const now = performance.now();
      addPhase(phase, now - last);
      last = now;
    },
  };
}

export function phaseTotals(): PhaseTotal[] {
  return [...totals].map(([phase, t]) => ({ phase, seconds: t.ms / 1000, count: t.count }));
}
