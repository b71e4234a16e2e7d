// The results of `npm run bench` as one Markdown table (gateway comparison, growth, rebuild), and
// the block of BENCHMARKS.md it rewrites: everything between the two marker comments.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import type { GatewayBenchResult, ThroughputFigure } from './gateway.ts';
import type { GrowthResult } from './growth.ts';
import type { LedgerBenchResult } from './ledger.ts';
import { formatTable as formatLedgerTable } from './ledger.ts';
import type { MachineInfo } from './machine.ts';
import type { Summary } from './load.ts';

export const MARK_BEGIN = '<!-- bench:results:begin (written by npm run bench: edits here are overwritten) -->';
export const MARK_END = '<!-- bench:results:end -->';

// Issue #17's targets: added latency at c=1 (p50 and p99, an upstream answering at once and one
// answering after 50 ms) below the peer's, twice its throughput at c=64.
export const GATEWAY_TARGETS = {
  throughputVsPeer: 2,
  rssMiB: 200,
  growthRatio: 1.1,
  rebuildPerSecond: 100_000,
};

export interface BenchRun {
  date: string;
  quick: boolean;
  machine: MachineInfo;
  loadAtStart: number;
  seconds: number;
  gateway: GatewayBenchResult | null;
  growth: GrowthResult | null;
  ledger: LedgerBenchResult | null;
}

const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : v < 10 ? v.toFixed(3) : v.toFixed(1));
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || !b ? '—' : `${(a / b).toFixed(2)}×`);
const yes = (ok: boolean) => (ok ? 'yes' : '**no**');

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

