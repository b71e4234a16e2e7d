// The usage page's numbers: the headline stats, the per-model and per-day tables, and the bars of
// the chart, all from one GET /v1/usage?daily=true answer.
import { DataTable, Stat, Swatch } from '../../shared/components/DataTable.tsx';
import type { Bar } from '../../shared/components/StackedBarChart.tsx';
import { dayLabel, fmt, longDay } from '../../shared/format.ts';
import type { DayUsage, Usage } from '../../shared/v1.ts';

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#59a14f', '#b07aa1', '#edc948', '#76b7b2', '#ff9da7', '#9c755f', '#8cd17d', '#d37295', '#bab0ac'];

/** Models by billed tokens (most first) and a colour for each, kept in that order everywhere. */
export interface Palette {
  order: string[];
  colors: Map<string, string>;
}

export function paletteOf(usage: Usage): Palette {
  const order = [...usage.models].sort((a, b) => b.billed - a.billed || a.model.localeCompare(b.model)).map((m) => m.model);
  return { order, colors: new Map(order.map((m, i) => [m, PALETTE[i % PALETTE.length]])) };
}

const activeDays = (usage: Usage) => (usage.daily ?? []).filter((d) => d.requests > 0 || d.billed !== 0);
const byOrder = (p: Palette) => (a: { model: string }, b: { model: string }) => p.order.indexOf(a.model) - p.order.indexOf(b.model);

function dayText(d: DayUsage): string {
  const parts = d.models
    .filter((m) => m.billed !== 0)
    .sort((a, b) => b.billed - a.billed)
    .map((m) => `${m.model} ${fmt(m.billed)}`);
  return `${longDay(d.date)}: ${fmt(d.billed)} billed tokens${parts.length ? ` — ${parts.join(', ')}` : ''}`;
}

export function barsOf(usage: Usage, p: Palette): Bar[] {
  const days = usage.daily ?? [];
  const today = usage.range?.end;
  return days.map((d) => ({
    key: d.date,
    axisLabel: d.date === today && days.length <= 31 ? 'Today' : dayLabel(d.date),
    total: d.billed,
    highlight: d.date === today,
    segments: d.models
      .filter((s) => s.billed > 0)
      .sort(byOrder(p))
      .map((s) => ({ series: s.model, value: s.billed, title: `${d.date} · ${s.model}: ${fmt(s.billed)} billed tokens` })),
    text: dayText(d),
  }));
}

export function UsageStats({ usage }: { usage: Usage }) {
  const active = activeDays(usage);
  const peak = (usage.daily ?? []).reduce<DayUsage | null>((best, d) => (d.billed > (best?.billed ?? 0) ? d : best), null);
  return (
    <>
      <Stat label="Billed tokens" value={fmt(usage.totals.billed)} id="stat-billed" />
      <Stat label="Requests" value={fmt(usage.totals.requests)} />
      <Stat label="Images" value={fmt(usage.totals.images)} />
      <Stat label="Per active day" value={active.length ? fmt(Math.round(usage.totals.billed / active.length)) : '0'} />
      <Stat label="Busiest day" value={peak ? dayLabel(peak.date) : '—'} sub={peak ? `${fmt(peak.billed)} tokens` : null} />
    </>
  );
}

export function Legend({ palette }: { palette: Palette }) {
  return (
    <ul class="legend" id="legend" aria-label="Models in the chart">
      {palette.order.map((m) => (
        <li key={m}>
          <Swatch color={palette.colors.get(m)!} />
          {m}
        </li>
      ))}
    </ul>
  );
}

export function ModelTable({ usage, palette }: { usage: Usage; palette: Palette }) {
  const byModel = new Map(usage.models.map((m) => [m.model, m]));
  const t = usage.totals;
  const share = (n: number) => (t.billed > 0 ? `${((n / t.billed) * 100).toFixed(1)}%` : '—');
  return (
    <DataTable
      id="models-table"
      labelledBy="models-heading"
      caption={`Usage by model over the last ${usage.range.days} days`}
      columns={['Model', 'Requests', 'Prompt tokens', 'Completion tokens', 'Images', 'Billed tokens', 'Share'].map((label) => ({ label }))}
      empty="No usage in this range."
      rows={palette.order.map((id) => {
        const m = byModel.get(id)!;
        return (
          <tr key={id}>
            <th scope="row">
              <span class="swatch-cell">
                <Swatch color={palette.colors.get(id)!} />
                {id}
              </span>
            </th>
            <td>{fmt(m.requests)}</td>
            <td>{fmt(m.prompt_tokens)}</td>
            <td>{fmt(m.completion_tokens)}</td>
            <td>{fmt(m.images)}</td>
            <td>{fmt(m.billed)}</td>
            <td>{share(m.billed)}</td>
          </tr>
        );
      })}
      foot={
        <tr>
          <th scope="row">Total</th>
          <td>{fmt(t.requests)}</td>
          <td>{fmt(t.prompt_tokens)}</td>
          <td>{fmt(t.completion_tokens)}</td>
          <td>{fmt(t.images)}</td>
          <td id="total-billed" data-value={t.billed}>
            {fmt(t.billed)}
          </td>
          <td>{t.billed > 0 ? '100%' : '—'}</td>
        </tr>
      }
    />
  );
}

export function DayTable({ usage, palette }: { usage: Usage; palette: Palette }) {
  const active = activeDays(usage);
  const quiet = (usage.daily?.length ?? 0) - active.length;
  const t = usage.totals;
  return (
    <DataTable
      id="days-table"
      labelledBy="days-heading"
      caption={`Usage by day over the last ${usage.range.days} days`}
      columns={[
        { label: 'Date (UTC)' },
        { label: 'Requests' },
        { label: 'Tokens' },
        { label: 'Images' },
        { label: 'Billed tokens' },
        { label: 'Models', class: 'models' },
      ]}
      empty="No usage in this range."
      rows={[...active].reverse().map((d) => (
        <tr key={d.date} data-date={d.date}>
          <th scope="row">{d.date === usage.range.end ? `${d.date} (today)` : d.date}</th>
          <td>{fmt(d.requests)}</td>
          <td>{fmt(d.tokens)}</td>
          <td>{fmt(d.images)}</td>
          <td>{fmt(d.billed)}</td>
          <td class="models">
            {d.models
              .filter((m) => m.billed !== 0)
              .sort(byOrder(palette))
              .map((m, i) => (
                <>
                  {i ? ' · ' : null}
                  <span class="swatch-cell">
                    <Swatch color={palette.colors.get(m.model) ?? '#888'} />
                    {`${m.model} ${fmt(m.billed)}`}
                  </span>
                </>
              ))}
          </td>
        </tr>
      ))}
      foot={
        <tr>
          <th scope="row">{`Total, ${usage.range.days} days`}</th>
          <td>{fmt(t.requests)}</td>
          <td>{fmt(t.tokens)}</td>
          <td>{fmt(t.images)}</td>
          <td id="days-total-billed">{fmt(t.billed)}</td>
          <td class="models">{quiet > 0 ? `${quiet} day${quiet === 1 ? '' : 's'} without usage not listed` : ''}</td>
        </tr>
      }
    />
  );
}
