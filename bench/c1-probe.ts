// A quick look at c=1 only: the mock called directly and Tollgate (compiled, real PostgreSQL),
// sequential calls interleaved in blocks of 100, two rounds, plus the gateway's own append timings.
// Minutes less than `npm run bench`, for trying one change at a time.
//   node --import tsx bench/c1-probe.ts [samples per round, default 1500]
//   PROJECTOR=1   the docker-compose topology (projections in a `tollgate projector` process)
//   PROFILE=DIR   V8 CPU profile of the gateway (summarise with bench/profile-summary.ts)
//   GATEWAY_ENV='LOG_FORMAT=pretty NODE_ENV=development'   extra settings of the gateway, to measure
//                 a setup like a user's terminal (pino-pretty formats every access-log line)
import { Client } from 'pg';
import { startMock, startTollgate, openBenchAccount, tollgateRequest, directRequest, gatewayMetrics } from './targets.ts';
import { runLoad } from './processes.ts';
import type { SequentialResult } from './load.ts';
import { ensureWrk, runWrk } from './wrk.ts';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const samples = Number(process.argv[2] ?? 1500);
const mock = await startMock();
const gw = await startTollgate({
  databaseUrl: url,
  mock,
  projector: !!process.env.PROJECTOR,
  env: Object.fromEntries(
    (process.env.GATEWAY_ENV ?? '')
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => kv.split('=', 2) as [string, string]),
  ),
  nodeArgs: process.env.PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE}`] : [],
});
/** The gateway's own append count and total seconds so far (its /metrics). */
async function appendTotals(): Promise<{ count: number; sum: number }> {
  const metrics = await gatewayMetrics(gw);
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
  return { count: value('tollgate_eventstore_append_duration_seconds_count'), sum: value('tollgate_eventstore_append_duration_seconds_sum') };
}
/** Appends per call and their mean time during one phase of `calls` calls. */
function appendsOver(before: { count: number; sum: number }, after: { count: number; sum: number }, calls: number): string {
  const n = after.count - before.count;
  return `${(n / calls).toFixed(2)} appends per call, ${(((after.sum - before.sum) / n) * 1000).toFixed(3)} ms each`;
}
try {
  const account = await openBenchAccount(gw, 'probe');
  for (let round = 1; round <= 2; round++) {
    const before = await appendTotals();
    const seq = await runLoad<SequentialResult>({
      kind: 'sequential',
      targets: [directRequest(mock, false), tollgateRequest(gw, account, false)],
      samples,
      warmup: 200,
      block: 100,
      stream: false,
    });
    const d = seq.perTarget.direct.total;
    const t = seq.perTarget.tollgate.total;
    const failed = seq.perTarget.tollgate.failures;
    console.log(
      `round ${round}: direct p50 ${d.p50.toFixed(3)} ms; tollgate p50 ${t.p50.toFixed(3)} ms, p99 ${t.p99.toFixed(3)} ms; added p50 ${(t.p50 - d.p50).toFixed(3)} ms${failed ? `; ${failed} FAILED responses` : ''}; ${appendsOver(before, await appendTotals(), samples + 200)}`,
    );
  }
  // What a user's load tool measures on the same gateway: wrk, one keep-alive connection.
  if (ensureWrk(console.log)) {
    for (const t of [directRequest(mock, false), tollgateRequest(gw, account, false)]) {
      const before = await appendTotals();
      const w = runWrk(t, { connections: 1, seconds: Number(process.env.WRK_SECONDS ?? 10) });
      const appends = t.name === 'tollgate' ? `; ${appendsOver(before, await appendTotals(), w.requests)}` : '';
      console.log(
        `wrk c=1 ${t.name}: p50 ${w.latencyMs.p50.toFixed(3)} ms, p99 ${w.latencyMs.p99.toFixed(3)} ms, ${w.requests} requests (${w.non2xx} non-2xx)${appends}`,
      );
    }
  }
  const metrics = await gatewayMetrics(gw);
  const value = (name: string) =>
    Number(
      /^(\S+) (\S+)$/m.exec(
        metrics
          .split('\n')
          .filter((l) => l.startsWith(name))
          .join('\n'),
      )?.[2] ?? NaN,
    );
  const sum = value('tollgate_eventstore_append_duration_seconds_sum');
  const count = value('tollgate_eventstore_append_duration_seconds_count');
  const buckets = metrics
    .split('\n')
    .filter((l) => l.startsWith('tollgate_eventstore_append_duration_seconds_bucket'))
    .map((l) => `≤${/le="([^"]+)"/.exec(l)?.[1]} s: ${Math.round((Number(l.split(' ')[1]) / count) * 100)} %`);
  console.log(`appends inside the gateway: ${count} in all, ${((sum / count) * 1000).toFixed(3)} ms each on average; ${buckets.join(', ')}`);
} finally {
  await gw.stop();
  await mock.proc.stop();
  const c = new Client(url);
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${gw.schema}" CASCADE; DROP SCHEMA IF EXISTS "${gw.schema}_rm" CASCADE`);
  await c.end();
}
