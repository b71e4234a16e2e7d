// One turn of the event loop for others: long work split into slices awaits this between them
// (setImmediate: after the pending I/O callbacks, so requests that arrived meanwhile run first).
export const nextTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/** How long one slice of long work may hold the event loop before others get a turn. */
export const TURN_SLICE_MS = 4;

/**
 * Long work in slices of about `sliceMs` of the event loop: after each unit of work,
 * `if (slicer.used()) await slicer.rest();` gives others a turn once the slice is used up (and a
 * new slice starts after it). Checking costs a clock read, no promise.
 */
export class TimeSlicer {
  private sliceStart = performance.now();
  constructor(private readonly sliceMs: number = TURN_SLICE_MS) {}

  used(): boolean {
    return performance.now() - this.sliceStart >= this.sliceMs;
  }

  async rest(): Promise<void> {
    await nextTurn();
    this.sliceStart = performance.now();
  }
}

/** The rest owed after `workedMs` of work held to `share` of the time (0 < share ≤ 1): the work then took `share` of it. */
export const restFor = (workedMs: number, share: number): number => (workedMs * (1 - share)) / share;
