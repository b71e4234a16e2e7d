// OpenTelemetry traces, end to end: the gateway started as a user starts it, with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver on loopback; the official openai client
// calls a model whose first channel refuses connections, so every call fails over once. What
// arrives is OTLP/JSON (the exporter of @opentelemetry/exporter-trace-otlp-http), read here by
// the OTLP JSON encoding's rules: hex ids, attributes as typed values.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { closedPort } from './support/http.ts';
import { tracesEndpoint } from '../src/tracing/sdk.ts';

// ---- The receiver -----------------------------------------------------------------------------

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: AnyValue }>;
  status?: { code?: number };
}
interface ExportRequest {
  resourceSpans: Array<{ resource?: { attributes?: Array<{ key: string; value: AnyValue }> }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

/** OTLP's span kinds and status codes (opentelemetry-proto trace.proto). */
const KIND = { server: 2, client: 3, internal: 1 };
const STATUS_ERROR = 2;

interface Receiver {
  url: string;
  bodies: string[];
  spans(): OtlpSpan[];
  resources(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces' && /json/.test(req.headers['content-type'] ?? '')) {
        bodies.push(body);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else res.writeHead(415).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const requests = () => bodies.map((b) => JSON.parse(b) as ExportRequest);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    spans: () => requests().flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((s) => s.spans))),
    resources: () => requests().flatMap((r) => r.resourceSpans.map((rs) => attributesOf(rs.resource?.attributes))),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const valueOf = (v: AnyValue): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue ?? null;
const attributesOf = (list: Array<{ key: string; value: AnyValue }> | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

async function spansOf(receiver: Receiver, traceId: string, count: number): Promise<OtlpSpan[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const mine = receiver.spans().filter((s) => s.traceId === traceId);
    if (mine.length >= count || Date.now() > deadline) return mine;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---- Set-up -----------------------------------------------------------------------------------

const MODEL = 'cx/gen-6-terra';
const PROMPT = 'Name three toll roads; the secret word is periwinkle.';
let receiver: Receiver;
let gw: GatewayProcess;
let configDir: string;
let deadPort: number;

/** The default models, with MODEL served by a channel nobody listens on and then by the simulated upstream. */
function writeFailoverConfig(): string {
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.nowhere = { type: 'openai-compatible', baseURL: `http://127.0.0.1:${deadPort}/v1`, connectTimeoutMs: 200 };
  config.models[MODEL] = {
    channels: [
      { provider: 'nowhere', upstreamModel: 'gen-6-terra', id: 'nowhere/gen-6-terra' },
      { provider: 'simulated', upstreamModel: 'gen-6-terra', id: 'simulated/gen-6-terra' },
    ],
  };
  const path = join(configDir, 'models.json');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const startTraced = (extra: Record<string, string> = {}) =>
  spawnGateway({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '50',
    OTEL_SERVICE_NAME: 'tollgate-under-test',
    TOLLGATE_MODELS_CONFIG: writeFailoverConfig(),
    ...extra,
  });

test.before(async () => {
  configDir = mkdtempSync(join(tmpdir(), 'tollgate-tracing-'));
  deadPort = await closedPort();
  receiver = await startReceiver();
  // uvu reports a failing hook badly: say what went wrong before rethrowing.
  gw = await startTraced().catch((err: Error) => {
    console.error(`could not start the gateway: ${err.message}`);
    throw err;
  });
});
test.after(async () => {
  await gw?.stop();
  await receiver?.close();
  rmSync(configDir, { recursive: true, force: true });
});

const traceparent = () => {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { traceId, parentId, header: `00-${traceId}-${parentId}-01` };
};

/** The call's span and its children by name. */
function tree(spans: OtlpSpan[], parentId: string) {
  const call = spans.find((s) => s.parentSpanId === parentId);
  assert.ok(call, `a span continues the caller's trace (${spans.map((s) => s.name).join(', ')})`);
  const children = spans.filter((s) => s.parentSpanId === call!.spanId);
  return { call: call!, children, named: (name: string) => children.filter((s) => s.name === name) };
}

function assertFailoverChildren(t: ReturnType<typeof tree>, billed: number): void {
  assert.is(t.named('tollgate.hold').length, 1, 'one hold span');
  assert.ok(Number(attributesOf(t.named('tollgate.hold')[0].attributes)['tollgate.hold.tokens']) > 0);
  const attempts = t.named('chat gen-6-terra');
  assert.is(attempts.length, 2, 'two upstream attempts: the refused channel, then the failover');
  const [first, second] = attempts.map((s) => ({ span: s, a: attributesOf(s.attributes) }));
  for (const { span } of [first, second]) assert.is(span.kind, KIND.client);
  assert.is(first.a['tollgate.channel'], 'nowhere/gen-6-terra');
  assert.is(first.a['tollgate.failover'], false);
  assert.is(first.span.status?.code, STATUS_ERROR, 'the refused attempt is an error');
  assert.match(String(first.a['error.type']), /econnrefused|upstream_error|timeout/);
  assert.is(second.a['tollgate.channel'], 'simulated/gen-6-terra');
  assert.is(second.a['tollgate.failover'], true);
  assert.is(second.a['gen_ai.request.model'], 'gen-6-terra');
  assert.is(second.a['gen_ai.provider.name'], 'simulated');
  assert.is.not(second.span.status?.code, STATUS_ERROR);
  const charge = t.named('tollgate.charge');
  assert.is(charge.length, 1, 'one charge span');
  assert.is(attributesOf(charge[0].attributes)['tollgate.billed_tokens'], billed);
  assert.is(attributesOf(charge[0].attributes)['tollgate.channel'], 'simulated/gen-6-terra');
}

/** Nothing the receiver got holds the prompt, the reply or the key. */
function assertNothingSecret(secrets: string[]): void {
  const all = receiver.bodies.join('\n');
  for (const s of secrets) assert.not.ok(all.includes(s), `the exported spans do not contain ${s.slice(0, 12)}…`);
}

// ---- Tests ------------------------------------------------------------------------------------

test('the endpoint comes from the standard variables; none, or OTEL_SDK_DISABLED, is off', () => {
  assert.is(tracesEndpoint({}), null);
  assert.is(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), 'http://collector:4318/v1/traces');
  assert.is(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9/t' }), 'http://b:9/t');
  assert.is(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_SDK_DISABLED: 'true' }), null);
  assert.is(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_TRACES_EXPORTER: 'none' }), null);
});

test('a call with one failover: its span continues the caller trace, with hold, two attempts and the charge', async () => {
  const client = new OpenAI({ apiKey: gw.key, baseURL: gw.baseUrl, maxRetries: 0 });
  const tp = traceparent();
  const completion = await client.chat.completions.create(
    { model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 40 },
    { headers: { traceparent: tp.header } },
  );
  const usage = completion.usage as OpenAI.CompletionUsage & { billed_tokens: number };
  assert.ok(usage.billed_tokens > 0);
  const spans = await spansOf(receiver, tp.traceId, 5);
  const t = tree(spans, tp.parentId);
  assert.is(t.call.kind, KIND.server);
  assert.is(t.call.name, `chat ${MODEL}`);
  const a = attributesOf(t.call.attributes);
  assert.is(a['gen_ai.operation.name'], 'chat');
  assert.is(a['gen_ai.request.model'], MODEL);
  assert.is(a['gen_ai.usage.input_tokens'], usage.prompt_tokens, 'input tokens as the upstream reported them');
  assert.is(a['gen_ai.usage.output_tokens'], usage.completion_tokens);
  assert.is(a['tollgate.billed_tokens'], usage.billed_tokens, 'billed as the ledger charged');
  assert.is(a['http.response.status_code'], 200);
  assert.not.ok('tollgate.account.id' in a, 'no account id unless TOLLGATE_TRACE_ACCOUNTS=on');
  assertFailoverChildren(t, usage.billed_tokens);
  assert.ok(
    receiver.resources().some((r) => r['service.name'] === 'tollgate-under-test'),
    'OTEL_SERVICE_NAME names the service',
  );
  assertNothingSecret([PROMPT, 'periwinkle', completion.choices[0].message.content!, gw.key]);
});

test('a streamed call: the charge committed while the stream is read is still the call span child', async () => {
  const client = new OpenAI({ apiKey: gw.key, baseURL: gw.baseUrl, maxRetries: 0 });
  const tp = traceparent();
  const stream = await client.chat.completions.create(
    { model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 40, stream: true, stream_options: { include_usage: true } },
    { headers: { traceparent: tp.header } },
  );
  let text = '';
  let usage: (OpenAI.CompletionUsage & { billed_tokens?: number }) | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(usage?.billed_tokens, 'the last chunk says what the call cost');
  const spans = await spansOf(receiver, tp.traceId, 5);
  const t = tree(spans, tp.parentId);
  const a = attributesOf(t.call.attributes);
  assert.is(a['gen_ai.usage.output_tokens'], usage!.completion_tokens);
  assert.is(a['tollgate.billed_tokens'], usage!.billed_tokens);
  assertFailoverChildren(t, usage!.billed_tokens!);
  assertNothingSecret([PROMPT, text, gw.key]);
});

test('an embeddings call: its span, the same steps, the input tokens the upstream counted', async () => {
  const client = new OpenAI({ apiKey: gw.key, baseURL: gw.baseUrl, maxRetries: 0 });
  const tp = traceparent();
  const res = await client.embeddings.create({ model: MODEL, input: [PROMPT, 'another text'] }, { headers: { traceparent: tp.header } });
  const usage = res.usage as OpenAI.CreateEmbeddingResponse.Usage & { billed_tokens: number };
  const t = tree(await spansOf(receiver, tp.traceId, 5), tp.parentId);
  assert.is(t.call.name, `embeddings ${MODEL}`);
  const a = attributesOf(t.call.attributes);
  assert.is(a['gen_ai.operation.name'], 'embeddings');
  assert.is(a['gen_ai.usage.input_tokens'], usage.prompt_tokens);
  assert.is(a['tollgate.billed_tokens'], usage.billed_tokens);
  const attempts = t.named('embeddings gen-6-terra');
  assert.is(attempts.length, 2, 'the refused channel, then the failover');
  assert.is(attempts[0].status?.code, STATUS_ERROR);
  assert.is(t.named('tollgate.hold').length, 1);
  assert.is(attributesOf(t.named('tollgate.charge')[0].attributes)['tollgate.billed_tokens'], usage.billed_tokens);
  assertNothingSecret([PROMPT, gw.key]);
});

test('a refused call (unknown model) is a span with its error type, and nothing upstream', async () => {
  const tp = traceparent();
  const r = await fetch(`${gw.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json', traceparent: tp.header },
    body: JSON.stringify({ model: 'no/such-model', messages: [{ role: 'user', content: PROMPT }] }),
  });
  assert.ok(r.status >= 400 && r.status < 500);
  const spans = await spansOf(receiver, tp.traceId, 1);
  const t = tree(spans, tp.parentId);
  const a = attributesOf(t.call.attributes);
  assert.is(a['http.response.status_code'], r.status);
  assert.ok(a['error.type'], 'the refusal is typed');
  assert.is(t.children.length, 0, 'no hold, no attempt');
});

test('TOLLGATE_TRACE_ACCOUNTS=on adds the account and key ids (never the key)', async () => {
  const other = await startTraced({ TOLLGATE_TRACE_ACCOUNTS: 'on' });
  try {
    const client = new OpenAI({ apiKey: other.key, baseURL: other.baseUrl, maxRetries: 0 });
    const tp = traceparent();
    await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 20 },
      { headers: { traceparent: tp.header } },
    );
    const t = tree(await spansOf(receiver, tp.traceId, 5), tp.parentId);
    const a = attributesOf(t.call.attributes);
    const me = (await (await fetch(`${other.baseUrl}/subscription`, { headers: { authorization: `Bearer ${other.key}` } })).json()) as { account_id?: string };
    assert.ok(typeof a['tollgate.account.id'] === 'string' && (a['tollgate.account.id'] as string).length > 0);
    if (me.account_id) assert.is(a['tollgate.account.id'], me.account_id);
    assert.ok(typeof a['tollgate.key.id'] === 'string' && (a['tollgate.key.id'] as string).length > 0);
    assertNothingSecret([other.key, PROMPT]);
  } finally {
    await other.stop();
  }
});

test.run();