/** The comparison as rows: measure, direct, Tollgate, peer, Tollgate ÷ peer, target, met. */
export function mainTable(run: BenchRun): string {
  const rows: string[][] = [['measure', 'direct (mock)', 'Tollgate', 'Portkey', 'Tollgate ÷ Portkey', 'target', 'met']];
  const g = run.gateway;
  if (g) {
    const lat = (n: string) => g.latency[n] as Summary | undefined;
    const d = lat('direct');
    const t = lat('tollgate');
    const p = lat('portkey');
    rows.push(['c=1 chat, non-streaming: latency p50 (ms)', ms(d?.p50), ms(t?.p50), ms(p?.p50), ratio(t?.p50, p?.p50), '', '']);
    rows.push(['c=1 chat, non-streaming: latency p99 (ms)', ms(d?.p99), ms(t?.p99), ms(p?.p99), ratio(t?.p99, p?.p99), '', '']);
    rows.push(...addedLatencyRows('added latency over direct', d, t, p));
    // The same load measured by wrk (a user's load tool), beside the bench's own client.
    const wrk = (n: string) => g.wrk?.[n]?.latencyMs;
    if (g.wrk) {
      const [wd, wt, wp] = [wrk('direct'), wrk('tollgate'), wrk('portkey')];
      rows.push(['c=1 chat, non-streaming, wrk: latency p50 (ms)', ms(wd?.p50), ms(wt?.p50), ms(wp?.p50), ratio(wt?.p50, wp?.p50), '', '']);
      rows.push(['c=1 chat, non-streaming, wrk: latency p99 (ms)', ms(wd?.p99), ms(wt?.p99), ms(wp?.p99), ratio(wt?.p99, wp?.p99), '', '']);
    }
    const slow = (n: string) => g.latencySlow?.[n] as Summary | undefined;
    const [sd, st, sp] = [slow('direct'), slow('tollgate'), slow('portkey')];
    if (st) {
      const upstream = `upstream answers after ${g.slowUpstreamMs} ms`;
      rows.push([`c=1, ${upstream}: latency p50 (ms)`, ms(sd?.p50), ms(st.p50), ms(sp?.p50), ratio(st.p50, sp?.p50), '', '']);
      rows.push(...addedLatencyRows(`added latency, ${upstream}`, sd, st, sp));
    }
    const tt = (n: string) => g.ttft[n]?.firstToken;
    const [td, tg, tp] = [tt('direct'), tt('tollgate'), tt('portkey')];
    rows.push(['c=1 chat, streaming: time to first token p50 (ms)', ms(td?.p50), ms(tg?.p50), ms(tp?.p50), ratio(tg?.p50, tp?.p50), '', '']);
    rows.push(['c=1 chat, streaming: time to first token p99 (ms)', ms(td?.p99), ms(tg?.p99), ms(tp?.p99), ratio(tg?.p99, tp?.p99), '', '']);
    if (td && tg)
      rows.push([
        'added time to first token, p50 / p99 (ms)',
        '',
        `${ms(tg.p50 - td.p50)} / ${ms(tg.p99 - td.p99)}`,
        tp ? `${ms(tp.p50 - td.p50)} / ${ms(tp.p99 - td.p99)}` : '—',
        tp ? ratio(tg.p50 - td.p50, tp.p50 - td.p50) : '—',
        '',
        '',
      ]);
    const by = (list: ThroughputFigure[], n: string) => list.find((f) => f.target === n);
    const thr = (f: ThroughputFigure | undefined) => (f ? `${int(f.perSecond)}${f.failed ? ` (${int(f.failed)} errors)` : ''}` : '—');
    const [c64d, c64t, c64p] = [by(g.throughput, 'direct'), by(g.throughput, 'tollgate'), by(g.throughput, 'portkey')];
    if (c64t) {
      const ok = c64t.failed === 0 && !!c64p && c64t.perSecond >= GATEWAY_TARGETS.throughputVsPeer * c64p.perSecond;
      rows.push([
        'c=64 chat, non-streaming: throughput, no errors (req/s)',
        thr(c64d),
        thr(c64t),
        thr(c64p),
        ratio(c64t.perSecond, c64p?.perSecond),
        `≥ ${GATEWAY_TARGETS.throughputVsPeer}× Portkey, no errors`,
        yes(ok),
      ]);
      const cpu = (f: ThroughputFigure | undefined) =>
        f?.cpuPer1000.server == null
          ? '—'
          : `${f.cpuPer1000.server.toFixed(2)}${f.cpuPer1000.postgres != null ? ` + ${f.cpuPer1000.postgres.toFixed(2)} PostgreSQL` : ''}`;
      rows.push(['c=64: CPU seconds per 1000 requests (server process)', cpu(c64d), cpu(c64t), cpu(c64p), '', '', '']);
      rows.push([
        'c=64: latency p50 / p99 (ms, autocannon)',
        c64d ? `${c64d.latencyMs.p50} / ${c64d.latencyMs.p99}` : '—',
        `${c64t.latencyMs.p50} / ${c64t.latencyMs.p99}`,
        c64p ? `${c64p.latencyMs.p50} / ${c64p.latencyMs.p99}` : '—',
        '',
        '',
        '',
      ]);
    }
    const [r256d, r256t, r256p] = [by(g.rss, 'direct'), by(g.rss, 'tollgate'), by(g.rss, 'portkey')];
    if (r256t) {
      rows.push([
        'c=256: peak RSS of the server process (MiB)',
        r256d ? int(r256d.rss.peakMiB) : '—',
        int(r256t.rss.peakMiB),
        r256p ? int(r256p.rss.peakMiB) : '—',
        ratio(r256t.rss.peakMiB, r256p?.rss.peakMiB),
        `≤ ${GATEWAY_TARGETS.rssMiB} MiB`,
        yes(r256t.rss.peakMiB <= GATEWAY_TARGETS.rssMiB),
      ]);
      rows.push([
        'c=256: throughput (req/s)',
        thr(r256d),
        thr(r256t),
        thr(r256p),
        ratio(r256t.perSecond, r256p?.perSecond),
        r256t.failed ? 'no errors' : '',
        r256t.failed ? '**no**' : '',
      ]);
    }
  }
  const gr = run.growth;
  if (gr) {
    rows.push([
      `c=1 latency p50 with ${int(gr.events)} events vs empty ledger (ms)`,
      '',
      `${ms(gr.full.p50)} vs ${ms(gr.empty.p50)} (${gr.ratio.p50.toFixed(3)}×)`,
      '',
      '',
      `within ${Math.round((GATEWAY_TARGETS.growthRatio - 1) * 100)} %`,
      yes(gr.ratio.p50 <= GATEWAY_TARGETS.growthRatio && gr.ledgerOk),
    ]);
    rows.push([
      `c=1 latency p99 with ${int(gr.events)} events vs empty ledger (ms)`,
      '',
      `${ms(gr.full.p99)} vs ${ms(gr.empty.p99)} (${gr.ratio.p99.toFixed(3)}×)`,
      '',
      '',
      '',
      '',
    ]);
  }
  const pg = run.ledger?.engines.find((e) => e.engine === 'postgres');
  for (const r of pg?.rebuild ?? []) {
    rows.push([
      `rebuild all projections on PostgreSQL, ${int(r.events)} events`,
      '',
      `${int(r.eventsPerSecond)} events/s (${r.seconds.toFixed(1)} s)`,
      '',
      '',
      `≥ ${int(GATEWAY_TARGETS.rebuildPerSecond)}/s`,
      yes(r.eventsPerSecond >= GATEWAY_TARGETS.rebuildPerSecond),
    ]);
  }
  return table(rows);
}

/** Added latency over the upstream alone, p50 and p99: the target is below the peer's (unjudged without it). */
function addedLatencyRows(label: string, d: Summary | undefined, t: Summary | undefined, p: Summary | undefined): string[][] {
  if (!d || !t) return [];
  return (['p50', 'p99'] as const).map((q) => {
    const added = t[q] - d[q];
    const peer = p ? p[q] - d[q] : undefined;
    return [`${label}, ${q} (ms)`, '', ms(added), ms(peer), ratio(added, peer), '< Portkey', peer === undefined ? '—' : yes(added < peer)];
  });
}

