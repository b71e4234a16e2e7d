// Domain failures. The HTTP layer maps `code` to a status; the message is safe to show a caller.
export type DomainErrorCode =
  | 'not_found'
  | 'already_exists'
  | 'invalid'
  | 'insufficient_quota'
  | 'rate_limited'
  | 'model_not_enabled'
  | 'conflict'
  | 'key_limit_exceeded'
  | 'key_expired'
  | 'account_suspended'
  /** The actor may not do this (a member's role). */
  | 'forbidden';

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    readonly facts: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const invalid = (message: string, facts?: Record<string, unknown>) => new DomainError('invalid', message, facts);

export function requireTokenAmount(value: unknown, name: string, { allowZero = false } = {}): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw invalid(`${name} must be a whole number of tokens ${allowZero ? '>= 0' : '>= 1'}`, { param: name });
  }
  return value;
}

/** A rule of the books that must hold whatever the callers do (TIGER_STYLE: assert, and fail loudly). */
export class InvariantViolation extends Error {
  constructor(message: string) {
    super(`ledger invariant broken: ${message}`);
    this.name = 'InvariantViolation';
  }
}
