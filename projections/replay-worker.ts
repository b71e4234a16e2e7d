// A worker thread of a parallel replay (parallel-replay.ts): folds its group of read models over
// the log up to the settled position, on connections of its own, and writes every row it staged.
import { parentPort, workerData } from 'node:worker_threads';
import { openPostgres, type Database } from '../src/eventstore/db.ts';
import { readSettledEvents, readSettledPage } from '../src/eventstore/settled-reads.ts';
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import type { PageObserver, ReplayJob, ReplayReport } from './runner/parallel-replay.ts';
import { ALL_PROJECTIONS } from './read-models.ts';
import { ReplayMemory } from './runner/replay-memory.ts';
import { applyPage, eachPage } from './runner/runner.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { restFor } from '../src/next-turn.ts';

const job = workerData as ReplayJob;
const projections = ALL_PROJECTIONS.filter((p) => job.projections.includes(p.name));
if (projections.length !== job.projections.length) throw new Error(`unknown read model in ${job.projections.join(', ')}`);
const report = (m: ReplayReport) => parentPort!.postMessage(m);

// One connection reads the next page while another applies this one.
const readModels = openPostgres(job.readModels.url, 2);
const log: Database = job.log.url === job.readModels.url ? readModels : openPostgres(job.log.url, 1);
try {
  const memory = new ReplayMemory({ copy: true, ...job.memory });
  const types = job.types ?? undefined;
  const observer: PageObserver | null = job.observer ? (await import(job.observer)).createPageObserver() : null;
  let events = 0;
  let pageStart = performance.now();
  await eachPage<ProjectedEvent>(
    // An observer sees every column (the stream and the hash chain); a fold alone reads fewer.
    observer
      ? async (after) => {
          const page = await readSettledEvents(log, job.log.schema, after, job.upTo, job.batchSize);
          observer.observe(page);
          return page;
        }
      : (after) => readSettledPage(log, job.log.schema, after, job.upTo, job.batchSize, types),
    async (page) => {
      await readModels.transaction(async (tx) => {
        // Nobody reads the target before the replay is finished and made durable (rebuild.ts).
        await tx.query(`SELECT set_config('synchronous_commit', 'off', true)`);
        await applyPage(tx, job.readModels.schema, page, projections, memory);
      });
      events += page.length;
      report({ kind: 'page', position: page[page.length - 1].position, events });
      // Held to a share of the time (a rebuild beside live calls): the database and the cores rest too.
      if (job.share !== undefined) await sleep(restFor(performance.now() - pageStart, job.share));
      pageStart = performance.now();
    },
  );
  await readModels.transaction((tx) => memory.flushAll(tx, job.readModels.schema));
  report({ kind: 'done', events, ...(observer ? { observed: observer.result() } : {}) });
} finally {
  if (log !== readModels) await log.close();
  await readModels.close();
}
