// How far a reader of the log is behind its head: for the read models (their checkpoint) and for
// a gateway's in-memory views (the event feed's position).
import type { EventStore } from './port.ts';

export interface Lag {
  head: number;
  /** The position the reader has read up to. */
  checkpoint: number;
  events: number;
  /** Age of the oldest event not read yet (0 when none). */
  seconds: number;
}

const LAG_COUNT_LIMIT = 100_000;

/** The store's head, the events after `position` (counted up to a bound) and the age of the oldest. */
export async function lagAfter(store: Pick<EventStore, 'headPosition' | 'readAll' | 'countAfter'>, position: number): Promise<Lag> {
  const head = await store.headPosition();
  let seconds = 0;
  let events = 0;
  if (head > position) {
    const [next] = await store.readAll(position, 1);
    if (next) seconds = Math.max(0, (Date.now() - Date.parse(next.timestamp)) / 1000);
    // Positions do not count events (PostgreSQL's keep room per transaction, KurrentDB's are log
    // offsets): the events are counted, up to a bound.
    events = store.countAfter ? await store.countAfter(position, LAG_COUNT_LIMIT) : (await store.readAll(position, LAG_COUNT_LIMIT)).length;
  }
  return { head, checkpoint: position, events, seconds };
}
