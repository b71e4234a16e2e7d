// Finance: for a range of UTC days, revenue recognised and breakage per day, deferred revenue at
// each day's end, upstream cost and margin per day (charts, and the table of the same figures), the money reconciliation per
// account, upstream cost and margin per model and channel, the month close, and the journal as a file. Every figure
// is the gateway's (/admin/v1/finance/report and /reconciliation); the page only adds them up.
import { useRef, useState } from 'preact/hooks';
import { StackedBarChart, type Bar } from '../../shared/components/StackedBarChart.tsx';
import { dayLabel, daysBefore, dayUtc, longDay, money } from '../../shared/format.ts';
import { admin } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { InputField } from '../../shared/components/Field.tsx';
import { Heading, Loading } from '../../shared/components/Page.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { FinanceReport, MoneyReconciliation } from '../api/types.ts';
import { perDay, perModel, type Day } from './daily.ts';
import { CostTable, DaysTable, MoneyReconciliationTable } from './FinanceTables.tsx';
import { JournalDownload } from './JournalDownload.tsx';
import { PeriodsCard } from './PeriodsCard.tsx';

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const COLORS = new Map([
  ['revenue', '#4e79a7'],
  ['breakage', '#f28e2b'],
  ['deferred', '#76b7b2'],
  ['upstream_cost', '#e15759'],
  ['margin', '#59a14f'],
]);

type Series = 'revenue' | 'breakage' | 'deferred' | 'upstream_cost' | 'margin';
const SERIES_NAMES: Record<Series, string> = {
  revenue: 'Revenue recognised',
  breakage: 'Breakage',
  deferred: 'Deferred',
  upstream_cost: 'Upstream cost',
  margin: 'Margin',
};

function bars(days: Day[], series: Series[], currency: string): Bar[] {
  const today = dayUtc();
  return days.map((d) => ({
    key: d.day,
    axisLabel: dayLabel(d.day),
    total: series.reduce((s, k) => s + Math.max(0, d[k]), 0),
    highlight: d.day === today,
    // A zero is drawn as no segment at all (the chart gives every segment a visible minimum).
    segments: series.filter((k) => d[k] > 0).map((k) => ({ series: k, value: d[k], title: `${d.day} · ${k}: ${money(d[k], currency)}` })),
    text: `${longDay(d.day)}: ${series.map((k) => `${k} ${money(d[k], currency)}`).join(', ')}.`,
  }));
}

