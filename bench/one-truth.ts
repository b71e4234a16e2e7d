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
import { writeMarkedBlock } from './report.ts';
import { gatewayMetrics, startMock, startTollgate, type Mock, type Tollgate } from './targets.ts';
import { runSideBySide, sideBySideRows, type SideBySide } from './side-by-side.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The commit before the rule: the last one whose gateways answered refusals from their caches. */
export const ONE_TRUTH_BASELINE = '1dc0bc8';

export interface OneTruthResult extends SideBySide {
  baseline: string;
  head: string;
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
    let checked0 = 0;
    let moved0 = 0;
    let checked = 0;
    let moved = 0;
    const { c1, c64 } = await runSideBySide({
      mock,
      gateways: { before, after },
      names: { before: 'baseline', after: 'this checkout' },
      quick: o.quick,
      log,
      aroundC1: {
        before: async () => {
          checked0 = await counter(after, 'tollgate_ledger_confirmations_total');
          moved0 = await counter(after, 'tollgate_ledger_confirmations_moved_total');
        },
        after: async () => {
          checked = (await counter(after, 'tollgate_ledger_confirmations_total')) - checked0;
          moved = (await counter(after, 'tollgate_ledger_confirmations_moved_total')) - moved0;
        },
      },
    });
    return { baseline, head, c1, c64, confirmations: { calls: c1.samples, checked, moved }, load: os.loadavg()[0] };
  } finally {
    for (const g of gateways) await g.stop().catch(() => undefined);
    await mock?.proc.stop().catch(() => undefined);
    rmSync(tree, { recursive: true, force: true });
  }
}

/** The section's table for BENCHMARKS.md: ratios of this checkout to the baseline, with the method beside them. */
export function oneTruthTable(r: OneTruthResult): string {
  const rows = sideBySideRows(r, { before: `baseline ${r.baseline}`, after: `this checkout ${r.head}` });
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
