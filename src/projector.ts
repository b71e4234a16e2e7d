// `tollgate projector`: the projections (and the hold sweeper) as their own process, beside the
// gateway (server.ts). Only one is active: it holds a lease (a PostgreSQL session advisory lock);
// a second one waits for it and takes over when the first one's session ends (it died or stopped).
import type { Logger } from 'pino';
import { openPostgres } from './eventstore/db.ts';
import { acquireLease } from './eventstore/lease.ts';
import { openLedger } from './ledger/ledger.ts';
import { readSide } from '../projections/read-side.ts';
import { openSelectedEventStore } from './eventstore/kurrentdb-select.ts';
import { validateEvent } from './ledger/catalogue.ts';
import { startSweeper } from './gateway/sweeper.ts';
import { ensureLeaseTable } from './eventstore/process-lease.ts';
import type { Settings } from './config.ts';

export async function runProjector(settings: Settings, log: Logger): Promise<{ stop(): Promise<void> }> {
  if (!settings.databaseUrl) throw new Error('the projector process needs DATABASE_URL (embedded PGlite runs projections inside `tollgate serve`)');
  let stopping = false;
  log.info({ schema: settings.schema }, 'projector waiting for the lease');
  const lease = await acquireLease(settings.databaseUrl, `${settings.schema}:projector`, (err) => {
    if (!stopping) {
      log.error({ err: err.message }, 'projector lease connection lost');
      process.exit(1);
    }
  });
  log.info('projector lease acquired; projecting');
  const store = await openSelectedEventStore(settings, validateEvent);
  const db = openPostgres(settings.databaseUrl, settings.pgPoolSize);
  const ledger = await openLedger({ db, store, schema: settings.schema, readSide: readSide({ db, eventSchema: settings.schema, projectHere: true }) });
  await ensureLeaseTable(db, settings.schema);
  const sweeper = startSweeper(ledger, { intervalMs: settings.sweepIntervalMs, leases: { db, schema: settings.schema } }, (e) =>
    log.warn({ err: e.message }, 'hold sweep failed'),
  );
  return {
    async stop() {
      stopping = true;
      sweeper.stop();
      await ledger.close();
      await db.close();
      await lease.release();
    },
  };
}
