// The double-entry journal of a window, from the lot bookings (DESIGN.md "Money in currency"):
//   payment: Dr cash and processor fees, Cr deferred revenue and the tax it held (tax payable)
//   use: Dr deferred, Cr revenue (a correction giving tokens back: the reverse), one entry per
//        day, account, model and channel (the calls are too many to book one by one)
//   period end: Dr deferred, Cr breakage
//   refund / lost dispute: Dr tax payable (its tax), Dr deferred (unused part), Dr refunds / dispute
//        losses (used part), Cr cash
//   dispute fee: Dr dispute losses, Cr cash
//   FX on a refund in another currency (booked at its payment's rate): a gain Dr cash, Cr FX
//        gain/loss (what the day's rate saved); a loss the reverse
// Rendered as CSV (one line per posting) and as an hledger journal. Debits equal credits in every
// entry, so in any window; `assertBalanced` checks it before anything is rendered.
import { InvariantViolation } from '../ledger/errors.ts';
import { formatMoney } from '../money/money.ts';
import type { Booking } from './lot-book.ts';
import type { JournalBooks } from './finance.ts';

export const ACCOUNTS = {
  cash: 'assets:cash',
  fees: 'expenses:processor-fees',
  deferred: 'liabilities:deferred-revenue',
  revenue: 'revenue:recognised',
  breakage: 'revenue:breakage',
  refunds: 'revenue:refunds',
  disputeLosses: 'expenses:dispute-losses',
  upstreamCost: 'expenses:upstream-cost',
  upstreamPayable: 'liabilities:upstream-payable',
  taxPayable: 'liabilities:tax-payable',
  fx: 'revenue:fx-gain-loss',
} as const;

/** One posting: a positive debit or a positive credit (never both). */
export interface Posting {
  account: string;
  debit: number;
  credit: number;
}

export interface JournalEntry {
  date: string;
  memo: string;
  currency: string;
  eventIds: string[];
  postings: Posting[];
}

/** Dr `account` by `amount` (a negative amount is a credit). */
const dr = (account: string, amount: number): Posting => (amount >= 0 ? { account, debit: amount, credit: 0 } : { account, debit: 0, credit: -amount });
const cr = (account: string, amount: number): Posting => dr(account, -amount);

function postingsOf(b: Booking): Posting[] {
  switch (b.kind) {
    case 'payment':
      return [dr(ACCOUNTS.cash, b.amount - b.fee), dr(ACCOUNTS.fees, b.fee), cr(ACCOUNTS.deferred, b.amount - b.tax), cr(ACCOUNTS.taxPayable, b.tax)];
    case 'use':
      return [dr(ACCOUNTS.deferred, b.amount), cr(ACCOUNTS.revenue, b.amount)];
    case 'breakage':
      return [dr(ACCOUNTS.deferred, b.amount), cr(ACCOUNTS.breakage, b.amount)];
    case 'refund':
    case 'dispute':
      return [
        dr(ACCOUNTS.taxPayable, b.tax),
        dr(ACCOUNTS.deferred, b.fromDeferred),
        dr(b.kind === 'refund' ? ACCOUNTS.refunds : ACCOUNTS.disputeLosses, b.refundedRevenue),
        cr(ACCOUNTS.cash, b.amount),
      ];
    case 'dispute_fee':
      return [dr(ACCOUNTS.disputeLosses, b.amount), cr(ACCOUNTS.cash, b.amount)];
    case 'fx':
      return [dr(ACCOUNTS.cash, b.amount), cr(ACCOUNTS.fx, b.amount)];
  }
}

const memoOf = (b: Booking): string =>
  [
    b.kind.replace('_', ' '),
    `account ${b.accountId}`,
    b.lotId ? `lot ${b.lotId}` : '',
    b.model ? `model ${b.model}` : '',
    b.channel ? `channel ${b.channel}` : '',
  ]
    .filter(Boolean)
    .join(', ');

/** Debits equal credits in every entry. */
export function assertBalanced(entries: JournalEntry[]): void {
  for (const e of entries) {
    const d = e.postings.reduce((s, p) => s + p.debit, 0);
    const c = e.postings.reduce((s, p) => s + p.credit, 0);
    if (d !== c) throw new InvariantViolation(`journal entry ${e.eventIds.join(',')} (${e.memo}): debits ${d} != credits ${c}`);
  }
}

/** An upstream's calls of a day, channel and model: Dr upstream cost, Cr upstream payable. */
export const costEntries = (f: Pick<JournalBooks, 'costs' | 'currency'>): JournalEntry[] =>
  f.costs
    .filter((c) => c.cost_minor !== '0')
    .map((c) => ({
      date: c.day,
      memo: `upstream cost, account ${c.account_id}, model ${c.model}, channel ${c.channel}, upstream model ${c.upstream_model}, ${c.calls} calls`,
      currency: f.currency,
      // The rates in force that day. The calls, each with its rate and cost, are listed by
      // GET /admin/v1/upstream-costs/calls for the day: too many to name here (as the uses).
      eventIds: c.rate_event_ids ?? [],
      postings: [dr(ACCOUNTS.upstreamCost, Number(c.cost_minor)), cr(ACCOUNTS.upstreamPayable, Number(c.cost_minor))],
    }));

