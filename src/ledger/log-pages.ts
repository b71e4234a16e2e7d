// The log read page by page, for the audits and reports that walk all of it.
import type { Ledger } from './ledger.ts';
import { LogNotReadableYet } from '../eventstore/errors.ts';

/** Times a page the log cannot answer yet (older commits still running) is asked for again before verify gives up. */
const PAGE_RETRIES = 5;

/** A page of the log; a long verification waits out a busy moment rather than fail after minutes of work. */
export async function readLogPage(ledger: Ledger, position: number, pageSize = 10_000) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ledger.events.readAll(position, pageSize);
    } catch (err) {
      if (!(err instanceof LogNotReadableYet) || attempt >= PAGE_RETRIES) throw err;
    }
  }
}
