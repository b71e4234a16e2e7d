import type { BooksDeps } from '../books/index.ts';
import type { CallDeps } from '../calls/index.ts';
import type { KeysDeps } from '../keys/index.ts';

/** The session API serves a member what a key holder, a key manager and a payer each see. */
export interface CustomerDeps extends CallDeps, KeysDeps, BooksDeps {}
