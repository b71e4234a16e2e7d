// npm run bench: the whole comparison in one run, printed as one table and written to
// BENCHMARKS.md (between its marker comments).
//   1. gateway: the mock upstream called directly, Tollgate and Portkey (bench/gateway.ts)
//   2. growth: latency on an empty ledger vs one of 1M events (bench/growth.ts)
//   3. ledger: appends and rebuilds of 100k, 1M and 5M events on PostgreSQL (bench/ledger.ts)
//   4. corrections: dry run, apply, re-apply, statement and verify over windows of 10k, 100k and
//      1M charges beside a light chat load (bench/corrections.ts; its own block in BENCHMARKS.md)
//   5. finance: the finance reads on the books' read models (report, reconciliation, journal, lots)
//      on a year of traffic of 1M and 10M events (--quick: 100k), beside live calls and the fold
//      they replaced (bench/finance.ts; its own block in BENCHMARKS.md)
//   6. one-truth: c=1 added latency and c=64 throughput of this checkout beside the commit before
//      the one-truth rule (bench/one-truth.ts; its own block in BENCHMARKS.md)
//   7. tracing: the same, this checkout with OpenTelemetry tracing off and on (bench/tracing.ts;
//      its own block in BENCHMARKS.md)
//   8. breakdown: where a lone call's wall time goes, phase by phase, beside Portkey and the
//      floors of a one-row commit (bench/c1-breakdown.ts; its own block in BENCHMARKS.md)
//
// npm run bench -- [--quick] [--only gateway,growth,ledger] [--no-peer] [--pglite]
//                  [--cpu-profile DIR] [--no-write] [--json] [--projector]
//   --projector: Tollgate as docker-compose.yml runs it (gateway with projections off + a projector)
// DATABASE_URL selects the PostgreSQL server (default postgres://postgres@127.0.0.1:5432/test);
// every schema the run creates is dropped at the end. The peer is installed on first use with
// `npm ci --prefix bench/peer`.
import { parseArgs } from 'node:util';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { mkdirSync } from 'node:fs';
import { machineInfo } from './machine.ts';
import { runGatewayBench } from './gateway.ts';
import { runGrowthBench } from './growth.ts';
import { type Engine, formatTable as formatLedgerTable, runLedgerBench } from './ledger.ts';
import { ledgerCheckLines, mainTable, writeBenchmarksFile, describeRun, type BenchRun } from './report.ts';
import { correctionsTable, runCorrectionsBench, writeCorrectionsBlock, type CorrectionSizeResult } from './corrections.ts';
import { financeTable, financeTargets, runFinanceBench, writeFinanceBlock, type FinanceSizeResult } from './finance.ts';
import { oneTruthTable, runOneTruthBench, writeOneTruthBlock, type OneTruthResult } from './one-truth.ts';
import { runTracingBench, tracingTable, writeTracingBlock, type TracingResult } from './tracing.ts';
import { breakdownTable, runBreakdown, writeBreakdownBlock, type Breakdown } from './c1-breakdown.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    only: { type: 'string' },
    'no-peer': { type: 'boolean' },
    pglite: { type: 'boolean' },
    'cpu-profile': { type: 'string' },
    'no-write': { type: 'boolean' },
    json: { type: 'boolean' },
    projector: { type: 'boolean' },
  },
});
const quick = !!values.quick;
const sections = new Set((values.only ?? 'gateway,growth,ledger,corrections,finance,one-truth,tracing,breakdown').split(','));
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const started = Date.now();
const log = (line: string) => console.log(line);

const run: BenchRun = {
  date: new Date().toISOString(),
  quick,
  machine: await machineInfo(url),
  loadAtStart: os.loadavg()[0],
  seconds: 0,
  gateway: null,
  growth: null,
  ledger: null,
};
log(`npm run bench${quick ? ' --quick' : ''}: ${run.machine.nproc} cores, load average ${run.loadAtStart.toFixed(2)}, ${run.machine.postgres}`);

