// Read tasks for test/read-thread.test.ts: where they run, a query's rows, and the errors a read can meet.
import { threadId } from 'node:worker_threads';
import type { Queryable } from '../../src/eventstore/db.ts';

export const readTasks = {
  where: async (db: Queryable, args: { n: number }) => ({ threadId, rows: await db.query<{ n: number }>('SELECT $1::int + 1 AS n', [args.n]) }),
  missingTable: async (db: Queryable) => db.query('SELECT * FROM no_such_table_here'),
  // A statement the server cancels at its statement timeout (57014): the database out of reach for now.
  tooLong: async (db: Queryable) => db.query('SELECT pg_sleep(5)'),
  crash: async () => {
    process.exit(3);
  },
};
