// Reads on a thread of their own (src/eventstore/read-thread.ts), on PostgreSQL: a task runs off
// the calling thread on its own pool, its answer comes back, its error keeps the code that tells
// a database out of reach (answered 503) from a fault, and a thread that died is started again.
// On the embedded database the same tasks run on the calling thread.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { threadId } from 'node:worker_threads';
import { isDatabaseUnavailable, openPostgres } from '../src/eventstore/db.ts';
import { movedBuffers, readsHere, readsOnThread } from '../src/eventstore/read-thread.ts';
import { openTestPglite } from './support/db.ts';
import { readTasks } from './support/read-tasks-fixture.ts';

const TASKS = new URL('./support/read-tasks-fixture.ts', import.meta.url).href;
const url = process.env.DATABASE_URL;

test('on the embedded database a task runs on the calling thread', async () => {
  const t = await openTestPglite();
  try {
    const here = readsHere(t.db, readTasks);
    const r = await here.run<{ threadId: number; rows: Array<{ n: number }> }>('where', { n: 41 });
    assert.equal([r.threadId, r.rows[0].n], [threadId, 42]);
    assert.match(String(await here.run('nothing', {}).catch((e: Error) => e.message)), /no read task 'nothing'/);
  } finally {
    await t.cleanup();
  }
});

test("a result's own byte arrays are moved, never a slice of a shared buffer", () => {
  const own = new TextEncoder().encode('a report');
  const pooled = Buffer.from('small'); // a slice of Node's shared pool: moving it would detach the pool
  const view = new Uint8Array(new ArrayBuffer(16), 4, 8);
  assert.equal(movedBuffers({ type: 'text/plain', body: own, pooled, view, nested: { own } }), [own.buffer]);
  assert.equal([movedBuffers('text'), movedBuffers(null), movedBuffers([own])], [[], [], [own.buffer]]);
});

if (!url) test.skip('on a PostgreSQL server (DATABASE_URL not set)');
else
  test('on a PostgreSQL server a task runs on a worker thread; errors keep their code; a dead thread is started again', async () => {
    const reads = readsOnThread({
      url,
      poolSize: 2,
      timeouts: { connectMs: 3000, statementMs: 300, idleInTransactionMs: 10_000, keepAliveMs: 10_000 },
      tasks: TASKS,
    });
    try {
      // Warmed: started and ready before the first read.
      await reads.warm();
      const [a, b] = await Promise.all([
        reads.run<{ threadId: number; rows: Array<{ n: number }> }>('where', { n: 1 }),
        reads.run<{ threadId: number; rows: Array<{ n: number }> }>('where', { n: 2 }),
      ]);
      assert.ok(a.threadId !== threadId && a.threadId === b.threadId, `${a.threadId} ${b.threadId} ${threadId}`);
      assert.equal([a.rows[0].n, b.rows[0].n], [2, 3]);
      // Bytes arrive whole (moved, not copied), the rest of the result beside them.
      const text = 'Ünïcödé report '.repeat(10_000);
      const sent = await reads.run<{ type: string; body: Uint8Array }>('bytes', { text });
      assert.ok(sent.body instanceof Uint8Array && sent.type === 'text/plain');
      assert.is(new TextDecoder().decode(sent.body), text);
      // Every session has JIT off (a short statement on a large log compiled for longer than it ran), with its own timeout.
      assert.equal(await reads.run('settings', {}), { jit: 'off', timeout: '300ms' });
      const missing = (await reads.run('missingTable', {}).catch((e) => e)) as Error & { code?: string };
      assert.equal([missing.code, isDatabaseUnavailable(missing)], ['42P01', false]);
      const slow = (await reads.run('tooLong', {}).catch((e) => e)) as Error & { code?: string };
      assert.equal([slow.code, isDatabaseUnavailable(slow)], ['57014', true]);
      assert.match(String(await reads.run('crash', {}).catch((e: Error) => e.message)), /read thread stopped/);
      const again = await reads.run<{ threadId: number }>('where', { n: 5 });
      assert.ok(again.threadId !== a.threadId && again.threadId !== threadId, 'a new thread');
    } finally {
      await reads.close();
    }
  });

if (url)
  test("a pool's sessions have JIT off, and keep the options the URL sets", async () => {
    const withOptions = new URL(url);
    withOptions.searchParams.set('options', '-c work_mem=5MB');
    const db = openPostgres(withOptions.href, 1);
    try {
      assert.equal(await db.query(`SELECT current_setting('jit') AS jit, current_setting('work_mem') AS work_mem`), [{ jit: 'off', work_mem: '5MB' }]);
    } finally {
      await db.close();
    }
  });

test.run();