if (sections.has('gateway')) {
  log('\n== gateway comparison ==');
  const dir = values['cpu-profile'];
  if (dir) mkdirSync(dir, { recursive: true });
  run.gateway = await runGatewayBench({ databaseUrl: url, quick, peer: !values['no-peer'], cpuProfileDir: dir, projector: !!values.projector, log });
}
if (sections.has('growth')) {
  log('\n== growth: empty ledger vs a large one ==');
  run.growth = await runGrowthBench({ databaseUrl: url, events: quick ? 100_000 : 1_000_000, samples: quick ? 400 : 2000, log });
}
if (sections.has('ledger')) {
  log('\n== ledger: appends and rebuilds ==');
  const engines: Engine[] = values.pglite ? ['pglite', 'postgres'] : ['postgres'];
  run.ledger = await runLedgerBench({
    quick,
    engines,
    databaseUrl: url,
    log,
    rebuildSizes: { postgres: quick ? [20_000, 100_000] : [100_000, 1_000_000, 5_000_000] },
  });
}
let corrections: CorrectionSizeResult[] | null = null;
if (sections.has('corrections')) {
  log('\n== corrections: dry run, apply, statement and verify beside live traffic ==');
  corrections = await runCorrectionsBench({ databaseUrl: url, sizes: quick ? [10_000] : [10_000, 100_000, 1_000_000], log });
}
let finance: FinanceSizeResult[] | null = null;
if (sections.has('finance')) {
  log("\n== finance: the reads on the books' read models, a year of traffic ==");
  finance = await runFinanceBench({ databaseUrl: url, sizes: quick ? [100_000] : [1_000_000, 10_000_000], quick, log });
}
let oneTruth: OneTruthResult | null = null;
if (sections.has('one-truth')) {
  log('\n== one truth: this checkout beside the commit before the rule (issue 38) ==');
  oneTruth = await runOneTruthBench({ databaseUrl: url, quick, log });
}
let tracing: TracingResult | null = null;
if (sections.has('tracing')) {
  log('\n== tracing: OpenTelemetry off and on, side by side (issue 44) ==');
  tracing = await runTracingBench({ databaseUrl: url, quick, log });
}
let breakdown: Breakdown | null = null;
if (sections.has('breakdown')) {
  log("\n== breakdown: where a lone call's time goes (issue 42) ==");
  breakdown = await runBreakdown({ databaseUrl: url, samples: quick ? 600 : 3000, peer: !values['no-peer'], projector: values.projector, log });
}
run.seconds = (Date.now() - started) / 1000;

log(`\n${describeRun(run)}\n`);
log(mainTable(run));
const checks = ledgerCheckLines(run);
if (checks.length) log(`\nLedger checks:\n${checks.join('\n')}`);
if (run.ledger) log(`\nEvent store appends and rebuilds:\n${formatLedgerTable(run.ledger)}`);
if (corrections) log(`\nCorrections:\n${correctionsTable(corrections)}`);
if (finance) log(`\nFinance reads:\n${financeTable(finance)}\n\n${financeTargets(finance).join('\n')}`);
if (oneTruth) log(`\nOne truth across processes:\n${oneTruthTable(oneTruth)}`);
if (tracing) log(`\nTracing off and on:\n${tracingTable(tracing)}`);
if (breakdown) log(`\nWhere a lone call's time goes:\n${breakdownTable(breakdown)}`);
const errors = [
  ...(run.gateway?.errors ?? []),
  ...(run.growth?.errors ?? []),
  ...(corrections?.flatMap((c) => c.errors) ?? []),
  ...(finance?.flatMap((f) => f.errors) ?? []),
];
if (errors.length) log(`\nERRORS:\n${errors.map((e) => `- ${e}`).join('\n')}`);
if (!values['no-write']) {
  const path = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
  // The results block holds all three sections: a run of only some of them would erase the others'
  // figures, so it is printed and not written.
  if (run.gateway && run.growth && run.ledger) writeBenchmarksFile(path, run);
  else if (run.gateway || run.growth || run.ledger) log('(a run of only some of gateway, growth and ledger does not rewrite the results block)');
  if (corrections) writeCorrectionsBlock(path, corrections, `${run.date}, ${run.machine.nproc} cores, load average ${run.loadAtStart.toFixed(2)} at the start`);
  if (finance) writeFinanceBlock(path, finance, `${run.date}, ${run.machine.nproc} cores, load average ${run.loadAtStart.toFixed(2)} at the start`);
  if (oneTruth) writeOneTruthBlock(path, oneTruth, `${run.date}, ${run.machine.nproc} cores, load average ${run.loadAtStart.toFixed(2)} at the start`);
  if (tracing) writeTracingBlock(path, tracing, `${run.date}, ${run.machine.nproc} cores, load average ${run.loadAtStart.toFixed(2)} at the start`);
  if (breakdown) writeBreakdownBlock(path, breakdown);
  log(`\nwritten to ${path}`);
}
if (values.json) log(JSON.stringify(run, null, 2));
log(`\ntotal ${Math.round(run.seconds)} s`);
// A run whose ledger did not match what the clients saw is a failed run.
process.exit(errors.length ? 1 : 0);
