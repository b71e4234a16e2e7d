// A bar chart with stacked segments (one bar per day, one segment per series) as SVG, sized to its
// frame. One tab stop: the left/right arrows, Home and End select a bar and the tip below reads it
// out (a polite live region); hovering does the same. The tables beside it hold the same numbers.
import { useEffect, useRef, useState } from 'preact/hooks';
import { compact } from '../format.ts';
import { Loading } from './Page.tsx';

export interface Segment {
  series: string;
  value: number;
  title: string;
}

export interface Bar {
  key: string;
  axisLabel: string;
  total: number;
  highlight?: boolean;
  segments: Segment[];
  /** Read out when the bar is selected. */
  text: string;
}

export interface StackedBarChartProps {
  id: string;
  tipId: string;
  bars: Bar[];
  colors: Map<string, string>;
  title: string;
  desc: string;
  empty: string;
  /** What to show in the frame instead of a chart (no data yet). */
  placeholder?: string | null;
  busy?: boolean;
}

/** A round axis maximum and tick step for values up to `max`. */
export function niceScale(max: number, ticks = 4): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 1 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  return { top: Math.ceil(max / step) * step, step };
}

function useWidth(ref: { current: HTMLElement | null }): number {
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const node = ref.current;
    if (!node) return;
    const observer = new ResizeObserver(() => setWidth(Math.floor(node.clientWidth)));
    observer.observe(node);
    return () => observer.disconnect();
  }, []);
  return width;
}

export function StackedBarChart(props: StackedBarChartProps) {
  const { id, tipId, bars, colors, placeholder, busy } = props;
  const frame = useRef<HTMLDivElement>(null);
  const svgRef = useRef<SVGSVGElement>(null);
  const [selected, setSelected] = useState(-1);
  const width = useWidth(frame);
  useEffect(() => setSelected(-1), [bars]);

  let chart;
  if (placeholder) chart = <Loading text={placeholder} />;
  else {
    const W = Math.max(280, width || 640);
    const H = W < 520 ? 220 : 280;
    const m = { top: 12, right: 10, bottom: 28, left: W < 520 ? 40 : 52 };
    const pw = W - m.left - m.right;
    const ph = H - m.top - m.bottom;
    const max = Math.max(0, ...bars.map((b) => b.total));
    const { top, step } = niceScale(max);
    const y = (v: number) => m.top + ph - (Math.max(0, v) / top) * ph;
    const band = pw / Math.max(1, bars.length);
    const barW = Math.max(2, Math.min(44, band * 0.72));
    const every = Math.max(1, Math.ceil(bars.length / Math.max(2, Math.floor(pw / 58))));
    const ticks: number[] = [];
    for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);
    const onKey = (ev: KeyboardEvent) => {
      const last = bars.length - 1;
      const next = (
        { ArrowLeft: selected < 0 ? last : selected - 1, ArrowRight: selected < 0 ? last : selected + 1, Home: 0, End: last } as Record<string, number>
      )[ev.key];
      if (next === undefined) return;
      ev.preventDefault();
      setSelected(Math.max(0, Math.min(last, next)));
    };
    chart = (
      <svg
        ref={svgRef}
        class="chart"
        width={W}
        height={H}
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        tabindex={0}
        aria-labelledby={`${id}-title ${id}-desc`}
        data-max={top}
        onKeyDown={onKey}
        onMouseLeave={() => document.activeElement !== svgRef.current && setSelected(-1)}
      >
        <title id={`${id}-title`}>{props.title}</title>
        <desc id={`${id}-desc`}>{props.desc}</desc>
        {ticks.map((v) => {
          const yy = Math.round(y(v)) + 0.5;
          return (
            <g key={`t${v}`}>
              <line class={v === 0 ? 'axis' : 'grid'} x1={m.left} x2={W - m.right} y1={yy} y2={yy} />
              <text x={m.left - 6} y={yy + 4} text-anchor="end">
                {max > 0 ? compact(v) : v === 0 ? '0' : ''}
              </text>
            </g>
          );
        })}
        {bars.map((b, i) => {
          const x = m.left + i * band + (band - barW) / 2;
          let base = 0;
          return (
            <g
              key={b.key}
              class={`day${b.highlight ? ' today' : ''}${i === selected ? ' selected' : ''}`}
              data-date={b.key}
              data-billed={b.total}
              data-index={i}
              onMouseEnter={() => setSelected(i)}
            >
              <rect class="hit" x={m.left + i * band} y={m.top} width={band} height={ph} />
              {b.segments.map((s) => {
                const y0 = y(base);
                base += s.value;
                const h = Math.max(1.5, y0 - y(base));
                return (
                  <rect key={s.series} class="seg" x={x} y={y0 - h} width={barW} height={h} fill={colors.get(s.series) ?? '#888'} data-model={s.series}>
                    <title>{s.title}</title>
                  </rect>
                );
              })}
              {(bars.length - 1 - i) % every === 0 && (
                <text class={b.highlight ? 'today-label' : undefined} x={m.left + i * band + band / 2} y={H - 8} text-anchor="middle">
                  {b.axisLabel}
                </text>
              )}
            </g>
          );
        })}
        {max === 0 && (
          <text class="empty-note" x={m.left + pw / 2} y={m.top + ph / 2} text-anchor="middle">
            {props.empty}
          </text>
        )}
      </svg>
    );
  }
  return (
    <>
      <div class="chart-wrap" id={id} ref={frame} aria-busy={busy ? 'true' : 'false'}>
        {chart}
      </div>
      <p class="chart-tip" id={tipId} aria-live="polite">
        {placeholder ? '' : (bars[selected]?.text ?? '')}
      </p>
    </>
  );
}