export function FinancePage() {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const today = dayUtc();
  const [range, setRange] = useState({ from: daysBefore(today, 29), to: today });
  const read = async () => {
    if (!DAY.test(range.from) || !DAY.test(range.to)) throw clientProblem('Choose the first and the last day.', DAY.test(range.from) ? 'to' : 'from');
    const q = `from=${range.from}&to=${range.to}`;
    const [report, recon] = await Promise.all([admin<FinanceReport>(`finance/report?${q}`), admin<MoneyReconciliation>(`finance/reconciliation?${q}`)]);
    return { report, recon };
  };
  const data = useLoaded(read);
  const show = async (ev: Event) => {
    ev.preventDefault();
    await action.run(async () => {
      if (!(await data.load())) throw data.problem ?? clientProblem('The reports could not be read.');
    });
  };

  const report = data.data?.report;
  const currency = report?.currency ?? 'USD';
  const days = report ? perDay(report) : [];
  return (
    <>
      <Heading
        text="Finance"
        intro="Revenue recognised, deferred and breakage, the money reconciliation, upstream cost and margin, and the journal, for a range of UTC days."
      />
      <section class="card" aria-labelledby="finance-range-heading">
        <h2 id="finance-range-heading">Range</h2>
        <form ref={form} class="form-grid" noValidate onSubmit={show}>
          <InputField id="fin-from" label="From (UTC day)" type="date" name="from" value={range.from} onValue={(v) => setRange({ ...range, from: v })} />
          <InputField id="fin-to" label="To (UTC day, included)" type="date" name="to" value={range.to} onValue={(v) => setRange({ ...range, to: v })} />
          <FormActions submit="Show" busy={data.busy} />
        </form>
        {action.region()}
      </section>
      {!data.data ? (
        <section class="card" aria-busy={data.busy ? 'true' : 'false'}>
          <Loading text={data.failed ? 'The finance reports could not be loaded.' : 'Loading the finance reports…'} />
          {!action.problem && data.failed && <p class="help">Choose the range again and press Show.</p>}
        </section>
      ) : (
        <>
          <section class="card" aria-labelledby="revenue-heading" aria-busy={data.busy ? 'true' : 'false'}>
            <h2 id="revenue-heading">Revenue per day</h2>
            <p class="help">
              In {currency}, from {report!.from} to {report!.to}. Recognised revenue and breakage are earned that day; deferred is the value of unused tokens at
              the day’s end.
            </p>
            {report!.periods.length > 0 && (
              <p class="help" id="finance-closed-months">
                {report!.periods
                  .map((p) =>
                    p.status === 'closed' ? `${p.period} is closed (${p.closed_by})` : `${p.period} was closed, then reopened: “${p.reopen_reason}”`,
                  )
                  .join('; ')}
                .
              </p>
            )}
            <div class="legend" aria-hidden="true">
              {[...COLORS].map(([k, c]) => (
                <span key={k} class={`legend-item legend-${k}`} data-color={c}>
                  <span class={`legend-swatch fin-${k}`} />
                  {SERIES_NAMES[k as Series]}
                </span>
              ))}
            </div>
            <StackedBarChart
              id="revenue-chart"
              tipId="revenue-tip"
              bars={bars(days, ['revenue', 'breakage'], currency)}
              colors={COLORS}
              title={`Revenue recognised and breakage per day, in minor units of ${currency}`}
              desc={`Stacked bars, one per UTC day; the table below holds the same figures. In total revenue ${money(report!.totals.revenue, currency)}, breakage ${money(report!.totals.breakage, currency)}.`}
              empty="No revenue in this range"
            />
            <StackedBarChart
              id="deferred-chart"
              tipId="deferred-tip"
              bars={bars(days, ['deferred'], currency)}
              colors={COLORS}
              title={`Deferred revenue at each day's end, in minor units of ${currency}`}
              desc="One bar per UTC day; the table below holds the same figures."
              empty="Nothing deferred in this range"
            />
            <StackedBarChart
              id="cost-chart"
              tipId="cost-tip"
              bars={bars(days, ['upstream_cost', 'margin'], currency)}
              colors={COLORS}
              title={`Upstream cost and margin per day, in minor units of ${currency}`}
              desc={`Stacked bars, one per UTC day: cost and, above it, the margin when revenue exceeds cost (a loss shows in the table's margin column). In total cost ${money(report!.totals.upstream_cost, currency)}, margin ${money(report!.totals.margin, currency)}.`}
              empty="No upstream cost or margin in this range"
            />
            <DaysTable
              days={days.filter((d) => d.revenue || d.breakage || d.refunded_revenue || d.upstream_cost || d.margin || d.deferred)}
              currency={currency}
            />
          </section>
          <section class="card" aria-labelledby="recon-heading">
            <h2 id="recon-heading">Money reconciliation</h2>
            <p class="help">
              Per account: what was paid, less refunds, equals what was earned plus the change in deferred revenue; any difference names its events.
            </p>
            <MoneyReconciliationTable recon={data.data.recon} />
          </section>
          <section class="card" aria-labelledby="cost-heading">
            <h2 id="cost-heading">Upstream cost and margin</h2>
            <p class="help">
              Cost of the calls at the providers’ rates (calls on a channel without a rate are counted apart as unpriced); margin is revenue less cost.
            </p>
            <CostTable lines={perModel(report!)} currency={currency} />
          </section>
        </>
      )}
      <PeriodsCard onChanged={() => void data.load()} />
      <JournalDownload from={range.from} to={range.to} />
    </>
  );
}
