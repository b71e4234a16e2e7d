// What the middleware puts on ctx.state, typed (koa's DefaultState, augmented here), and the
// accessors routes read the caller with: a route behind no credential middleware that asks for a
// caller is a bug in the app's wiring (a 500), not the client's.
import type { Context } from 'koa';
import type { ApiError } from './errors.ts';
import type { Caller, KeyCaller } from './caller.ts';
import type { TraceContext } from '../tracing/spans.ts';

/** A signed-in person, on the session API (routes/customer-auth.ts). */
export interface SignedInPerson {
  email: string;
  sessionId: string;
  secret: string;
}

declare module 'koa' {
  interface DefaultState {
    /** Every request's id (http/request-id.ts). */
    requestId: string;
    /** Aborted when the client leaves before its response is complete (http/client-gone.ts). */
    clientGone: AbortSignal;
    /** Who is calling, once a credential's middleware let them in (http/caller.ts). */
    caller?: Caller;
    /**
     * The actor named by what the operator (routes/admin.ts) or a signed-in person
     * (routes/customer-auth.ts) changes, set by their middleware. An account's caller names its own (caller.actor).
     */
    actor: string;
    person?: SignedInPerson;
    /** For the access log and metrics: the model called, what it was charged, why it failed. */
    model?: string;
    billed?: number;
    /** The model call's span (http/call-spans.ts), the parent of its steps' spans. */
    traceContext?: TraceContext;
    errorCode?: string | null;
    internalError?: unknown;
    /** The route's error body (the Anthropic routes' shape); OpenAI's when unset. */
    errorShape?: (e: ApiError) => unknown;
  }
}

/** The request's caller (any kind). */
export function callerOf(ctx: Context): Caller {
  const caller = ctx.state.caller;
  if (!caller) throw new Error(`no caller on ${ctx.method} ${ctx.path}: its route is mounted behind no credential middleware`);
  return caller;
}

/** The API key calling (the /v1 routes behind requireApiKey). */
export function keyCallerOf(ctx: Context): KeyCaller {
  const caller = callerOf(ctx);
  if (caller.kind !== 'api_key') throw new Error(`${ctx.method} ${ctx.path} needs an API key's caller, not a ${caller.kind}'s`);
  return caller;
}

/** The signed-in person (the session API, behind requireSession). */
export function personOf(ctx: Context): SignedInPerson {
  const person = ctx.state.person;
  if (!person) throw new Error(`no signed-in person on ${ctx.method} ${ctx.path}: its route is mounted behind no session middleware`);
  return person;
}
