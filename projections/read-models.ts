// Every read model of the ledger, each a pure function of the event log, in the order their
// tables are made. Each lives beside its feature's reads (projections/<feature>/); this list is
// the wiring's, handed to the runner (projections/runner/registry.ts) when it is imported.
import { accounts } from './accounts/accounts.ts';
import { holds } from './accounts/holds.ts';
import { plans } from './accounts/plans.ts';
import { notices } from './accounts/notices.ts';
import { creditExpiries } from './accounts/credit-expiries.ts';
import { keys } from './keys/keys.ts';
import { charges } from './calls/charges.ts';
import { usageDaily } from './calls/usage-daily.ts';
import { usageKeys } from './calls/usage-keys.ts';
import { models } from './catalogue/models.ts';
import { upstreamDaily } from './catalogue/upstream-report.ts';
import { upstreamCalls, upstreamCostDayChanges, upstreamCostDays, upstreamCostRates } from './catalogue/cost-tables.ts';
import { upstreamCost } from './catalogue/cost-book.ts';
import { upstreamBillLines } from './catalogue/upstream-bills.ts';
import { memberships, sessions } from './customers/members.ts';
import { books } from './books/books.ts';
import { bookAccounts, bookDayChanges, bookDays, bookDeferred, bookEntries, bookLots } from './books/book-tables.ts';
import { documents } from './books/documents.ts';
import { topUps } from './books/top-ups.ts';
import { registerReadModels } from './runner/registry.ts';

export const ALL_PROJECTIONS = [
  keys,
  accounts,
  holds,
  usageDaily,
  models,
  plans,
  charges,
  upstreamDaily,
  usageKeys,
  // Upstream cost: the rates, then the fold that prices each call as it comes (and writes upstream_calls and the days).
  upstreamCostRates,
  upstreamCalls,
  upstreamCostDays,
  upstreamCostDayChanges,
  upstreamCost,
  upstreamBillLines,
  memberships,
  sessions,
  // The books' tables, then their fold (after upstream_calls: a correction's bookings read its charge's channel).
  bookAccounts,
  bookLots,
  bookDays,
  bookDeferred,
  bookEntries,
  bookDayChanges,
  books,
  documents,
  topUps,
  notices,
  creditExpiries,
];
registerReadModels(ALL_PROJECTIONS);
