// OpenTelemetry traces, exported by OTLP over HTTP when the standard variables ask for it
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The SDK and its exporter
// are loaded only then: a gateway without a collector pays for neither, and its spans are the
// API's no-ops. The SDK reads the other standard variables itself (OTEL_SERVICE_NAME,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER, OTEL_BSP_SCHEDULE_DELAY, ...).

export interface Tracing {
  /** Where spans go, for the start-up banner (null: tracing is off). */
  endpoint: string | null;
  /** Sends the spans still buffered, then stops. */
  shutdown(): Promise<void>;
}

const OFF: Tracing = { endpoint: null, shutdown: async () => undefined };

/** The traces endpoint the standard variables name, or null when tracing is off. */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  if (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER.trim().toLowerCase() === 'none') return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
}

/** The endpoint as a log may show it: without credentials or a query string. */
function shown(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/** Registers the SDK as the process's tracer provider (with W3C trace context) when an endpoint is set. */
export async function startTracing(env: NodeJS.ProcessEnv): Promise<Tracing> {
  const endpoint = tracesEndpoint(env);
  if (!endpoint) return OFF;
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { defaultResource, detectResources, envDetector, resourceFromAttributes }] =
    await Promise.all([import('@opentelemetry/sdk-trace-node'), import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/resources')]);
  const provider = new NodeTracerProvider({
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the environment's detector) take precedence over these.
    resource: defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'tollgate' }))
      .merge(detectResources({ detectors: [envDetector] })),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The W3C traceparent/baggage propagator, and no context manager: each step is handed its
  // parent (src/tracing/spans.ts), so no async hook slows the promises of the process.
  provider.register({ contextManager: null });
  return { endpoint: shown(endpoint), shutdown: () => provider.shutdown() };
}
