// Where the gateway's resident memory goes: the compiled gateway (as the bench runs it) on
// PostgreSQL, autocannon at 16, 64 and 256 connections; prints, every 0.7 s, resident memory and
// V8's heap by space (from /metrics), and at idle the process's mappings by resident size.
// Run: node --import tsx bench/rss-probe.ts [--connections 16,64,256] [--node-args '--flag,...']
import { readFileSync } from 'node:fs';
import { openPostgres } from '../src/eventstore/db.ts';
import { parseArgs } from 'node:util';
import type { AutocannonResult } from './load.ts';
import { runLoad } from './processes.ts';
import { gatewayMetrics, openBenchAccount, startMock, startTollgate, tollgateRequest } from './targets.ts';

const { values } = parseArgs({ options: { connections: { type: 'string' }, 'node-args': { type: 'string' } } });
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const mock = await startMock();
const gw = await startTollgate({ databaseUrl: url, mock, nodeArgs: values['node-args']?.split(',') });
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

async function memory(): Promise<string> {
  const text = await gatewayMetrics(gw);
  const one = (name: string) => mib(Number(new RegExp(`^${name}\\s+(\\S+)`, 'm').exec(text)?.[1]));
  const spaces = [...text.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\}\s+(\S+)/gm)]
    .filter((m) => Number(m[2]) > 0)
    .map((m) => `${m[1]} ${mib(Number(m[2]))}`);
  return `RSS ${one('process_resident_memory_bytes')} MiB; heap used ${one('nodejs_heap_size_used_bytes')} of ${one('nodejs_heap_size_total_bytes')} (${spaces.join(', ')}); external ${one('nodejs_external_memory_bytes')}`;
}

/** Resident MiB by mapping (the node binary, malloc's heap, anonymous memory: V8's heap and more). */
function mappings(pid: number): string {
  const bySource = new Map<string, number>();
  let source = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) source = head[1] || '[anonymous]';
    else if (line.startsWith('Rss:')) bySource.set(source, (bySource.get(source) ?? 0) + Number(line.split(/\s+/)[1]) * 1024);
  }
  return [...bySource]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([s, b]) => `  ${mib(b).padStart(6)} MiB ${s}`)
    .join('\n');
}

try {
  const account = await openBenchAccount(gw, 'probe');
  console.log(`idle: ${await memory()}\n${mappings(gw.proc.pid)}`);
  for (const connections of (values.connections ?? '16,64,256').split(',').map(Number)) {
    const timer = setInterval(
      () =>
        void memory().then(
          (m) => console.log(`c=${connections}: ${m}`),
          () => undefined,
        ),
      700,
    );
    const r = await runLoad<AutocannonResult>({ kind: 'autocannon', target: tollgateRequest(gw, account, false), connections, amount: 6000 });
    clearInterval(timer);
    console.log(`c=${connections} done, ${Math.round(r.perSecond)} req/s: ${await memory()}`);
  }
} finally {
  await gw.stop();
  await mock.proc.stop();
  const db = openPostgres(url, 1);
  await db.exec(`DROP SCHEMA IF EXISTS "${gw.schema}" CASCADE; DROP SCHEMA IF EXISTS "${gw.schema}_rm" CASCADE`);
  await db.close();
}
