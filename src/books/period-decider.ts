// The month close (issue 41): an operator closes a UTC calendar month of the books once it has
// ended, its money reconciliation is at 0 and its imported upstream bills agree, or overrides
// those checks with a reason; reopening takes a reason too. The checks' figures come with the
// command (the route reads them from the read models) and are recorded in the event.
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';

export interface PeriodsState {
  /** Months closed now (reopened ones are not); a list, as the stream's snapshot stores it. */
  closed: string[];
}

export type PeriodCommand =
  | {
      type: 'Close';
      period: string;
      now: Date;
      /** The month's money reconciliation difference and its bill lines outside the tolerance. */
      reconciliationDifference: number;
      billLinesDiffering: number;
      /** Closes it although a check failed. */
      overrideReason?: string;
    }
  | { type: 'Reopen'; period: string; reason: string };

const PERIOD = /^[0-9]{4}-(0[1-9]|1[0-2])$/;

/** A UTC calendar month: YYYY-MM. */
export function requirePeriod(period: unknown): string {
  if (typeof period !== 'string' || !PERIOD.test(period)) throw invalid("'period' must be a month as YYYY-MM (e.g. 2026-10).", { param: 'period' });
  return period;
}

/** The month's first day and the first day after it (YYYY-MM-DD). */
export function periodDays(period: string): { from: string; to: string; end: string } {
  const [y, m] = period.split('-').map(Number);
  const end = new Date(Date.UTC(y, m, 1)).toISOString().slice(0, 10);
  const to = new Date(Date.UTC(y, m, 0)).toISOString().slice(0, 10);
  return { from: `${period}-01`, to, end };
}

/** The month of a time (YYYY-MM). */
export const periodOf = (at: string): string => at.slice(0, 7);

const conflict = (message: string, param = 'period') => new DomainError('conflict', message, { param });

export const periodDecider: Decider<PeriodsState, PeriodCommand, StreamEvents['periods']> = {
  initialState: () => ({ closed: [] }),
  decide(c, s) {
    const period = requirePeriod(c.period);
    if (c.type === 'Reopen') {
      const reason = c.reason.trim();
      if (!reason) throw invalid("Reopening a month needs a 'reason'.", { param: 'reason' });
      if (!s.closed.includes(period)) throw conflict(`${period} is not closed.`);
      return [{ type: 'PeriodReopened', data: { period, reason: reason.slice(0, 500) } }];
    }
    if (s.closed.includes(period)) throw conflict(`${period} is already closed.`);
    if (`${periodDays(period).end}T00:00:00.000Z` > c.now.toISOString()) throw conflict(`${period} has not ended yet: a month is closed once it is over.`);
    const overrideReason = c.overrideReason?.trim() || undefined;
    const failed = [
      c.reconciliationDifference !== 0 ? `its money reconciliation differs by ${c.reconciliationDifference} minor units` : null,
      c.billLinesDiffering > 0 ? `${c.billLinesDiffering} lines of its upstream bills differ from Tollgate's cost` : null,
    ].filter((x): x is string => x !== null);
    if (failed.length > 0 && !overrideReason)
      throw conflict(`${period} cannot be closed: ${failed.join(' and ')}. Close it anyway only with a 'reason', which is recorded.`, 'reason');
    return [
      {
        type: 'PeriodClosed',
        data: {
          period,
          reconciliationDifference: c.reconciliationDifference,
          billLinesDiffering: c.billLinesDiffering,
          ...(overrideReason ? { overrideReason: overrideReason.slice(0, 500) } : {}),
        },
      },
    ];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'PeriodClosed') return { closed: [...s.closed, e.data.period].sort() };
    if (e.type === 'PeriodReopened') return { closed: s.closed.filter((p) => p !== e.data.period) };
    return s;
  },
};
