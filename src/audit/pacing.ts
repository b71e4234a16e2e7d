// Operator work (a correction's pages, verify's pages, a statement's lines, an export of the log)
// runs in the process that serves live calls. Between two steps it gives the event loop back and,
// while live work is being held up, steps back: it never runs ahead of the read side (whose
// projection of its appends runs in this process too), it sleeps while the loop has been late,
// and it keeps to its share of the time: after a step that took t, it rests t × (1 − share) / share.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { nextTurn, restFor } from '../next-turn.ts';

/** How late the loop may run (a live call waiting that long for its turn) before the work backs off. */
const LATE_MS = 20;
/** The longest back-off between two steps. */
const MAX_BACKOFF_MS = 200;
/** The loop delay's sampling interval (ms): the histogram's values include it. */
const RESOLUTION_MS = 10;
/** Rests shorter than this are saved up (a timer cannot sleep less than about a millisecond). */
const MIN_REST_MS = 2;

let operatorShare = 1;

/**
 * The share of wall time operator work may take (0 < share ≤ 1; 1: as fast as it can, live calls
 * still served between its steps). The process sets it once from TOLLGATE_OPERATOR_SHARE.
 */
export function setOperatorShare(share: number): void {
  if (!(share > 0 && share <= 1)) throw new RangeError(`the operator share must be above 0 and at most 1, not ${share}`);
  operatorShare = share;
}
export const currentOperatorShare = (): number => operatorShare;

/** What operator work has done in this process: its steps' wall time, and the rests it took between them. */
const totals = { workingMs: 0, restingMs: 0 };
export const operatorWorkTotals = (): { workingMs: number; restingMs: number } => ({ ...totals });

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Gives the event loop to live traffic between two steps of operator work. */
export const yieldToTraffic = nextTurn;

export class Pacer {
  private readonly delay: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  /** Milliseconds slept so far (backing off, and resting to keep to the share). */
  sleptMs = 0;
  /** When the current step began: the end of the last rest. */
  private stepStart = performance.now();
  /** Rest owed but not yet taken (too short to sleep alone). */
  private owedMs = 0;

  /** `readSide`: waits until the read side has projected what this work appended (paces the appends). */
  constructor(
    private readonly readSide?: () => Promise<void>,
    private readonly share: number = operatorShare,
  ) {
    this.delay.enable();
  }

  /**
   * Between two steps: yields, lets the read side catch up, rests to keep to the share, and backs
   * off as long as the loop was late since the last step (the monitor records a late turn on its
   * next tick: a step's own blocking is seen by the step after it).
   * `atHead`: the step's page was short, so the log's head is reached and the next read is the last.
   * No rest then (the rest owed waits for a next full page): while it rested, live calls would
   * append more, the read would find it, and the work would chase them as long as they came.
   */
  async step(opts: { atHead?: boolean } = {}): Promise<void> {
    await yieldToTraffic();
    if (this.readSide) await this.readSide();
    // The step's wall time counts whole: its turns of the loop and its waits on the database alike.
    const workedMs = performance.now() - this.stepStart;
    totals.workingMs += workedMs;
    this.owedMs += restFor(workedMs, this.share);
    const lateMs = this.delay.max / 1e6 - RESOLUTION_MS;
    this.delay.reset();
    const backOffMs = lateMs > LATE_MS ? Math.min(MAX_BACKOFF_MS, lateMs) : 0;
    const restMs = opts.atHead ? 0 : Math.max(backOffMs, this.owedMs);
    if (restMs >= MIN_REST_MS) {
      this.owedMs = Math.max(0, this.owedMs - restMs);
      this.sleptMs += restMs;
      totals.restingMs += restMs;
      await sleep(restMs);
    }
    this.stepStart = performance.now();
  }

  stop(): void {
    this.delay.disable();
  }
}
