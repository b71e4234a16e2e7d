// `tollgate projector`: the projections (and the hold sweeper) as their own process. Only one is
// active: it holds a PostgreSQL session advisory lock; a second one waits on the lock and takes
// over when the first one's session ends (it died or stopped).
import pg from 'pg';
import type { Logger } from 'pino';
import { openPostgres } from '../eventstore/db.ts';
import { openLedger } from '../ledger/ledger.ts';
import { openSelectedEventStore } from '../eventstore/kurrentdb-select.ts';
import { startSweeper } from './sweeper.ts';
import type { Settings } from '../config.ts';

export async function runProjector(settings: Settings, log: Logger): Promise<{ stop(): Promise<void> }> {
  if (!settings.databaseUrl) throw new Error('the projector process needs DATABASE_URL (embedded PGlite runs projections inside `tollgate serve`)');
  const lease = new pg.Client({ connectionString: settings.databaseUrl });
  await lease.connect();
  let stopping = false;
  lease.on('error', (err) => { if (!stopping) { log.error({ err: err.message }, 'projector lease connection lost'); process.exit(1); } });
  log.info({ schema: settings.schema }, 'projector waiting for the lease');
  await lease.query('SELECT pg_advisory_lock(hashtext($1))', [`${settings.schema}:projector`]);
  log.info('projector lease acquired; projecting');
  const store = await openSelectedEventStore(settings);
  const db = openPostgres(settings.databaseUrl);
  const ledger = await openLedger({ db, store, schema: settings.schema, projections: true });
  const sweeper = startSweeper(ledger, settings.sweepIntervalMs, (e) => log.warn({ err: e.message }, 'hold sweep failed'));
  return {
    async stop() {
      stopping = true;
      sweeper.stop();
      await ledger.close();
      await db.close();
      await lease.end();
    },
  };
}
