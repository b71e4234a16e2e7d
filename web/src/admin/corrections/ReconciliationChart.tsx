// The reconciliation chart of a correction: per account, what is billed now and what the
// correction makes it, as pairs of horizontal bars in SVG, sized to its frame (redrawn when the
// width changes). One image for assistive technology (role="img") whose title and description read
// out every figure; the table beside it holds the same numbers.
import { useEffect, useRef, useState } from 'preact/hooks';
import { niceScale } from '../../shared/components/StackedBarChart.tsx';
import { compact, fmt, signed } from '../../shared/format.ts';
import type { CorrectionReport, ReconciledAccount } from '../api/types.ts';

/** At most this many accounts are drawn (those the correction moves most); the table lists all. */
export const MAX_BARS = 24;

/** The accounts to draw: all when few, else those with the largest differences, in report order. */
export function chartAccounts(accounts: ReconciledAccount[]): ReconciledAccount[] {
  if (accounts.length <= MAX_BARS) return accounts;
  const keep = new Set(
    [...accounts]
      .sort((a, b) => Math.abs(b.difference) - Math.abs(a.difference))
      .slice(0, MAX_BARS)
      .map((a) => a.accountId),
  );
  return accounts.filter((a) => keep.has(a.accountId));
}

function describe(report: CorrectionReport, shown: ReconciledAccount[]): string {
  const t = report.totals;
  if (!shown.length) return 'No charge in this window: nothing to draw.';
  const parts = shown.map((a) => `${a.accountId}: billed now ${fmt(a.billedNow)}, corrected ${fmt(a.corrected)}, difference ${signed(a.difference)}`);
  const more =
    report.accounts.length > shown.length
      ? ` The ${shown.length} accounts with the largest differences of ${report.accounts.length} are drawn; the table lists all.`
      : '';
  return `${parts.join('; ')}. In total billed now ${fmt(t.billedNow)}, corrected ${fmt(t.corrected)}, difference ${signed(t.difference)}.${more}`;
}

export function ReconciliationChart({ report, idBase = 'recon-chart' }: { report: CorrectionReport; idBase?: string }) {
  const frame = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const node = frame.current;
    if (!node) return;
    setWidth(Math.floor(node.clientWidth));
    const observer = new ResizeObserver(() => setWidth(Math.floor(node.clientWidth)));
    observer.observe(node);
    return () => observer.disconnect();
  }, []);

  const shown = chartAccounts(report.accounts);
  const W = Math.max(260, width || 640);
  const narrow = W < 520;
  const m = { top: 26, right: narrow ? 60 : 96, bottom: 24, left: narrow ? 92 : 150 };
  const barH = 12;
  const gap = 3;
  const groupH = barH * 2 + gap + 14;
  const H = m.top + m.bottom + Math.max(1, shown.length) * groupH;
  const pw = W - m.left - m.right;
  const max = Math.max(0, ...shown.flatMap((a) => [a.billedNow, a.corrected]));
  const { top, step } = niceScale(max);
  const x = (v: number) => m.left + (Math.max(0, v) / top) * pw;
  const ticks: number[] = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);

  return (
    <div class="chart-host" ref={frame}>
      {width > 0 && (
        <svg
          class="recon-chart"
          width={W}
          height={H}
          viewBox={`0 0 ${W} ${H}`}
          role="img"
          focusable="false"
          aria-labelledby={`${idBase}-title ${idBase}-desc`}
          data-max={top}
        >
          <title id={`${idBase}-title`}>{`Billed now and corrected tokens per account, ${report.modelId}`}</title>
          <desc id={`${idBase}-desc`}>{describe(report, shown)}</desc>
          {ticks.map((v, i) => {
            const xx = Math.round(x(v)) + 0.5;
            const last = i === ticks.length - 1;
            return (
              <g key={v}>
                <line class={v === 0 ? 'axis' : 'grid'} x1={xx} x2={xx} y1={m.top - 4} y2={H - m.bottom + 4} />
                {/* The last value ends at its line, clear of the difference column's head. */}
                <text class="tick" x={xx} y={m.top - 10} text-anchor={v === 0 ? 'start' : last ? 'end' : 'middle'}>
                  {compact(v)}
                </text>
              </g>
            );
          })}
          <text class="diff-head" x={W - 4} y={m.top - 10} text-anchor="end">
            {narrow ? 'Diff.' : 'Difference'}
          </text>
          {shown.map((a, i) => {
            const y0 = m.top + i * groupH + 6;
            const cut = narrow ? 12 : 22;
            const name = a.accountId.length > cut ? `${a.accountId.slice(0, cut - 1)}…` : a.accountId;
            const textY = y0 + barH + gap / 2 + 4;
            return (
              <g key={a.accountId} class="account" data-account={a.accountId}>
                <text class="name" x={m.left - 8} y={textY} text-anchor="end">
                  {name}
                </text>
                {(
                  [
                    [0, 'billed-now', a.billedNow],
                    [1, 'corrected', a.corrected],
                  ] as const
                ).map(([k, kind, value]) => (
                  <rect
                    key={kind}
                    class={`bar ${kind}`}
                    x={m.left}
                    y={y0 + k * (barH + gap)}
                    width={Math.max(value > 0 ? 1.5 : 0, x(value) - m.left)}
                    height={barH}
                    rx={2}
                    data-kind={kind}
                    data-value={value}
                  >
                    <title>{`${a.accountId} · ${kind === 'corrected' ? 'corrected' : 'billed now'}: ${fmt(value)} tokens`}</title>
                  </rect>
                ))}
                <text
                  class={`diff ${a.difference < 0 ? 'down' : a.difference > 0 ? 'up' : 'same'}`}
                  x={W - 4}
                  y={textY}
                  text-anchor="end"
                  data-value={a.difference}
                >
                  {signed(a.difference)}
                </text>
              </g>
            );
          })}
          {shown.length === 0 && (
            <text class="empty-note" x={m.left + pw / 2} y={m.top + groupH / 2} text-anchor="middle">
              No charge in this window
            </text>
          )}
        </svg>
      )}
    </div>
  );
}
