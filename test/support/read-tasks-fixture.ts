// Read tasks for test/read-thread.test.ts: where they run, a query's rows, and the errors a read can meet.
import { threadId } from 'node:worker_threads';
import type { Queryable } from '../../src/eventstore/db.ts';

export const readTasks = {
  where: async (db: Queryable, args: { n: number }) => ({ threadId, rows: await db.query<{ n: number }>('SELECT $1::int + 1 AS n', [args.n]) }),
  // Bytes to send: moved to the caller (ReadTasks), with a string beside them that is copied.
  bytes: async (_db: Queryable, args: { text: string }) => ({ type: 'text/plain', body: new TextEncoder().encode(args.text) }),
  // The session's settings (openPostgres): JIT off, and the URL's own options kept.
  settings: async (db: Queryable) =>
    (await db.query<{ jit: string; timeout: string }>(`SELECT current_setting('jit') AS jit, current_setting('statement_timeout') AS timeout`))[0],
  missingTable: async (db: Queryable) => db.query('SELECT * FROM no_such_table_here'),
  // A statement the server cancels at its statement timeout (57014): the database out of reach for now.
  tooLong: async (db: Queryable) => db.query('SELECT pg_sleep(5)'),
  crash: async () => {
    process.exit(3);
  },
};
