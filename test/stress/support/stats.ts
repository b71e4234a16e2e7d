// Small statistics for the stress reports: percentiles and fixed time windows.

/** The p-th percentile (0..100) by nearest rank; NaN for no values. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}

export const mean = (values: number[]): number => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN);

/** Groups samples into consecutive windows of `windowMs` from `start`; empty windows stay empty. */
export function byWindow<T>(samples: T[], at: (s: T) => number, start: number, windowMs: number, windows: number): T[][] {
  const out: T[][] = Array.from({ length: windows }, () => []);
  for (const s of samples) {
    const i = Math.floor((at(s) - start) / windowMs);
    if (i >= 0 && i < windows) out[i].push(s);
  }
  return out;
}

export const mb = (bytes: number): string => `${(bytes / 1048576).toFixed(0)} MB`;
export const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)} ms` : 'n/a');
