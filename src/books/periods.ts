// Closing and reopening months of the books, and the months' history as the reports show it. The
// close's checks are read for the month from the read models (the money reconciliation, the
// upstream bills' reconciliation) and travel with the command into the event.
import { streams } from '../ledger/events.ts';
import { metadataFor, type Ledger } from '../ledger/ledger.ts';
import { reconcileBills } from '../catalogue/index.ts';
import { periodDays, periodDecider, requirePeriod } from './period-decider.ts';
import { readMoneyBooks } from './finance.ts';
import { reconcileMoney } from './finance-reconcile.ts';

/** A month's state and history, as the reports and the console show it. */
export interface PeriodView {
  object: 'period';
  period: string;
  status: 'closed' | 'reopened';
  closed_at: string;
  closed_by: string;
  reconciliation_difference: number;
  bill_lines_differing: number;
  override_reason: string | null;
  reopened_at: string | null;
  reopened_by: string | null;
  reopen_reason: string | null;
  /** Every close and reopen, oldest first. */
  history: Array<{ action: 'closed' | 'reopened'; at: string; by: string; reason: string | null; event_id: string }>;
}

/** Every month ever closed, newest first (the stream holds a few events a month: read whole). */
export async function listPeriods(ledger: Ledger): Promise<PeriodView[]> {
  const byPeriod = new Map<string, PeriodView>();
  for (const e of await ledger.events.readStream(streams.periods())) {
    const d = e.data as { period: string; reason?: string; overrideReason?: string; reconciliationDifference?: number; billLinesDiffering?: number };
    const by = e.metadata.actor;
    if (e.type === 'PeriodClosed') {
      const history = byPeriod.get(d.period)?.history ?? [];
      history.push({ action: 'closed', at: e.timestamp, by, reason: d.overrideReason ?? null, event_id: e.id });
      byPeriod.set(d.period, {
        object: 'period',
        period: d.period,
        status: 'closed',
        closed_at: e.timestamp,
        closed_by: by,
        reconciliation_difference: d.reconciliationDifference ?? 0,
        bill_lines_differing: d.billLinesDiffering ?? 0,
        override_reason: d.overrideReason ?? null,
        reopened_at: null,
        reopened_by: null,
        reopen_reason: null,
        history,
      });
    } else if (e.type === 'PeriodReopened') {
      const p = byPeriod.get(d.period);
      if (!p) continue;
      p.history.push({ action: 'reopened', at: e.timestamp, by, reason: d.reason ?? null, event_id: e.id });
      Object.assign(p, { status: 'reopened', reopened_at: e.timestamp, reopened_by: by, reopen_reason: d.reason ?? null });
    }
  }
  return [...byPeriod.values()].sort((a, b) => (a.period < b.period ? 1 : -1));
}

/** The months a window of UTC days touches, as listPeriods gives them. */
export const periodsOf = (all: PeriodView[], w: { from: string; to: string }): PeriodView[] =>
  all.filter((p) => p.period >= w.from.slice(0, 7) && p.period <= w.to.slice(0, 7));

/** Closes a month: its checks read now, from the read models (the log read up to here first). */
export async function closePeriod(
  ledger: Ledger,
  input: { period: unknown; reason?: string; billToleranceMinor: number; now?: Date },
  actor: string,
): Promise<PeriodView> {
  const period = requirePeriod(input.period);
  const w = periodDays(period);
  const money = reconcileMoney(await readMoneyBooks(ledger, w), w);
  const bills = await reconcileBills(ledger, w, money.currency, input.billToleranceMinor);
  await ledger.command(
    periodDecider,
    streams.periods(),
    {
      type: 'Close',
      period,
      now: input.now ?? new Date(),
      reconciliationDifference: money.total.difference,
      // Lines of its bills outside the tolerance; a day no bill covers yet is not one of them
      // (the reconciliation's lines_differing counts every line that does not agree).
      billLinesDiffering: bills.lines.filter((l) => l.status === 'differs' || l.status === 'no_calls').length,
      overrideReason: input.reason,
    },
    metadataFor(actor),
  );
  return (await listPeriods(ledger)).find((p) => p.period === period)!;
}

/** Opens a closed month again, with the reason. */
export async function reopenPeriod(ledger: Ledger, input: { period: unknown; reason: unknown }, actor: string): Promise<PeriodView> {
  const period = requirePeriod(input.period);
  await ledger.command(
    periodDecider,
    streams.periods(),
    { type: 'Reopen', period, reason: typeof input.reason === 'string' ? input.reason : '' },
    metadataFor(actor),
  );
  return (await listPeriods(ledger)).find((p) => p.period === period)!;
}

/** A closed month that ends after `at`, if any: a cost rate effective at `at` would re-price its calls. */
export async function closedMonthEndingAfter(ledger: Ledger, at: string): Promise<string | null> {
  const state = await ledger.streamState(periodDecider, streams.periods());
  return state.closed.find((p) => `${periodDays(p).end}T00:00:00.000Z` > at) ?? null;
}
