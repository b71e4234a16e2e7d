// When a response has really ended: at once for a whole body, else (a stream, sent after the
// middleware returned) when its connection closes. Every caller of one response shares one
// 'close' listener, so the request's own listeners (client-gone, the stream's pipe) stay few.
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';

const HOOKS = Symbol('response end hooks');
type WithHooks = ServerResponse & { [HOOKS]?: Array<() => void> };

export function whenResponseEnds(ctx: Context, done: () => void): void {
  if (ctx.res.writableFinished || !ctx.body || typeof (ctx.body as { pipe?: unknown }).pipe !== 'function') return done();
  const res = ctx.res as WithHooks;
  let hooks = res[HOOKS];
  if (!hooks) {
    const list: Array<() => void> = (hooks = res[HOOKS] = []);
    res.once('close', () => {
      for (const hook of list) hook();
    });
  }
  hooks.push(done);
}
