// The usage page: billed tokens per UTC day split by model (stacked bars), tables with totals, the
// subscription card and a CSV export. Data from GET /v1/usage?daily=true&range=Nd&view=corrected
// (billed net of corrections) and GET /v1/subscription, with the key saved in this browser.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { KeyBar, type KeyBarControl } from '../../shared/components/KeyBar.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { QuotaBadge } from '../../shared/components/QuotaBadge.tsx';
import { Segmented } from '../../shared/components/Segmented.tsx';
import { StackedBarChart } from '../../shared/components/StackedBarChart.tsx';
import { TableSlot } from '../../shared/components/DataTable.tsx';
import { Topbar } from '../../shared/components/Topbar.tsx';
import { fmt } from '../../shared/format.ts';
import { useKey } from '../../shared/key.ts';
import type { ApiProblem } from '../../shared/problem.ts';
import { getPref, setPref } from '../../shared/storage.ts';
import { v1, type Subscription, type Usage } from '../../shared/v1.ts';
import { CsvExport } from './CsvExport.tsx';
import { SubscriptionCard } from './SubscriptionCard.tsx';
import { barsOf, DayTable, Legend, ModelTable, paletteOf, UsageStats } from './UsageTables.tsx';

const RANGES = ['7', '30', '90'] as const;
type Range = (typeof RANGES)[number];

function initialRange(): Range {
  const fromUrl = /^(\d+)d$/.exec(new URLSearchParams(location.search).get('range') ?? '')?.[1];
  const wanted = fromUrl ?? getPref('range', '30');
  return (RANGES as readonly string[]).includes(wanted) ? (wanted as Range) : '30';
}

interface Loaded {
  usage: Usage | null;
  sub: Subscription | null;
  subError: ApiProblem | null;
}

interface Shown {
  err: unknown;
  prefix?: string;
  from: 'load' | 'csv';
}

export function UsagePage() {
  const key = useKey();
  const keyBar = useRef<KeyBarControl | null>(null);
  const [range, setRange] = useState<Range>(initialRange);
  const [data, setData] = useState<Loaded>({ usage: null, sub: null, subError: null });
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Shown | null>(null);
  const [reloads, setReloads] = useState(0);

  useEffect(() => {
    setProblem(null);
    if (!key) {
      setData({ usage: null, sub: null, subError: null });
      return;
    }
    let current = true;
    setBusy(true);
    // The previous range's chart stays until this answer replaces it.
    Promise.allSettled([v1.json<Usage>(`usage?daily=true&range=${range}d&view=corrected`), v1.json<Subscription>('subscription')]).then(([u, s]) => {
      if (!current) return;
      setBusy(false);
      setData({
        usage: u.status === 'fulfilled' ? u.value : null,
        sub: s.status === 'fulfilled' ? s.value : null,
        subError: s.status === 'rejected' ? (s.reason as ApiProblem) : null,
      });
      const failure = u.status === 'rejected' ? u.reason : s.status === 'rejected' ? s.reason : null;
      setProblem(failure ? { err: failure, from: 'load' } : null);
    });
    return () => {
      current = false;
    };
  }, [key, range, reloads]);

  const pickRange = (r: Range) => {
    setPref('range', r);
    const url = new URL(location.href);
    url.searchParams.set('range', `${r}d`);
    history.replaceState(null, '', url);
    setRange(r);
  };

  const { usage, sub } = data;
  // Computed once per answer: the chart keeps its selected day until new data arrives.
  const palette = useMemo(() => (usage ? paletteOf(usage) : null), [usage]);
  const bars = useMemo(() => (usage && palette ? barsOf(usage, palette) : []), [usage, palette]);
  const total = usage?.totals.billed ?? 0;
  const placeholder = !key ? 'Enter your API key to see your usage.' : !usage ? (busy ? 'Loading the usage…' : 'The usage could not be loaded.') : null;
  return (
    <>
      <a class="skip-link" href="#usage-heading">
        Skip to the usage
      </a>
      <Topbar current="usage">
        <QuotaBadge sub={key ? sub : null} error={data.subError} hasKey={!!key} />
      </Topbar>
      <main class="usage-layout">
        <aside class="sidebar" aria-label="Account">
          <KeyBar control={keyBar} />
          <SubscriptionCard
            sub={key ? sub : null}
            busy={busy}
            message={!key ? 'Enter your API key to see your plan.' : busy ? 'Loading your plan…' : 'The subscription could not be loaded.'}
          />
        </aside>

        <div class="usage-main">
          <div class="usage-head">
            <h1 id="usage-heading" tabIndex={-1}>
              Usage
            </h1>
            <Segmented
              id="range"
              name="range"
              legend="Time range"
              wide
              value={range}
              onChange={pickRange}
              options={RANGES.map((r) => ({ value: r, label: `${r} days`, id: `range-${r}` }))}
            />
            <CsvExport
              days={Number(range)}
              onProblem={(err) => setProblem({ err, prefix: 'The CSV could not be downloaded: ', from: 'csv' })}
              onDone={() => setProblem((p) => (p?.from === 'csv' ? null : p))}
            />
          </div>

          <ProblemRegion
            id="problem"
            problem={problem?.err ?? null}
            prefix={problem?.prefix}
            onKey={() => keyBar.current?.open()}
            onDismiss={() => setProblem(null)}
          />

          <div class="stats" id="stats" aria-live="polite">
            {usage && <UsageStats usage={usage} />}
          </div>

          <section class="card" aria-labelledby="chart-heading">
            <div class="row usage-head">
              <h2 id="chart-heading">Billed tokens per day, by model</h2>
              <button type="button" id="refresh" class="secondary small" onClick={() => setReloads((n) => n + 1)}>
                Refresh
              </button>
            </div>
            <StackedBarChart
              id="chart"
              tipId="chart-tip"
              busy={busy}
              placeholder={placeholder}
              bars={bars}
              colors={palette?.colors ?? new Map()}
              title={`Billed tokens per day over the last ${usage?.daily?.length ?? 0} days`}
              desc={
                total > 0
                  ? `Total ${fmt(total)} billed tokens. Use the left and right arrow keys to read each day; the tables below hold the same numbers.`
                  : 'No usage in this range.'
              }
              empty="No usage in this range"
            />
            {palette ? <Legend palette={palette} /> : <ul class="legend" id="legend" aria-label="Models in the chart" />}
            <p class="help">Days are UTC days. Billed tokens are tokens × the model’s multiplier; images cost about 45,000 × multiplier.</p>
          </section>

          <section class="card" aria-labelledby="models-heading">
            <h2 id="models-heading">By model</h2>
            {usage && palette ? <ModelTable usage={usage} palette={palette} /> : <TableSlot id="models-table" labelledBy="models-heading" />}
          </section>

          <section class="card" aria-labelledby="days-heading">
            <h2 id="days-heading">By day</h2>
            {usage && palette ? <DayTable usage={usage} palette={palette} /> : <TableSlot id="days-table" labelledBy="days-heading" />}
          </section>
        </div>
      </main>
    </>
  );
}
