// What "one truth across processes" costs (issue 38): the same gateway built from a baseline commit
// (before the rule) and from this checkout, side by side in one run, each on PostgreSQL with
// metering on, in front of the same mock upstream.
//   - c=1 added latency: the mock called directly and both gateways, interleaved in blocks of 100
//     calls (so drift of the machine hits all three alike); added = p50 through a gateway minus
//     p50 direct.
//   - c=64 throughput: each gateway in turn, alternated over two rounds, same requests.
//   - the rate of confirmations: this checkout's counters of cached states confirmed against the
//     log, and how many had moved.
// The baseline is exported with `git archive` into a temporary folder (its node_modules linked to
// this checkout's) and built there.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { type AutocannonResult, type SequentialResult } from './load.ts';
import { runLoad } from './processes.ts';
import { writeMarkedBlock } from './report.ts';
import { directRequest, gatewayMetrics, openBenchAccount, startMock, startTollgate, tollgateRequest, type Mock, type Tollgate } from './targets.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The commit before the rule: the last one whose gateways answered refusals from their caches. */
export const ONE_TRUTH_BASELINE = '1dc0bc8';

export interface OneTruthResult {
  baseline: string;
  head: string;
  c1: { samples: number; directP50: number; before: { p50: number; p99: number }; after: { p50: number; p99: number } };
  c64: Array<{ round: number; target: 'before' | 'after'; perSecond: number; ok: number; failed: number; p99: number }>;
  confirmations: { calls: number; checked: number; moved: number };
  load: number;
}

