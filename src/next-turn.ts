// One turn of the event loop for others: long work split into slices awaits this between them
// (setImmediate: after the pending I/O callbacks, so requests that arrived meanwhile run first).
export const nextTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));
