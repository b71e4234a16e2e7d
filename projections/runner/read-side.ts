// The read side as the ledger sees it: the read models exist, and a read can wait until they
// include a position. The projections run here (a runner fed by the event log) or in another
// process (`tollgate projector`), whose checkpoint is then polled.
import type { Database } from '../../src/eventstore/db.ts';
import type { EventStore } from '../../src/eventstore/port.ts';
import { ensureReadModels, startProjectionRunner } from './runner.ts';
import * as checkpoint from './checkpoint.ts';
import type { OutageLog } from '../../src/eventstore/outage.ts';

/** Read models live beside the events, in a schema of their own. */
export const readModelSchemaFor = (eventSchema: string): string => `${eventSchema}_rm`;

export interface ReadSide {
  /** The schema the read models live in. */
  readonly schema: string;
  /** Whether this process runs the projections. */
  readonly projectsHere: boolean;
  /** Resolves true once the read models include `position`; false after `timeoutMs`. */
  waitForPosition(position: number, timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

/** Makes the read side for a ledger's event log (the ledger calls it once it has its store). */
export type ReadSideFactory = (store: EventStore) => Promise<ReadSide>;

export function readSide(opts: { db: Database; eventSchema: string; projectHere: boolean; log?: OutageLog }): ReadSideFactory {
  const schema = readModelSchemaFor(opts.eventSchema);
  return async (store) => {
    await ensureReadModels(opts.db, schema);
    if (opts.projectHere) {
      const runner = await startProjectionRunner({ db: opts.db, store, schema, log: opts.log });
      return { schema, projectsHere: true, waitForPosition: (position, timeoutMs) => runner.waitFor(position, timeoutMs), stop: () => runner.stop() };
    }
    return {
      schema,
      projectsHere: false,
      async waitForPosition(position, timeoutMs) {
        for (const until = Date.now() + timeoutMs; ;) {
          if ((await checkpoint.read(opts.db, schema)) >= position) return true;
          if (Date.now() >= until) return false;
          await new Promise((r) => setTimeout(r, 5));
        }
      },
      stop: async () => undefined,
    };
  };
}