/** The lines that say whether the ledger matched what the load generator saw. */
export function ledgerCheckLines(run: BenchRun): string[] {
  const out: string[] = [];
  for (const c of run.gateway?.ledgerChecks ?? []) {
    out.push(
      `- ${c.phase}: ${int(c.expected)} successful responses, ${int(c.charged)} charges (${int(c.reserved)} holds, ${c.released} releases), ${int(c.billed)} tokens billed, expected ${int(c.expectedBilled)}: ${c.ok ? 'exact' : '**MISMATCH**'}`,
    );
  }
  if (run.growth)
    out.push(`- growth: ${run.growth.ledgerOk ? 'both gateways charged exactly their successful responses' : `**MISMATCH** ${run.growth.errors.join('; ')}`}`);
  return out;
}

export function describeRun(run: BenchRun): string {
  const m = run.machine;
  const g = run.gateway;
  const lines = [
    `Run of ${run.date}${run.quick ? ' (`--quick`: smaller samples, not for the record)' : ''}, ${Math.round(run.seconds)} s in all.`,
    '',
    `Machine: ${m.nproc} vCPUs (${m.cpu}), ${m.memoryGiB} GiB, Node ${m.node}; ${m.postgres ?? 'PostgreSQL not reached'}, on the same machine (loopback).`,
    `Load average (1 min) at the start: ${run.loadAtStart.toFixed(2)}${
      g
        ? `; before each gateway phase: ${Object.entries(g.load.byPhase)
            .map(([k, v]) => `${k} ${v.toFixed(2)}`)
            .join(', ')}`
        : ''
    }. Anything well above 0 means other work shared the ${m.nproc} cores.`,
  ];
  if (g?.floor) {
    lines.push(
      `Where Tollgate's c=1 time goes: ${g.floor.appendsPerRequest.toFixed(2)} event store appends per call (hold and charge share one when the reply comes within the hold's linger), ${g.floor.appendMeanMs.toFixed(3)} ms each on average (from its /metrics); a lone one-row commit on this PostgreSQL takes p50 ${g.floor.commitP50Ms.toFixed(3)} ms, p99 ${g.floor.commitP99Ms.toFixed(3)} ms (the WAL flush a durable append waits for).`,
    );
  }
  if (g) {
    lines.push(
      `Peer: @portkey-ai/gateway ${g.peerVersion ?? '(not measured)'}. Samples: ${int(g.settings.latencySamples)} sequential calls per target (c=1, interleaved in blocks of 100), ${int(g.settings.slowLatencySamples ?? 0)} with the ${g.slowUpstreamMs} ms upstream (blocks of 50), ${int(g.settings.ttftSamples)} streams per target, ${int(g.settings.c64Requests)} requests per target at c=64, ${int(g.settings.c256Requests)} at c=256. Tollgate: metering on, PostgreSQL synchronous_commit=${g.settings.synchronousCommit}, plan rate limit ${int(g.settings.rateLimitPerMinute)}/min.`,
    );
  }
  return lines.join('\n');
}

/** The whole generated block (between the markers). */
export function resultsBlock(run: BenchRun): string {
  const parts = [MARK_BEGIN, '', '### Latest run', '', describeRun(run), '', mainTable(run), ''];
  const checks = ledgerCheckLines(run);
  if (checks.length)
    parts.push(
      'Ledger checks after each phase (each successful Tollgate response must be exactly one charge of the exact price, no hold left open):',
      '',
      ...checks,
      '',
    );
  const errors = [...(run.gateway?.errors ?? []), ...(run.growth?.errors ?? [])];
  if (errors.length) parts.push('Errors during the run:', '', ...errors.map((e) => `- ${e}`), '');
  if (run.ledger) parts.push('Event store appends and rebuilds (`bench/ledger.ts`, same run):', '', formatLedgerTable(run.ledger), '');
  parts.push(MARK_END);
  return parts.join('\n');
}

/** Replaces the generated block in BENCHMARKS.md (or adds it after the first section). */
export function writeBenchmarksFile(path: string, run: BenchRun): void {
  const block = resultsBlock(run);
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmarks\n';
  const begin = text.indexOf(MARK_BEGIN.slice(0, 30));
  const end = text.indexOf(MARK_END);
  let next: string;
  if (begin >= 0 && end > begin) next = text.slice(0, begin) + block + text.slice(end + MARK_END.length);
  else {
    const firstSection = text.indexOf('\n## ');
    next = firstSection >= 0 ? `${text.slice(0, firstSection)}\n${block}\n${text.slice(firstSection)}` : `${text}\n${block}\n`;
  }
  writeFileSync(path, next);
}

/**
 * Writes `body` between the `bench:<name>` marker comments of BENCHMARKS.md (added at the end the
 * first time), so each section's last run replaces its own figures and no other's.
 */
export function writeMarkedBlock(path: string, name: string, body: string): void {
  const begin = `<!-- bench:${name}:begin (written by npm run bench: edits here are overwritten) -->`;
  const end = `<!-- bench:${name}:end -->`;
  const block = [begin, body, end].join('\n');
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmarks\n';
  const at = text.indexOf(begin);
  const to = text.indexOf(end);
  writeFileSync(path, at >= 0 && to > at ? `${text.slice(0, at)}${block}${text.slice(to + end.length)}` : `${text.trimEnd()}\n\n${block}\n`);
}