function exportTree(ref: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-baseline-'));
  execFileSync('bash', ['-c', `git archive ${ref} | tar -x -C ${dir}`], { cwd: ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

async function counter(gw: Tollgate, name: string): Promise<number> {
  const text = await gatewayMetrics(gw);
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

export async function runOneTruthBench(o: { databaseUrl: string; quick?: boolean; baseline?: string; log?: (line: string) => void }): Promise<OneTruthResult> {
  const log = o.log ?? ((l: string) => console.log(l));
  const baseline = o.baseline ?? ONE_TRUTH_BASELINE;
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  const samples = o.quick ? 600 : 3000;
  const c64Requests = o.quick ? 6000 : 20_000;
  const tree = exportTree(baseline);
  let mock: Mock | null = null;
  const gateways: Tollgate[] = [];
  try {
    mock = await startMock();
    const before = await startTollgate({ databaseUrl: o.databaseUrl, mock, root: tree });
    gateways.push(before);
    const after = await startTollgate({ databaseUrl: o.databaseUrl, mock });
    gateways.push(after);
    log(`one truth: baseline ${baseline} pid ${before.proc.pid}, this checkout (${head}) pid ${after.proc.pid}, mock pid ${mock.proc.pid}`);
    const accounts = { before: await openBenchAccount(before, 'c1'), after: await openBenchAccount(after, 'c1') };
    const heavyAccounts = { before: await openBenchAccount(before, 'c64'), after: await openBenchAccount(after, 'c64') };
    const target = (name: 'before' | 'after', account = accounts[name]) => ({ ...tollgateRequest(name === 'before' ? before : after, account, false), name });
    for (const name of ['before', 'after'] as const)
      await runLoad<AutocannonResult>({ kind: 'autocannon', target: target(name), connections: 16, amount: o.quick ? 1500 : 4000 });

    const checked0 = await counter(after, 'tollgate_ledger_confirmations_total');
    const moved0 = await counter(after, 'tollgate_ledger_confirmations_moved_total');
    const seq = await runLoad<SequentialResult>({
      kind: 'sequential',
      targets: [directRequest(mock, false), target('before'), target('after')],
      samples,
      warmup: 100,
      block: 100,
      stream: false,
    });
    const checked = (await counter(after, 'tollgate_ledger_confirmations_total')) - checked0;
    const moved = (await counter(after, 'tollgate_ledger_confirmations_moved_total')) - moved0;
    const p = (name: string) => ({ p50: seq.perTarget[name].total.p50, p99: seq.perTarget[name].total.p99 });
    const c1 = { samples, directP50: seq.perTarget.direct.total.p50, before: p('before'), after: p('after') };
    for (const name of ['before', 'after']) {
      const failures = seq.perTarget[name].failures;
      if (failures) throw new Error(`c=1: ${name} had ${failures} failed calls (${JSON.stringify(seq.perTarget[name].statuses)})`);
    }
    log(
      `c=1 added p50: baseline +${(c1.before.p50 - c1.directP50).toFixed(3)} ms, this checkout +${(c1.after.p50 - c1.directP50).toFixed(3)} ms (direct p50 ${c1.directP50.toFixed(3)} ms, ${samples} calls each)`,
    );

    const c64: OneTruthResult['c64'] = [];
    for (const round of [1, 2]) {
      for (const name of round === 1 ? (['before', 'after'] as const) : (['after', 'before'] as const)) {
        const r = await runLoad<AutocannonResult>({ kind: 'autocannon', target: target(name, heavyAccounts[name]), connections: 64, amount: c64Requests });
        const failed = r.non2xx + r.errors + r.timeouts;
        c64.push({ round, target: name, perSecond: r.perSecond, ok: r.ok, failed, p99: r.latencyMs.p99 });
        log(
          `c=64 round ${round} ${name === 'before' ? 'baseline' : 'this checkout'}: ${Math.round(r.perSecond)} req/s, ${r.ok} ok, ${failed} failed, p99 ${r.latencyMs.p99} ms`,
        );
      }
    }
    return { baseline, head, c1, c64, confirmations: { calls: samples, checked, moved }, load: os.loadavg()[0] };
  } finally {
    for (const g of gateways) await g.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    rmSync(tree, { recursive: true, force: true });
  }
}

/** The section's table for BENCHMARKS.md: ratios of this checkout to the baseline, with the method beside them. */
export function oneTruthTable(r: OneTruthResult): string {
  const added = (x: { p50: number }) => x.p50 - r.c1.directP50;
  const mean = (t: 'before' | 'after') => r.c64.filter((f) => f.target === t).reduce((n, f) => n + f.perSecond, 0) / 2;
  const rows = [
    `| | baseline ${r.baseline} | this checkout ${r.head} | ratio |`,
    '|---|---:|---:|---:|',
    `| c=1 added p50 (ms) | +${added(r.c1.before).toFixed(3)} | +${added(r.c1.after).toFixed(3)} | ${(added(r.c1.after) / added(r.c1.before)).toFixed(2)}× |`,
    `| c=1 p99 (ms) | ${r.c1.before.p99.toFixed(3)} | ${r.c1.after.p99.toFixed(3)} | ${(r.c1.after.p99 / r.c1.before.p99).toFixed(2)}× |`,
    ...[1, 2].map((round) => {
      const b = r.c64.find((f) => f.round === round && f.target === 'before')!;
      const a = r.c64.find((f) => f.round === round && f.target === 'after')!;
      return `| c=64 req/s, round ${round} | ${Math.round(b.perSecond)} | ${Math.round(a.perSecond)} | ${(a.perSecond / b.perSecond).toFixed(2)}× |`;
    }),
    `| c=64 req/s, mean | ${Math.round(mean('before'))} | ${Math.round(mean('after'))} | ${(mean('after') / mean('before')).toFixed(2)}× |`,
  ];
  return [
    ...rows,
    '',
    `Method: one run, both gateways built from their commits and started side by side on PostgreSQL (one gateway each, projections in-process, metering on), in front of one mock upstream that answers at once. c=1: ${r.c1.samples} non-streamed chat calls per target, the mock direct and both gateways interleaved in blocks of 100 (direct p50 ${r.c1.directP50.toFixed(3)} ms); added = gateway p50 − direct p50. c=64: autocannon, 64 connections, each gateway in turn, alternated over two rounds. Load average at the end ${r.load.toFixed(2)}.`,
    `Confirmations on this checkout during the c=1 phase: ${r.confirmations.checked} cached states confirmed for ${r.confirmations.calls} calls (${r.confirmations.moved} had moved): a call that is not refused needs none, and nothing is read per call for keys, prices or channels (a change to them is answered once every gateway has read it).`,
  ].join('\n');
}

export function writeOneTruthBlock(path: string, r: OneTruthResult, when: string): void {
  writeMarkedBlock(path, 'one-truth', `Last run: ${when}.\n\n${oneTruthTable(r)}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { parseArgs } = await import('node:util');
  const { values } = parseArgs({ options: { quick: { type: 'boolean' }, baseline: { type: 'string' }, write: { type: 'boolean' } } });
  const r = await runOneTruthBench({
    databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    quick: values.quick,
    baseline: values.baseline,
  });
  console.log(`\n${oneTruthTable(r)}`);
  if (values.write)
    writeOneTruthBlock(fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url)), r, `${new Date().toISOString()}, ${os.cpus().length} cores`);
}
