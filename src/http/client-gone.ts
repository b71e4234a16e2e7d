// Notices a client that goes away before its response is complete. The listener is attached
// when the request arrives (first middleware), so a client that leaves while the gateway is
// still preparing the call (counting a long prompt, taking the hold) is noticed as surely as one
// that leaves during the upstream call: calls made after that see an aborted signal at once.
import type { Context, Next } from 'koa';
import { abortedWith } from '../upstream/abort.ts';

export async function watchClient(ctx: Context, next: Next): Promise<void> {
  const gone = new AbortController();
  const res = ctx.res;
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  ctx.state.clientGone = gone.signal;
  await next();
}

/** Aborted once the client has left before its response was complete. */
export function clientGone(ctx: Context): AbortSignal {
  const signal: AbortSignal | undefined = ctx.state.clientGone;
  if (!signal) throw new Error('watchClient must run before clientGone() is used');
  return signal;
}

/** A controller for one upstream call that also aborts when the client leaves. */
export function abortWhenClientGone(ctx: Context): AbortController {
  return abortedWith(clientGone(ctx));
}