/** The journal entry of one booking (its postings without the zero ones). */
export const bookingEntry = (b: Booking): JournalEntry => ({
  date: b.at.slice(0, 10),
  memo: memoOf(b),
  currency: b.currency,
  eventIds: [b.eventId],
  postings: postingsOf(b).filter((p) => p.debit !== 0 || p.credit !== 0),
});

/** A day's uses of an account, model and channel: revenue recognised (or moved back to deferred). */
const usesEntry = (r: JournalBooks['uses'][number], currency: string): JournalEntry => ({
  date: r.day,
  memo: ['uses', `account ${r.account_id}`, r.model ? `model ${r.model}` : '', r.channel ? `channel ${r.channel}` : ''].filter(Boolean).join(', '),
  currency,
  eventIds: [],
  postings: [dr(ACCOUNTS.deferred, r.revenue), cr(ACCOUNTS.revenue, r.revenue)],
});

/**
 * The journal of a window: each booking other than a use (`bookings`, in log order), the uses of
 * each day, account, model and channel (the report's rows), and the upstream cost; by date.
 */
export function journalEntries(f: JournalBooks, bookings: Booking[]): JournalEntry[] {
  // Within a day, the bookings in log order, then the uses, then the costs: each list comes by date.
  const all = byDate([
    bookings
      .filter((b) => b.kind !== 'use')
      .map(bookingEntry)
      .filter((e) => e.postings.length > 0),
    f.uses.filter((r) => r.revenue !== 0).map((r) => usesEntry(r, f.currency)),
    costEntries(f),
  ]);
  assertBalanced(all);
  return all;
}

/** Lists each in date order, merged by date: within a day, the first list's entries, then the next's. */
function byDate(lists: JournalEntry[][]): JournalEntry[] {
  const out: JournalEntry[] = [];
  const next = lists.map(() => 0);
  for (;;) {
    let day: string | null = null;
    lists.forEach((l, i) => {
      if (next[i] < l.length && (day === null || l[next[i]].date < day)) day = l[next[i]].date;
    });
    if (day === null) return out;
    lists.forEach((l, i) => {
      while (next[i] < l.length && l[next[i]].date === day) out.push(l[next[i]++]);
      if (next[i] < l.length && l[next[i]].date < day!) throw new InvariantViolation(`journal entries out of date order: ${l[next[i]].date} after ${day}`);
    });
  }
}

/** Balance of each journal account (debits - credits), in minor units. */
export function accountBalances(entries: JournalEntry[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of entries) for (const p of e.postings) out[p.account] = (out[p.account] ?? 0) + p.debit - p.credit;
  return out;
}

const csvCell = (v: string): string => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
const decimal = (amount: number, currency: string): string => (amount < 0 ? '-' : '') + formatMoney({ amount: Math.abs(amount), currency });

/** decimal() remembered for one rendering: each entry's debit and credit are the same amount, and a journal has tens of thousands. */
function decimals(): (amount: number, currency: string) => string {
  const seen = new Map<string, string>();
  return (amount, currency) => {
    const key = `${amount} ${currency}`;
    let text = seen.get(key);
    if (text === undefined) seen.set(key, (text = decimal(amount, currency)));
    return text;
  };
}

export const JOURNAL_CSV_HEADER = 'date,account,debit,credit,currency,memo,event_ids';

/** The journal's CSV lines, one per posting (without the header). */
export function journalCsvLines(entries: JournalEntry[]): string[] {
  const decimal = decimals();
  const lines: string[] = [];
  for (const e of entries)
    for (const p of e.postings)
      lines.push(
        [
          e.date,
          p.account,
          p.debit ? decimal(p.debit, e.currency) : '',
          p.credit ? decimal(p.credit, e.currency) : '',
          e.currency,
          e.memo,
          e.eventIds.join(' '),
        ]
          .map(csvCell)
          .join(','),
      );
  return lines;
}

/** An hledger journal: one transaction per entry, its events in a comment tag. */
export function journalHledger(entries: JournalEntry[]): string {
  const decimal = decimals();
  const out: string[] = [];
  for (const e of entries) {
    out.push(`${e.date} ${e.memo.replace(/[;\n]/g, ' ')}  ; events: ${e.eventIds.join(' ')}`);
    for (const p of e.postings) out.push(`    ${p.account}  ${decimal(p.debit - p.credit, e.currency)} ${e.currency}`);
    out.push('');
  }
  return out.join('\n');
}
