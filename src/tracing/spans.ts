// The spans of a metered call (OpenTelemetry's GenAI conventions): the call (http/call-spans.ts),
// and within it the hold, each upstream attempt (a failover is one more) and the charge's commit.
// Through the API alone: with no SDK registered (tracing off) every span is a no-op. Each step is
// given its parent (the call's context) explicitly: no context manager is registered, as one on
// async hooks would tax every promise of the process. A span never carries a prompt, a reply or a
// key: only models, token counts, channel ids, and the account and key ids when the operator asks
// for them (TOLLGATE_TRACE_ACCOUNTS).
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context as TraceContext, type Span } from '@opentelemetry/api';

export type { TraceContext };

/** No call around: a step's span is a root (a call made without the HTTP edge, in a test). */
export const NO_TRACE: TraceContext = ROOT_CONTEXT;

export const tracer = () => trace.getTracer('tollgate');

/** A call's token counts as the upstream reported them (the names of the upstream port's Usage). */
export interface UsageCounts {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
}

/** What the upstream reported the call used, and what it was billed, on the call's span. */
export function noteUsage(call: TraceContext, usage: UsageCounts, billed: number): void {
  const span = trace.getSpan(call);
  if (!span) return;
  const a: Attributes = {
    'gen_ai.usage.input_tokens': usage.prompt_tokens,
    'gen_ai.usage.output_tokens': usage.completion_tokens,
    'tollgate.billed_tokens': billed,
  };
  if (usage.cached_tokens) a['gen_ai.usage.cache_read.input_tokens'] = usage.cached_tokens;
  if (usage.cache_write_tokens) a['gen_ai.usage.cache_creation.input_tokens'] = usage.cache_write_tokens;
  if (usage.reasoning_tokens) a['gen_ai.usage.reasoning.output_tokens'] = usage.reasoning_tokens;
  span.setAttributes(a);
}

/** Runs `step` in a span of its own under `parent`, ended (errored if it throws) when it settles. */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  parent: TraceContext,
  step: (span: Span) => Promise<T>,
  kind: SpanKind = SpanKind.INTERNAL,
  errorType: (err: unknown) => string = (err) => (err instanceof Error ? err.name : 'error'),
): Promise<T> {
  const span = tracer().startSpan(name, { kind, attributes }, parent);
  try {
    return await step(span);
  } catch (err) {
    // The kind of failure only: an error's message may quote an upstream's answer.
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute('error.type', errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

export { SpanKind, SpanStatusCode };
