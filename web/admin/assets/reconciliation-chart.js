// The reconciliation chart of a correction: per account, what is billed now and what the
// correction makes it, as pairs of horizontal bars drawn in SVG (no library). It is one image
// for assistive technology (role="img") with a title and a description that read out every
// figure; the table beside it holds the same numbers.
import { compact, fmt, svg } from '../../app/assets/common.js';

/** At most this many accounts are drawn (those the correction moves most); the table lists all. */
export const MAX_BARS = 24;

const signed = (n) => (n > 0 ? `+${fmt(n)}` : n < 0 ? `−${fmt(-n)}` : '0');

/** A round axis maximum and a tick step for values up to `max`. */
function niceScale(max, ticks = 4) {
  if (!(max > 0)) return { top: 1, step: 1 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  return { top: Math.ceil(max / step) * step, step };
}

/** The accounts to draw: all when few, else those with the largest differences, in report order. */
export function chartAccounts(accounts) {
  if (accounts.length <= MAX_BARS) return accounts;
  const keep = new Set(
    [...accounts]
      .sort((a, b) => Math.abs(b.difference) - Math.abs(a.difference))
      .slice(0, MAX_BARS)
      .map((a) => a.accountId),
  );
  return accounts.filter((a) => keep.has(a.accountId));
}

/**
 * Draws the chart for `report` (a reconciliation report) at `width` CSS pixels; `idBase` keeps
 * the title and description ids unique on the page.
 */
export function reconciliationChart(report, width, idBase = 'recon') {
  const shown = chartAccounts(report.accounts);
  const W = Math.max(260, Math.floor(width || 640));
  const narrow = W < 520;
  const label = narrow ? 92 : 150;
  const diffW = narrow ? 60 : 96;
  const m = { top: 26, right: diffW, bottom: 24, left: label };
  const barH = 12;
  const gap = 3;
  const groupH = barH * 2 + gap + 14;
  const H = m.top + m.bottom + Math.max(1, shown.length) * groupH;
  const pw = W - m.left - m.right;
  const max = Math.max(0, ...shown.flatMap((a) => [a.billedNow, a.corrected]));
  const { top, step } = niceScale(max);
  const x = (v) => m.left + (Math.max(0, v) / top) * pw;

  const t = report.totals;
  const title = svg('title', { id: `${idBase}-title` }, `Billed now and corrected tokens per account, ${report.modelId}`);
  const parts = shown.map((a) => `${a.accountId}: billed now ${fmt(a.billedNow)}, corrected ${fmt(a.corrected)}, difference ${signed(a.difference)}`);
  const more =
    report.accounts.length > shown.length
      ? ` The ${shown.length} accounts with the largest differences of ${report.accounts.length} are drawn; the table lists all.`
      : '';
  const desc = svg(
    'desc',
    { id: `${idBase}-desc` },
    shown.length
      ? `${parts.join('; ')}. In total billed now ${fmt(t.billedNow)}, corrected ${fmt(t.corrected)}, difference ${signed(t.difference)}.${more}`
      : 'No charge in this window: nothing to draw.',
  );
  const root = svg(
    'svg',
    {
      class: 'recon-chart',
      width: W,
      height: H,
      viewBox: `0 0 ${W} ${H}`,
      role: 'img',
      focusable: 'false',
      'aria-labelledby': `${idBase}-title ${idBase}-desc`,
      'data-max': top,
    },
    title,
    desc,
  );

  // Grid and axis values along the top.
  for (let v = 0; v <= top + step / 2; v += step) {
    const xx = Math.round(x(v)) + 0.5;
    const last = v + step > top + step / 2;
    root.append(svg('line', { class: v === 0 ? 'axis' : 'grid', x1: xx, x2: xx, y1: m.top - 4, y2: H - m.bottom + 4 }));
    // The last value ends at its line, clear of the difference column's head.
    root.append(svg('text', { class: 'tick', x: xx, y: m.top - 10, 'text-anchor': v === 0 ? 'start' : last ? 'end' : 'middle' }, compact(v)));
  }
  root.append(svg('text', { class: 'diff-head', x: W - 4, y: m.top - 10, 'text-anchor': 'end' }, narrow ? 'Diff.' : 'Difference'));

  shown.forEach((a, i) => {
    const y0 = m.top + i * groupH + 6;
    const g = svg('g', { class: 'account', 'data-account': a.accountId });
    const name = a.accountId.length > (narrow ? 12 : 22) ? `${a.accountId.slice(0, narrow ? 11 : 21)}…` : a.accountId;
    g.append(svg('text', { class: 'name', x: m.left - 8, y: y0 + barH + gap / 2 + 4, 'text-anchor': 'end' }, name));
    for (const [k, kind, value] of [
      [0, 'billed-now', a.billedNow],
      [1, 'corrected', a.corrected],
    ]) {
      const y = y0 + k * (barH + gap);
      const w = Math.max(value > 0 ? 1.5 : 0, x(value) - m.left);
      g.append(
        svg(
          'rect',
          { class: `bar ${kind}`, x: m.left, y, width: w, height: barH, rx: 2, 'data-kind': kind, 'data-value': value },
          svg('title', {}, `${a.accountId} · ${kind === 'corrected' ? 'corrected' : 'billed now'}: ${fmt(value)} tokens`),
        ),
      );
    }
    g.append(
      svg(
        'text',
        {
          class: `diff ${a.difference < 0 ? 'down' : a.difference > 0 ? 'up' : 'same'}`,
          x: W - 4,
          y: y0 + barH + gap / 2 + 4,
          'text-anchor': 'end',
          'data-value': a.difference,
        },
        signed(a.difference),
      ),
    );
    root.append(g);
  });
  if (shown.length === 0)
    root.append(svg('text', { class: 'empty-note', x: m.left + pw / 2, y: m.top + groupH / 2, 'text-anchor': 'middle' }, 'No charge in this window'));
  return root;
}
