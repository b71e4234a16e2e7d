// The whole log as NDJSON, one event a line from a position on: what an outside auditor replays.
import type { Ledger } from '../ledger/ledger.ts';
import { Pacer, yieldToTraffic } from './pacing.ts';
import type { Write } from './statements.ts';

/** Events read from the log at a time. */
const EXPORT_PAGE = 1_000;
/** Events written as one text, in one turn of the loop (~5 µs each). */
const WRITTEN_PER_TURN = 250;

/** Writes every event after `after`, a page at a time (bounded memory however long the log); the last text is returned. */
export async function writeEventLog(ledger: Ledger, after: number, write: Write): Promise<string> {
  const pacer = new Pacer();
  try {
    let position = after;
    for (;;) {
      const page = await ledger.events.readAll(position, EXPORT_PAGE);
      if (page.length === 0) return '';
      for (let i = 0; i < page.length; i += WRITTEN_PER_TURN) {
        if (i > 0) await yieldToTraffic();
        await write(
          page
            .slice(i, i + WRITTEN_PER_TURN)
            .map((e) => JSON.stringify(e))
            .join('\n') + '\n',
        );
      }
      position = page[page.length - 1].position;
      await pacer.step({ atHead: page.length < EXPORT_PAGE });
    }
  } finally {
    pacer.stop();
  }
}
