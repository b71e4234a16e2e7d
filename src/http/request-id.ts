import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';

/** Every request gets an id, echoed back and carried into the events it causes. */
export async function requestId(ctx: Context, next: Next): Promise<void> {
  const incoming = ctx.get('x-request-id');
  ctx.state.requestId = /^[A-Za-z0-9_.:-]{8,100}$/.test(incoming) ? incoming : `req_${randomUUID().replace(/-/g, '')}`;
  ctx.set('x-request-id', ctx.state.requestId);
  await next();
}
