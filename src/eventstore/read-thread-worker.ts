// The worker thread of read-thread.ts: a pool of its own, the tasks of the module it is given,
// each request answered with its result or its error.
import { parentPort, workerData } from 'node:worker_threads';
import { openPostgres } from './db.ts';
import { movedBuffers, runTask, type ReadTasks, type ReadThreadJob, type ReadThreadReply, type ReadThreadRequest } from './read-thread.ts';

const job = workerData as ReadThreadJob;
const db = openPostgres(job.url, job.poolSize, job.timeouts);
const { readTasks } = (await import(job.tasks)) as { readTasks: ReadTasks };
const reply = (m: ReadThreadReply) => parentPort!.postMessage(m, m.ok ? movedBuffers(m.value) : []);
// Ready: the tasks are loaded and a connection is open (a database out of reach is met by the first read instead).
await db.query('SELECT 1').catch(() => undefined);
reply({ id: 0, ok: true, value: 'ready' });

parentPort!.on('message', async ({ id, task, args }: ReadThreadRequest) => {
  try {
    reply({ id, ok: true, value: await runTask(readTasks, db, task, args) });
  } catch (err) {
    const e = err as { name?: unknown; message?: unknown; code?: unknown };
    reply({
      id,
      ok: false,
      error: { name: String(e?.name ?? 'Error'), message: String(e?.message ?? err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) },
    });
  }
});
