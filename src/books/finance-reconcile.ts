// The money reconciliation for a window, per account and in total:
//   payments - refunds = revenue + refunded revenue (negative) + breakage + change in deferred
//                        + tax collected - tax refunded
// The left side comes from the payments' own amounts, the right from the lot bookings and the
// lots' deferred revenue at the window's two ends. Each line gives its difference and, when it is
// not zero, the events whose own bookings do not balance.
import type { Booking } from './lot-book.ts';
import { inWindow, type MoneyBooks, type Window } from './finance.ts';
import type { Folded } from './finance-fold.ts';
import { noFigures } from '../../projections/books/books.ts';

export interface MoneyLine {
  account_id: string;
  payments: number;
  refunds: number;
  revenue: number;
  refunded_revenue: number;
  breakage: number;
  /** Tax held in the window's payments, and given back by its refunds: the change in tax payable. */
  tax: number;
  tax_refunded: number;
  fx_gain_loss: number;
  deferred_start: number;
  deferred_end: number;
  deferred_change: number;
  difference: number;
  event_ids: string[];
}

/** What one booking moves in cash (left side) and in revenue, breakage and tax payable (right side, without deferred). */
function sides(b: Booking): { cash: number; earned: number } {
  switch (b.kind) {
    case 'payment':
      return { cash: b.amount, earned: b.tax };
    case 'use':
    case 'breakage':
      return { cash: 0, earned: b.amount };
    case 'refund':
    case 'dispute':
      return { cash: -b.amount, earned: -b.refundedRevenue - b.tax };
    case 'dispute_fee':
      return { cash: 0, earned: 0 };
    case 'fx':
      return { cash: b.amount, earned: b.amount };
  }
}

/** Events of the window whose bookings and change of deferred revenue do not balance (a fold that kept its bookings). */
export function unbalancedEvents(f: Folded, w: Window, accountId: string): string[] {
  const residual = new Map<string, number>();
  for (const b of f.book.bookings) {
    if (b.accountId !== accountId || !inWindow(w, b.at)) continue;
    const s = sides(b);
    const id = b.eventId;
    if (!residual.has(id)) residual.set(id, -(f.book.deferredDelta.get(id) ?? 0));
    residual.set(id, residual.get(id)! + s.cash - s.earned);
  }
  return [...residual].filter(([, r]) => r !== 0).map(([id]) => id);
}

export interface MoneyReconciliation {
  currency: string;
  from: string;
  to: string;
  lines: MoneyLine[];
  total: MoneyLine;
}

/** The reconciliation of the window's books; `eventsOf` names the events behind an account's difference. */
export function reconcileMoney(f: MoneyBooks, w: Window, eventsOf: (accountId: string) => string[] = () => []): MoneyReconciliation {
  const accounts = new Set([...f.perAccount.keys(), ...f.deferredBefore.keys(), ...f.deferredAtEnd.keys()]);
  const lines: MoneyLine[] = [...accounts].sort().map((account_id) => {
    const s = f.perAccount.get(account_id) ?? noFigures();
    const deferred_start = f.deferredBefore.get(account_id) ?? 0;
    const deferred_end = f.deferredAtEnd.get(account_id) ?? 0;
    const refunds = s.refunds + s.disputes;
    const deferred_change = deferred_end - deferred_start;
    // Refunds in another currency are at their payments' rates; the cash they cost at the day's differs by the FX gain or loss.
    const difference =
      s.payments - refunds + s.fx_gain_loss - (s.revenue + s.refunded_revenue + s.breakage + deferred_change + s.tax - s.tax_refunded + s.fx_gain_loss);
    return {
      account_id,
      payments: s.payments,
      refunds,
      revenue: s.revenue,
      refunded_revenue: s.refunded_revenue,
      breakage: s.breakage,
      tax: s.tax,
      tax_refunded: s.tax_refunded,
      fx_gain_loss: s.fx_gain_loss,
      deferred_start,
      deferred_end,
      deferred_change,
      difference,
      event_ids: difference === 0 ? [] : eventsOf(account_id),
    };
  });
  const total: MoneyLine = {
    account_id: '*',
    payments: 0,
    refunds: 0,
    revenue: 0,
    refunded_revenue: 0,
    breakage: 0,
    tax: 0,
    tax_refunded: 0,
    fx_gain_loss: 0,
    deferred_start: 0,
    deferred_end: 0,
    deferred_change: 0,
    difference: 0,
    event_ids: [],
  };
  for (const l of lines) for (const k of Object.keys(total) as Array<keyof MoneyLine>) if (typeof total[k] === 'number') (total[k] as number) += l[k] as number;
  total.event_ids = lines.flatMap((l) => l.event_ids);
  return { currency: f.currency, from: w.from, to: w.to, lines, total };
}
