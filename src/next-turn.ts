// One turn of the event loop for others: long work split into slices awaits this between them
// (setImmediate: after the pending I/O callbacks, so requests that arrived meanwhile run first).
export const nextTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Long work in slices of about `sliceMs` of the event loop: call step() after each unit of work;
 * once the slice is used up it gives a turn to others (and a new slice starts after it).
 */
export class TimeSlicer {
  private sliceStart = performance.now();
  constructor(private readonly sliceMs: number) {}

  step(): Promise<void> | undefined {
    if (performance.now() - this.sliceStart < this.sliceMs) return undefined;
    return nextTurn().then(() => {
      this.sliceStart = performance.now();
    });
  }
}
