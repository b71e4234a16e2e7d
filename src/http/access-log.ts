// One log line per request. Only ids and numbers: never a key, a prompt or a body.
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { redactSecretShapes } from '../secret-shapes.ts';
import { whenResponseEnds } from './response-end.ts';
import { phaseClock, phaseSince } from '../tracing/call-phases.ts';

export function accessLog(log: Logger) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const done = () => {
        const logStarted = phaseClock();
        const s = ctx.state;
        const entry = {
          requestId: s.requestId,
          method: ctx.method,
          // A key pasted into the URL (GET /v1/sk_svc_…) is cut out before the path is shortened.
          route: redactSecretShapes(ctx.path).slice(0, 80),
          status: ctx.status,
          latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
          keyId: s.caller?.keyId,
          account: s.caller?.accountId,
          model: s.model,
          billed: s.billed,
          errorCode: s.errorCode,
        };
        if (s.internalError)
          log.error(
            { ...entry, err: { name: (s.internalError as Error).name, message: (s.internalError as Error).message, stack: (s.internalError as Error).stack } },
            'request failed',
          );
        else log.info(entry, 'request');
        phaseSince('access_log', logStarted);
      };
      // Streams finish after the middleware returns; log when the response really ends.
      whenResponseEnds(ctx, done);
    }
  };
}
