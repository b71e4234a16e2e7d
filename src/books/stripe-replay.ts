// The handlers run again over Stripe notices already received (an operator's command, after a
// handler was fixed or added): the stored notices in the order they came, each through today's
// handler. Handlers book idempotently by Stripe's ids, so a notice already booked changes nothing;
// one the old handler missed is booked now. Each notice is reported: handled (events appended),
// unchanged (none), or failed with the reason.
import type Stripe from 'stripe';
import type { Outcome } from './stripe-events/index.ts';
import type { NoticeSelection, StoredNotice, StripeNoticeStore } from './stripe-notices.ts';

export interface ReplayedNotice {
  eventId: string;
  type: string;
  created: string;
  receivedAt: string;
  result: 'handled' | 'unchanged' | 'failed';
  /** The handler's outcome (as it would have answered Stripe); null when it failed. */
  outcome: Outcome | null;
  /** Events the handler appended. */
  events: number;
  /** Why it failed (null: it did not). */
  error: string | null;
}

/** A notice through its handler: its outcome (or the error it stopped on) and how many events it appended. */
export type Ran = { outcome: Outcome; appended: number; error?: undefined } | { outcome: null; appended: number; error: unknown };
export type RunNotice = (event: Stripe.Event, notice: StoredNotice) => Promise<Ran>;

export const MAX_REPLAY_PAGE = 1000;

export const reasonOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export async function replayNotices(notices: StripeNoticeStore, run: RunNotice, sel: NoticeSelection): Promise<{ data: ReplayedNotice[]; hasMore: boolean }> {
  const page = await notices.select({ ...sel, limit: sel.limit + 1 });
  const data: ReplayedNotice[] = [];
  for (const notice of page.slice(0, sel.limit)) {
    const base = { eventId: notice.eventId, type: notice.type, created: notice.created.toISOString(), receivedAt: notice.receivedAt.toISOString() };
    const ran = await run(JSON.parse(notice.body) as Stripe.Event, notice);
    if (ran.outcome === null) data.push({ ...base, result: 'failed', outcome: null, events: ran.appended, error: reasonOf(ran.error) });
    else data.push({ ...base, result: ran.appended > 0 ? 'handled' : 'unchanged', outcome: ran.outcome, events: ran.appended, error: null });
  }
  return { data, hasMore: page.length > sel.limit };
}
