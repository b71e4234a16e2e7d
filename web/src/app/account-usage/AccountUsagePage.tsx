// Usage for a signed-in member whose role reads it (owner, billing, developer): the account's billed
// tokens per UTC day split by model, and the tables, from the session API's
// GET /app/api/accounts/:account/usage (the same answer as /v1/usage, without a key). The key-only
// page (/app/usage) stays for people who have only a key.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { Segmented } from '../../shared/components/Segmented.tsx';
import { StackedBarChart } from '../../shared/components/StackedBarChart.tsx';
import { fmt } from '../../shared/format.ts';
import type { Usage } from '../../shared/v1.ts';
import { appApi, MEMBER_ADVICE } from '../api/client.ts';
import { useShell } from '../shell/context.ts';
import { barsOf, DayTable, Legend, ModelTable, paletteOf, UsageStats } from '../usage/UsageTables.tsx';

const RANGES = ['7', '30', '90'] as const;
type Range = (typeof RANGES)[number];

export function AccountUsagePage() {
  const { account } = useShell();
  const [range, setRange] = useState<Range>('30');
  const [usage, setUsage] = useState<Usage | null>(null);
  const [busy, setBusy] = useState(true);
  const [problem, setProblem] = useState<unknown>(null);

  useEffect(() => {
    let current = true;
    setBusy(true);
    appApi
      .json<Usage>(`accounts/${encodeURIComponent(account.account_id)}/usage?daily=true&range=${range}d&view=corrected`)
      .then(
        (u) => current && (setUsage(u), setProblem(null)),
        (err) => current && setProblem(err),
      )
      .finally(() => current && setBusy(false));
    return () => {
      current = false;
    };
  }, [account.account_id, range]);

  const palette = useMemo(() => (usage ? paletteOf(usage) : null), [usage]);
  const bars = useMemo(() => (usage && palette ? barsOf(usage, palette) : []), [usage, palette]);
  const total = usage?.totals.billed ?? 0;
  return (
    <>
      <div class="usage-head">
        <h1 id="account-usage-heading">Usage</h1>
        <Segmented
          id="range"
          name="range"
          legend="Time range"
          value={range}
          onChange={setRange}
          options={RANGES.map((r) => ({ value: r, label: `${r} days`, id: `range-${r}` }))}
        />
      </div>
      <ProblemRegion id="problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
      <div class="stats" id="stats" aria-live="polite">
        {usage && <UsageStats usage={usage} />}
      </div>
      <section class="card" aria-labelledby="chart-heading">
        <h2 id="chart-heading">Billed tokens per day, by model</h2>
        <StackedBarChart
          id="chart"
          tipId="chart-tip"
          busy={busy}
          placeholder={!usage ? (busy ? 'Loading the usage…' : 'The usage could not be loaded.') : null}
          bars={bars}
          colors={palette?.colors ?? new Map()}
          title={`Billed tokens per day over the last ${usage?.daily?.length ?? 0} days`}
          desc={total > 0 ? `Total ${fmt(total)} billed tokens; the tables below hold the same numbers.` : 'No usage in this range.'}
          empty="No usage in this range"
        />
        {palette && <Legend palette={palette} />}
        <p class="help">Days are UTC days, for every key of this account. Billed tokens are tokens × the model’s multiplier.</p>
      </section>
      {usage && palette && (
        <>
          <section class="card" aria-labelledby="models-heading">
            <h2 id="models-heading">By model</h2>
            <ModelTable usage={usage} palette={palette} />
          </section>
          <section class="card" aria-labelledby="days-heading">
            <h2 id="days-heading">By day</h2>
            <DayTable usage={usage} palette={palette} />
          </section>
        </>
      )}
    </>
  );
}
