// Summarises a V8 sampling heap profile (.heapprofile from bench/profile-hook.ts): bytes
// allocated by function, and by file or package, during the profiled phase.
//   node --import tsx bench/heap-summary.ts <file.heapprofile> [--top 30]
import { readFileSync } from 'node:fs';

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

export function summariseHeapProfile(path: string, top = 30): string {
  const root = (JSON.parse(readFileSync(path, 'utf8')) as { head: HeapNode }).head;
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  let total = 0;
  const short = (url: string) =>
    url
      .replace(/^file:\/\//, '')
      .replace(/.*\/node_modules\//, 'npm:')
      .replace(/.*\/work\/main\//, '');
  const walk = (n: HeapNode) => {
    if (n.selfSize) {
      total += n.selfSize;
      const label = `${n.callFrame.functionName || '(anonymous)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
      fn.set(label, (fn.get(label) ?? 0) + n.selfSize);
      const f = n.callFrame.url ? short(n.callFrame.url).replace(/^(npm:(@[^/]+\/)?[^/]+).*/, '$1') : '(native)';
      file.set(f, (file.get(f) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c);
  };
  walk(root);
  const mb = (b: number) => `${(b / 2 ** 20).toFixed(1).padStart(7)} MiB ${((b * 100) / total).toFixed(1).padStart(5)} %`;
  const lines = [`${path}: ${(total / 2 ** 20).toFixed(1)} MiB sampled allocations`, '', 'by file/package:'];
  for (const [k, v] of [...file].sort((a, b) => b[1] - a[1]).slice(0, 20)) lines.push(`  ${mb(v)}  ${k}`);
  lines.push('', 'by function:');
  for (const [k, v] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${mb(v)}  ${k}`);
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  console.log(summariseHeapProfile(args[0], topAt >= 0 ? Number(args[topAt + 1]) : 30));
}
