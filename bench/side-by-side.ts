// Two gateways side by side in one run, in front of one mock upstream (bench/one-truth.ts: two
// commits; bench/tracing.ts: tracing off and on):
//   - c=1: the mock called directly and both gateways, interleaved in blocks of 100 calls (so
//     drift of the machine hits all three alike); added = p50 through a gateway minus p50 direct;
//   - c=64: autocannon, 64 connections, each gateway in turn, alternated over two rounds.
import { type AutocannonResult, type SequentialResult } from './load.ts';
import { runLoad } from './processes.ts';
import { directRequest, openBenchAccount, tollgateRequest, type Mock, type Tollgate } from './targets.ts';

export type Side = 'before' | 'after';

export interface SideBySide {
  c1: { samples: number; directP50: number; before: { p50: number; p99: number }; after: { p50: number; p99: number } };
  c64: Array<{ round: number; target: Side; perSecond: number; ok: number; failed: number; p99: number }>;
}

export interface SideBySideRun {
  mock: Mock;
  gateways: Record<Side, Tollgate>;
  /** What the log calls each side. */
  names: Record<Side, string>;
  quick?: boolean;
  log: (line: string) => void;
  /** Runs around the c=1 phase (one-truth reads counters there). */
  aroundC1?: { before(): Promise<void>; after(): Promise<void> };
}

export async function runSideBySide(o: SideBySideRun): Promise<SideBySide> {
  const samples = o.quick ? 600 : 3000;
  const c64Requests = o.quick ? 6000 : 20_000;
  const { before, after } = o.gateways;
  const accounts = { before: await openBenchAccount(before, 'c1'), after: await openBenchAccount(after, 'c1') };
  const heavyAccounts = { before: await openBenchAccount(before, 'c64'), after: await openBenchAccount(after, 'c64') };
  const target = (name: Side, account = accounts[name]) => ({ ...tollgateRequest(o.gateways[name], account, false), name });
  // Warm-up: JIT, connection pools, caches.
  for (const name of ['before', 'after'] as const)
    await runLoad<AutocannonResult>({ kind: 'autocannon', target: target(name), connections: 16, amount: o.quick ? 1500 : 4000 });

  await o.aroundC1?.before();
  const seq = await runLoad<SequentialResult>({
    kind: 'sequential',
    targets: [directRequest(o.mock, false), target('before'), target('after')],
    samples,
    warmup: 100,
    block: 100,
    stream: false,
  });
  await o.aroundC1?.after();
  const p = (name: string) => ({ p50: seq.perTarget[name].total.p50, p99: seq.perTarget[name].total.p99 });
  const c1 = { samples, directP50: seq.perTarget.direct.total.p50, before: p('before'), after: p('after') };
  for (const name of ['before', 'after']) {
    const failures = seq.perTarget[name].failures;
    if (failures) throw new Error(`c=1: ${name} had ${failures} failed calls (${JSON.stringify(seq.perTarget[name].statuses)})`);
  }
  o.log(
    `c=1 added p50: ${o.names.before} +${(c1.before.p50 - c1.directP50).toFixed(3)} ms, ${o.names.after} +${(c1.after.p50 - c1.directP50).toFixed(3)} ms (direct p50 ${c1.directP50.toFixed(3)} ms, ${samples} calls each)`,
  );

  const c64: SideBySide['c64'] = [];
  for (const round of [1, 2]) {
    for (const name of round === 1 ? (['before', 'after'] as const) : (['after', 'before'] as const)) {
      const r = await runLoad<AutocannonResult>({ kind: 'autocannon', target: target(name, heavyAccounts[name]), connections: 64, amount: c64Requests });
      const failed = r.non2xx + r.errors + r.timeouts;
      c64.push({ round, target: name, perSecond: r.perSecond, ok: r.ok, failed, p99: r.latencyMs.p99 });
      o.log(`c=64 round ${round} ${o.names[name]}: ${Math.round(r.perSecond)} req/s, ${r.ok} ok, ${failed} failed, p99 ${r.latencyMs.p99} ms`);
    }
  }
  return { c1, c64 };
}

/** The rows of a side-by-side table: the two sides' figures and their ratio (after ÷ before). */
export function sideBySideRows(r: SideBySide, titles: Record<Side, string>): string[] {
  const added = (x: { p50: number }) => x.p50 - r.c1.directP50;
  const mean = (t: Side) => r.c64.filter((f) => f.target === t).reduce((n, f) => n + f.perSecond, 0) / 2;
  return [
    `| | ${titles.before} | ${titles.after} | ratio |`,
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
}
