// A lease only one process holds at a time: a PostgreSQL session advisory lock on a connection of
// its own. It ends with that session, so a process that dies or stops hands it on to the next
// one waiting.
import pg from 'pg';
import { sessionBounds } from './db.ts';

export interface Lease {
  /** Ends the session, and with it the lease. */
  release(): Promise<void>;
}

/**
 * Waits until the lease named `name` is free and takes it. `onLost` is told if the connection
 * fails before release(), while waiting or holding it: the lease may be gone then.
 */
export async function acquireLease(url: string, name: string, onLost: (err: Error) => void): Promise<Lease> {
  const client = new pg.Client({ connectionString: url, ...sessionBounds });
  await client.connect();
  let released = false;
  client.on('error', (err) => {
    if (!released) onLost(err);
  });
  await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
  return {
    async release() {
      released = true;
      await client.end();
    },
  };
}
