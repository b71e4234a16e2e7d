// Operator work (a correction's pages, verify's pages, a statement's lines) runs in the process
// that serves live calls. Between two steps it gives the event loop back and, while live work is
// being held up, steps back: it never runs ahead of the read side (whose projection of its appends
// runs in this process too), and it sleeps while the loop has been late.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { nextTurn } from '../next-turn.ts';

/** How late the loop may run (a live call waiting that long for its turn) before the work backs off. */
const LATE_MS = 20;
/** The longest back-off between two steps. */
const MAX_BACKOFF_MS = 200;
/** The loop delay's sampling interval (ms): the histogram's values include it. */
const RESOLUTION_MS = 10;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Gives the event loop to live traffic between two steps of operator work. */
export const yieldToTraffic = nextTurn;

export class Pacer {
  private readonly delay: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  /** Milliseconds slept so far (backing off). */
  sleptMs = 0;

  /** `readSide`: waits until the read side has projected what this work appended (paces the appends). */
  constructor(private readonly readSide?: () => Promise<void>) {
    this.delay.enable();
  }

  /**
   * Between two steps: yields, lets the read side catch up, and backs off as long as the loop was
   * late since the last step (the monitor records a late turn on its next tick: a step's own
   * blocking is seen by the step after it).
   */
  async step(): Promise<void> {
    await yieldToTraffic();
    if (this.readSide) await this.readSide();
    const lateMs = this.delay.max / 1e6 - RESOLUTION_MS;
    this.delay.reset();
    if (lateMs > LATE_MS) {
      const ms = Math.min(MAX_BACKOFF_MS, lateMs);
      this.sleptMs += ms;
      await sleep(ms);
    }
  }

  stop(): void {
    this.delay.disable();
  }
}
