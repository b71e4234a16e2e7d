// Server-sent events onto a Koa response, noticing when the client goes away.
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { clientGone } from './client-gone.ts';

export interface SseWriter {
  /** Aborted when the client disconnects before the stream ends. */
  readonly clientGone: AbortSignal;
  data(payload: unknown): void;
  event(name: string, payload: unknown): void;
  raw(text: string): void;
  end(): void;
}

export function openSse(ctx: Context): SseWriter {
  const out = new PassThrough();
  const gone = clientGone(ctx);
  let ended = false;
  ctx.status = 200;
  ctx.set('content-type', 'text/event-stream; charset=utf-8');
  // A stream holds a call's output and usage: no cache keeps it (as every /v1 answer, http/security-headers.ts).
  ctx.set('cache-control', 'no-store');
  ctx.set('x-accel-buffering', 'no');
  ctx.body = out;
  const write = (text: string) => {
    if (!ended && !gone.aborted) out.write(text);
  };
  return {
    clientGone: gone,
    data: (payload) => write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`),
    event: (name, payload) => write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`),
    raw: write,
    end: () => {
      if (!ended) {
        ended = true;
        out.end();
      }
    },
  };
}
