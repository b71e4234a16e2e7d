// Which event store a process opens (EVENT_STORE). PostgreSQL is the default and is created by
// openLedger itself; this opens KurrentDB when asked, after checking the settings it needs. The
// KurrentDB client is loaded only then: imported, it holds about 33 MB of resident memory (its
// gRPC stack and native bridge) in every gateway that never uses it.
import type { EventStore, NewEvent } from './port.ts';
import type { KurrentClient } from './kurrentdb-client.ts';

/** The configured event store, or undefined for the default (PostgreSQL, opened by openLedger). */
export async function openSelectedEventStore(
  /** The settings' EVENT_STORE, KURRENTDB_URL and DATABASE_URL (src/config.ts). */
  settings: { eventStore: string; kurrentDbUrl?: string; databaseUrl?: string },
  /** The event catalogue's check (the ledger's): the store knows no event types of its own. */
  validate: (event: NewEvent) => void,
  connect?: (url: string) => KurrentClient,
): Promise<EventStore | undefined> {
  if (settings.eventStore !== 'kurrentdb') return undefined;
  if (!settings.kurrentDbUrl) throw new Error('EVENT_STORE=kurrentdb needs KURRENTDB_URL (for example kurrentdb://127.0.0.1:2113?tls=false)');
  // Read models, rate limits and idempotency records stay in PostgreSQL, shared by every process.
  if (!settings.databaseUrl) throw new Error('EVENT_STORE=kurrentdb needs DATABASE_URL: read models, rate limits and idempotency records stay in PostgreSQL');
  const { connectKurrentDb, redactConnectionString } = await import('./kurrentdb-client.ts');
  const { createKurrentDbEventStore } = await import('./kurrentdb.ts');
  const store = createKurrentDbEventStore((connect ?? connectKurrentDb)(settings.kurrentDbUrl), { validate });
  try {
    // The client connects lazily; ask for the head now so a wrong URL fails the start, not a call.
    await store.headPosition();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw new Error(`cannot read $all from KurrentDB at ${redactConnectionString(settings.kurrentDbUrl)}: ${(err as Error).message}`, { cause: err });
  }
  return store;
}
