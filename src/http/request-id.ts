import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import { looksLikeSecret } from '../secret-shapes.ts';

/** Every request gets an id, echoed back and carried into the events it causes. */
export async function requestId(ctx: Context, next: Next): Promise<void> {
  const incoming = ctx.get('x-request-id');
  // A key sent as the request id would be logged and stored with the events: never taken.
  const usable = /^[A-Za-z0-9_.:-]{8,100}$/.test(incoming) && !looksLikeSecret(incoming);
  ctx.state.requestId = usable ? incoming : `req_${randomUUID().replace(/-/g, '')}`;
  ctx.set('x-request-id', ctx.state.requestId);
  await next();
}
