// The span of each model call (src/tracing/spans.ts has its steps), a child of the caller's W3C
// `traceparent` when it sends one. A span never carries a prompt, a reply or a key.
import { propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Context, Next } from 'koa';
import { NO_TRACE, tracer, type TraceContext } from '../tracing/spans.ts';
import { whenResponseEnds } from './response-end.ts';

/** The call's trace context (its span), for the call's steps to hang under. */
export const callTraceOf = (ctx: Context): TraceContext => ctx.state.traceContext ?? NO_TRACE;

/** The model calls a span is made for, and their GenAI operation names. */
const OPERATIONS: Array<[RegExp, string]> = [
  [/^\/v1\/(chat\/completions|messages|responses)\/?$/i, 'chat'],
  [/^\/v1\/images\/(generations|edits)\/?$/i, 'image_generation'],
  [/^\/v1\/embeddings\/?$/i, 'embeddings'],
];

const operationOf = (method: string, path: string): string | null =>
  method === 'POST' ? (OPERATIONS.find(([pattern]) => pattern.test(path))?.[1] ?? null) : null;

/**
 * The call's span, a child of the caller's W3C `traceparent` when it sends one. It ends when the
 * response has really ended (a stream's whole length), errored for a 5xx or a stream that failed.
 */
export function callSpans(opts: { accountAttributes: boolean }) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const operation = operationOf(ctx.method, ctx.path);
    if (!operation) return next();
    const parent = propagation.extract(ROOT_CONTEXT, ctx.headers);
    const span = tracer().startSpan(
      operation,
      { kind: SpanKind.SERVER, attributes: { 'gen_ai.operation.name': operation, 'http.request.method': ctx.method, 'url.path': ctx.path } },
      parent,
    );
    const end = () => {
      const { model, errorCode, caller } = ctx.state as { model?: string; errorCode?: string; caller?: { accountId?: string; keyId?: string } };
      if (model) span.updateName(`${operation} ${model}`).setAttribute('gen_ai.request.model', model);
      if (opts.accountAttributes && caller?.accountId) span.setAttributes({ 'tollgate.account.id': caller.accountId, 'tollgate.key.id': caller.keyId ?? '' });
      span.setAttribute('http.response.status_code', ctx.status);
      if (ctx.status >= 500 || (ctx.status < 400 && errorCode)) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', errorCode ?? String(ctx.status));
      } else if (ctx.status >= 400) span.setAttribute('error.type', errorCode ?? String(ctx.status));
      span.end();
    };
    ctx.state.traceContext = trace.setSpan(parent, span);
    // Tracing off (the API's no-op) or not sampled: nothing to note, and no hook on the response.
    if (!span.isRecording()) return next();
    try {
      await next();
    } finally {
      whenResponseEnds(ctx, end);
    }
  };
}
