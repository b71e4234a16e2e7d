// Work that follows a read model's pending rows (invoices to issue, top-ups to charge) is asked for
// from several places at once: after an append here, and at every sweep. One pass runs at a time;
// a call during a pass makes one more pass after it, so work appended meanwhile is not left for
// the next sweep.

/** `pass` made to run one at a time; each call resolves with what the passes it waited for counted. */
export function serialRuns(pass: () => Promise<number>): () => Promise<number> {
  let running: Promise<number> | null = null;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let total = 0;
      do {
        again = false;
        total += await pass();
      } while (again);
      return total;
    })().finally(() => (running = null));
    return running;
  };
}
