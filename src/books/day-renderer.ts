// Keeps each closed UTC day's finance parts current (src/books/day-renders.ts), where the
// projections run: at start it renders the days that have none (a year of them at 10M events is
// a few seconds of one thread), then it checks every `everyMs` for a day closed at midnight or
// changed by a late event. The rendering runs as a finance read task, so on a PostgreSQL server
// it is the read thread's work, never the serving thread's; batches are spaced so that it takes
// a bounded share of that thread and of the database.
import type { ReadRunner } from '../eventstore/read-thread.ts';
import { outageReporter, type OutageLog } from '../eventstore/outage.ts';

export interface DayRendererOptions {
  reads: ReadRunner;
  /** The read models' schema. */
  schema: string;
  log: OutageLog;
  everyMs?: number;
  /** Days rendered per task. */
  batchDays?: number;
  /** The pause between two batches while days are left. */
  pauseMs?: number;
  now?: () => Date;
}

export interface DayRenderer {
  /** Renders every stale day now (the next tick's work, done at once); resolves when none is left. */
  catchUp(): Promise<void>;
  stop(): Promise<void>;
}

export function startDayRenderer(opts: DayRendererOptions): DayRenderer {
  const everyMs = opts.everyMs ?? 10_000;
  const batchDays = opts.batchDays ?? 8;
  const pauseMs = opts.pauseMs ?? 50;
  const now = opts.now ?? (() => new Date());
  const outage = outageReporter(opts.log, 'finance day rendering');
  let stopped = false;
  let running: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;

  const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
  async function renderAll(): Promise<void> {
    for (;;) {
      const before = now().toISOString().slice(0, 10);
      const rendered = await opts.reads.run<number>('renderStaleDays', { schema: opts.schema, before, limit: batchDays });
      if (rendered < batchDays || stopped) return;
      await pause(pauseMs);
    }
  }
  /** One pass at a time; the next tick waits for it. */
  function pass(): Promise<void> {
    running ??= renderAll()
      .then(() => outage.ok())
      .finally(() => (running = null));
    return running;
  }
  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      pass().then(
        () => schedule(everyMs),
        (err: unknown) => schedule(Math.max(everyMs, outage.failed(err))),
      );
    }, ms);
    timer.unref();
  }
  schedule(0);
  return {
    async catchUp() {
      await running?.catch(() => undefined);
      await pass();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}
