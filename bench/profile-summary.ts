// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by file, and total
// (inclusive) time of the functions named on the command line.
//   node --import tsx bench/profile-summary.ts <file.cpuprofile> [--top 40] [--inclusive name,name]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export function summariseProfile(path: string, top = 40, inclusiveNames: string[] = [], inclusiveFiles: string[] = []): string {
  const p = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  // Percentages are of busy time: idle samples say nothing about where the CPU went.
  const idle = [...selfUs].filter(([id]) => byId.get(id)!.callFrame.functionName === '(idle)').reduce((a, [, us]) => a + us, 0);
  const busy = total - idle;
  const short = (url: string) =>
    url
      .replace(/^file:\/\//, '')
      .replace(/.*\/node_modules\//, 'npm:')
      .replace(/.*\/work\/main\//, '');
  const label = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    fn.set(label(n), (fn.get(label(n)) ?? 0) + us);
    const f = n.callFrame.url ? short(n.callFrame.url).replace(/^(npm:(@[^/]+\/)?[^/]+).*/, '$1') : `(${n.callFrame.functionName})`;
    file.set(f, (file.get(f) ?? 0) + us);
  }
  // Inclusive time: a sample counts for a function if it is anywhere on the sample's stack.
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inclusive = new Map<string, number>(inclusiveNames.map((n) => [n, 0]));
  if (inclusiveNames.length) {
    for (const [id, us] of selfUs) {
      const seen = new Set<string>();
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        const name = byId.get(cur)!.callFrame.functionName;
        if (inclusive.has(name) && !seen.has(name)) {
          seen.add(name);
          inclusive.set(name, inclusive.get(name)! + us);
        }
      }
    }
  }
  // Inclusive time by file: a sample counts for a file if any frame of its stack is in it.
  const byFile = new Map<string, number>(inclusiveFiles.map((f) => [f, 0]));
  if (inclusiveFiles.length) {
    for (const [id, us] of selfUs) {
      const seen = new Set<string>();
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        const url = byId.get(cur)!.callFrame.url;
        for (const f of inclusiveFiles)
          if (url.includes(f) && !seen.has(f)) {
            seen.add(f);
            byFile.set(f, byFile.get(f)! + us);
          }
      }
    }
  }
  const pct = (us: number) => `${((us * 100) / busy).toFixed(1).padStart(5)} %`;
  const lines = [
    `${path}: ${(total / 1e6).toFixed(2)} s sampled, ${(busy / 1e6).toFixed(2)} s busy (percentages are of busy time)`,
    '',
    'self time by file/package:',
  ];
  for (const [k, v] of [...file]
    .filter(([k]) => k !== '((idle))')
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25))
    lines.push(`  ${pct(v)}  ${k}`);
  lines.push('', 'self time by function:');
  for (const [k, v] of [...fn]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`  ${pct(v)}  ${k}`);
  if (inclusiveNames.length) {
    lines.push('', 'inclusive time:');
    for (const [k, v] of inclusive) lines.push(`  ${pct(v)}  ${k}`);
  }
  if (inclusiveFiles.length) {
    lines.push('', 'inclusive time by file:');
    for (const [k, v] of byFile) lines.push(`  ${pct(v)}  ${k}`);
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const incAt = args.indexOf('--inclusive');
  const filesAt = args.indexOf('--inclusive-files');
  console.log(
    summariseProfile(
      args[0],
      topAt >= 0 ? Number(args[topAt + 1]) : 40,
      incAt >= 0 ? args[incAt + 1].split(',') : [],
      filesAt >= 0 ? args[filesAt + 1].split(',') : [],
    ),
  );
}
