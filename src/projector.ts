// `tollgate projector`: the projections (and the hold sweeper) as their own process, beside the
// gateway (server.ts). Only one is active: it holds a lease (a PostgreSQL session advisory lock);
// a second one waits for it and takes over when the first one's session ends (it died or stopped).
// A lease lost with its connection (a cut, a failover) stops projecting here until the lease is
// taken again: the process stays up and waits for the database, like a standby projector.
import type { Logger } from 'pino';
import { openPostgres } from './eventstore/db.ts';
import { acquireLease, type Lease } from './eventstore/lease.ts';
import { openLedger } from './ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import { openSelectedEventStore } from './eventstore/kurrentdb-select.ts';
import { validateEvent } from './ledger/event-catalogue.ts';
import { startSweeper } from './calls/sweeper.ts';
import { createDocumentIssuer } from './books/document-issuer.ts';
import { startDayRenderer } from './books/day-renderer.ts';
import { FINANCE_TASKS_MODULE } from './books/finance-answers.ts';
import { readsOnThread } from './eventstore/read-thread.ts';
import { ensureLeaseTable } from './eventstore/process-lease.ts';
import { outageReporter } from './eventstore/outage.ts';
import type { Settings } from './config.ts';
import '../projections/read-models.ts'; // hands the runner every read model

export async function runProjector(settings: Settings, log: Logger): Promise<{ stop(): Promise<void> }> {
  const url = settings.databaseUrl;
  if (!url) throw new Error('the projector process needs DATABASE_URL (embedded PGlite runs projections inside `tollgate serve`)');
  let stopping = false;
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((r) => (stop = r));
  const outage = outageReporter(log, 'projector', { baseMs: 500, maxMs: 5000 });

  /** One term as the active projector: takes the lease, projects until it is lost or the process stops. */
  async function term(onRunning: () => void): Promise<void> {
    let lost: () => void = () => undefined;
    const gone = new Promise<void>((r) => (lost = r));
    log.info({ schema: settings.schema }, 'projector waiting for the lease');
    const lease: Lease = await acquireLease(url!, `${settings.schema}:projector`, (err) => {
      if (stopping) return;
      log.error({ err: err.message }, 'projector lease connection lost; projecting stops until the lease is taken again');
      lost();
    });
    const store = await openSelectedEventStore(settings, validateEvent).catch(async (err) => {
      await lease.release().catch(() => undefined);
      throw err;
    });
    const db = openPostgres(url!, settings.pgPoolSize, settings.pgTimeouts);
    try {
      const ledger = await openLedger({ db, store, schema: settings.schema, readSide: readSide({ db, eventSchema: settings.schema, projectHere: true, log }) });
      try {
        await ensureLeaseTable(db, settings.schema);
        // Invoices and credit notes the gateways have not issued yet (a crash between payment and invoice) are issued here too.
        const documents = createDocumentIssuer(ledger, settings.payments.documents);
        const sweeper = startSweeper(ledger, {
          intervalMs: settings.sweepIntervalMs,
          leases: { db, schema: settings.schema },
          log,
          extra: () => documents.run(),
        });
        const financeReads = readsOnThread({ url: url!, timeouts: settings.pgTimeouts, poolSize: 1, tasks: FINANCE_TASKS_MODULE });
        const dayRenderer = startDayRenderer({ reads: financeReads, schema: ledger.rmSchema, log });
        log.info('projector lease acquired; projecting');
        outage.ok();
        onRunning();
        await Promise.race([gone, stopped]);
        sweeper.stop();
        await dayRenderer.stop();
        await financeReads.close();
      } finally {
        await ledger.close().catch(() => undefined);
      }
    } finally {
      await db.close().catch(() => undefined);
      await lease.release().catch(() => undefined);
    }
  }

  // The first term starts as before (a failure fails the start); later ones are retried for ever.
  await new Promise<void>((resolve, reject) => {
    let started = false;
    void (async () => {
      while (!stopping) {
        try {
          await term(() => {
            started = true;
            resolve();
          });
        } catch (err) {
          if (!started) return reject(err);
          if (!stopping) await Promise.race([new Promise((r) => setTimeout(r, outage.failed(err)).unref()), stopped]);
        }
      }
    })();
  });
  return {
    async stop() {
      stopping = true;
      stop();
    },
  };
}
