// A quick look at c=1 only: the mock called directly and Tollgate (compiled, real PostgreSQL),
// sequential calls interleaved in blocks of 100, two rounds, plus the gateway's own append timings.
// Minutes less than `npm run bench`, for trying one change at a time.
//   node --import tsx bench/c1-probe.ts [samples per round, default 1500]
//   PROJECTOR=1   the docker-compose topology (projections in a `tollgate projector` process)
//   PROFILE=DIR   V8 CPU profile of the gateway (summarise with bench/profile-summary.ts)
import { Client } from 'pg';
import { startMock, startTollgate, openBenchAccount, tollgateRequest, directRequest } from './targets.ts';
import { runLoad } from './processes.ts';
import type { SequentialResult } from './load.ts';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const samples = Number(process.argv[2] ?? 1500);
const mock = await startMock();
const gw = await startTollgate({
  databaseUrl: url,
  mock,
  projector: !!process.env.PROJECTOR,
  nodeArgs: process.env.PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE}`] : [],
});
try {
  const account = await openBenchAccount(gw, 'probe');
  for (let round = 1; round <= 2; round++) {
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
      `round ${round}: direct p50 ${d.p50.toFixed(3)} ms; tollgate p50 ${t.p50.toFixed(3)} ms, p99 ${t.p99.toFixed(3)} ms; added p50 ${(t.p50 - d.p50).toFixed(3)} ms${failed ? `; ${failed} FAILED responses` : ''}`,
    );
  }
  const metrics = await fetch(`${gw.url}/metrics`).then((r) => r.text());
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
