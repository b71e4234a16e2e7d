// What OpenTelemetry tracing costs (issue 44): the same gateway with tracing off and on, side by
// side in one run (bench/side-by-side.ts), each on PostgreSQL with metering on, in front of one
// mock upstream. "On" exports every call's spans (the call, hold, upstream attempt, charge) by
// OTLP over HTTP to a sink in this process that accepts each batch and counts its spans, as a
// collector would take them; the default batch settings of the SDK (OTEL_BSP_*).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { writeMarkedBlock } from './report.ts';
import { startMock, startTollgate, type Mock, type Tollgate } from './targets.ts';
import { runSideBySide, sideBySideRows, type SideBySide } from './side-by-side.ts';

export interface TracingResult extends SideBySide {
  /** What the sink received while tracing was on. */
  exported: { requests: number; spans: number; bytes: number };
  calls: number;
  load: number;
}

interface Sink {
  url: string;
  received: TracingResult['exported'];
  close(): Promise<void>;
}

/** Counts the spans of each OTLP/JSON batch (each span has one "spanId") without parsing it. */
async function startSink(): Promise<Sink> {
  const received = { requests: 0, spans: 0, bytes: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      received.requests++;
      received.bytes += Buffer.byteLength(body);
      for (let i = body.indexOf('"spanId"'); i >= 0; i = body.indexOf('"spanId"', i + 8)) received.spans++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export async function runTracingBench(o: { databaseUrl: string; quick?: boolean; log?: (line: string) => void }): Promise<TracingResult> {
  const log = o.log ?? ((l: string) => console.log(l));
  let mock: Mock | null = null;
  let sink: Sink | null = null;
  const gateways: Tollgate[] = [];
  try {
    mock = await startMock();
    sink = await startSink();
    const off = await startTollgate({ databaseUrl: o.databaseUrl, mock });
    gateways.push(off);
    const on = await startTollgate({ databaseUrl: o.databaseUrl, mock, env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } });
    gateways.push(on);
    log(`tracing: off pid ${off.proc.pid}, on pid ${on.proc.pid} (spans to ${sink.url}), mock pid ${mock.proc.pid}`);
    const r = await runSideBySide({ mock, gateways: { before: off, after: on }, names: { before: 'tracing off', after: 'tracing on' }, quick: o.quick, log });
    // The last batches leave within the SDK's schedule delay (5 s).
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const calls = r.c64.filter((f) => f.target === 'after').reduce((n, f) => n + f.ok, 0) + r.c1.samples;
    log(`tracing: the sink received ${sink.received.spans} spans in ${sink.received.requests} batches (${(sink.received.bytes / 2 ** 20).toFixed(1)} MiB)`);
    return { ...r, exported: { ...sink.received }, calls, load: os.loadavg()[0] };
  } finally {
    for (const g of gateways) await g.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    await sink?.close();
  }
}

/** The section's table for BENCHMARKS.md, with the method beside it. */
export function tracingTable(r: TracingResult): string {
  return [
    ...sideBySideRows(r, { before: 'tracing off', after: 'tracing on' }),
    '',
    `Method: one run, two gateways of this checkout started side by side on PostgreSQL (projections in-process, metering on), in front of one mock upstream that answers at once; the second with OTEL_EXPORTER_OTLP_ENDPOINT set, exporting to a sink in the bench's process that counts what arrives. c=1: ${r.c1.samples} non-streamed chat calls per target, the mock direct and both gateways interleaved in blocks of 100 (direct p50 ${r.c1.directP50.toFixed(3)} ms); added = gateway p50 − direct p50. c=64: autocannon, 64 connections, each gateway in turn, alternated over two rounds. The sink received ${r.exported.spans.toLocaleString('en-US')} spans in ${r.exported.requests} batches (${(r.exported.bytes / 2 ** 20).toFixed(1)} MiB) for the warm-up and ${r.calls.toLocaleString('en-US')} measured calls of the traced gateway. Load average at the end ${r.load.toFixed(2)}.`,
  ].join('\n');
}

export function writeTracingBlock(path: string, r: TracingResult, when: string): void {
  writeMarkedBlock(path, 'tracing', `Last run: ${when}.\n\n${tracingTable(r)}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({ options: { quick: { type: 'boolean' }, write: { type: 'boolean' } } });
  const r = await runTracingBench({ databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test', quick: values.quick });
  console.log(`\n${tracingTable(r)}`);
  if (values.write) writeTracingBlock(fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url)), r, `${new Date().toISOString()}, ${os.cpus().length} cores`);
}
