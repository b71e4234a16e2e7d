// A streamed answer (NDJSON or CSV) for operator work that reads more than fits in one body: the
// status goes out with the first bytes, the producer writes as fast as the client reads (it waits
// while the socket's buffer is full, so memory stays bounded), and a failure after the first
// bytes is told as the answer's last line.
import type { Context } from 'koa';
import { PassThrough } from 'node:stream';

export interface LineSink {
  /** Writes text; the promise (when there is one) resolves once the client has room for more. */
  write(text: string): Promise<void> | void;
}

/** The client went away: the producer stops at its next write. */
export class AnswerAbandoned extends Error {
  constructor() {
    super('the client closed the answer');
    this.name = 'AnswerAbandoned';
  }
}

/**
 * Answers ctx with a stream of `type`. `produce` writes through the sink and returns the last
 * text; `lastOnFailure` turns a failure into the last text instead.
 */
export function streamAnswer(ctx: Context, type: string, produce: (sink: LineSink) => Promise<string>, lastOnFailure: (err: unknown) => string): void {
  const out = new PassThrough();
  ctx.type = type;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = out;
  const room = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done);
        out.off('close', done);
        resolve();
      };
      out.on('drain', done);
      out.on('close', done);
    });
  const sink: LineSink = {
    write(text) {
      if (out.destroyed) throw new AnswerAbandoned();
      if (!out.write(text)) return room();
    },
  };
  void produce(sink)
    .then((last) => out.end(last))
    .catch((err: unknown) => {
      if (!out.destroyed && !(err instanceof AnswerAbandoned)) out.end(lastOnFailure(err));
    });
}
