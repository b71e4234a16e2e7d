// Typed failures of the event store; callers branch on the class, never on message text.

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly stream: string,
    readonly expected: number | string,
    readonly actual: number,
  ) {
    super(`stream ${stream}: expected revision ${expected}, actual ${actual}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

/**
 * An append that reached the database after its `notAfter` (AppendRequest): its caller had been
 * answered by then, so nothing was written.
 */
export class AppendDeadlinePassed extends Error {
  constructor(readonly notAfter: number) {
    super(`the append reached the database after its deadline (${new Date(notAfter).toISOString()}): nothing was written`);
    this.name = 'AppendDeadlinePassed';
  }
}

/**
 * A decision read another stream (a subscription reads its plan) that moved before its append
 * committed: nothing was written; the caller reads that stream again and decides again.
 */
export class StaleReadError extends Error {
  constructor(
    readonly stream: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(`stream ${stream} moved (read at revision ${expected}, now ${actual}) before the decision that read it was appended`);
    this.name = 'StaleReadError';
  }
}

export class InvalidEventError extends Error {
  constructor(
    readonly eventType: string,
    readonly details: string,
  ) {
    super(`event ${eventType} is invalid: ${details}`);
    this.name = 'InvalidEventError';
  }
}

export class InvalidStreamNameError extends Error {
  constructor(
    readonly stream: string,
    reason: string,
  ) {
    super(`stream name ${JSON.stringify(stream.slice(0, 40))} is invalid: ${reason}`);
    this.name = 'InvalidStreamNameError';
  }
}

export class DuplicateEventError extends Error {
  constructor(readonly eventId: string) {
    super(`event ${eventId} was already appended`);
    this.name = 'DuplicateEventError';
  }
}

/**
 * The log could not be read up to what was committed before the read within its bound (on
 * PostgreSQL, an older transaction kept running): the read is to be retried, a 503.
 */
export class LogNotReadableYet extends Error {
  constructor(readonly target: number) {
    super(`events committed up to position ${target} are not readable yet`);
    this.name = 'LogNotReadableYet';
  }
}

/**
 * A metered call's shared bound on waiting for the database passed (src/calls/ledger-deadline.ts):
 * like a timeout, the database is out of reach for now.
 */
export class DatabaseDeadlinePassed extends Error {
  constructor(readonly boundMs: number) {
    super(`the database did not answer within the call's bound of ${boundMs} ms`);
    this.name = 'DatabaseDeadlinePassed';
  }
}
