// Retroactive price corrections. A correction never edits a charge: it appends the correction to
// the model's stream (with, when asked, the price from now on in the same append) and one
// compensating ChargeAdjusted per charge whose figure it changes.
//
// Corrections compose. They are ordered by their revision in the model's stream; for each charge,
// every priced input (multiplier, cache weights, tokens per image) takes the value of the latest
// correction covering the charge's time, or stays as charged. The corrected figure is the charge
// re-priced with those inputs, and the adjustment is its difference from what is billed for the
// charge now (the charge plus every adjustment already applied to it), never from the original.
//
// Safe to apply twice and side by side: the adjustment is decided on the account's stream against
// the account's own record of what each charge is billed now (optimistic concurrency), it carries
// the revision of the correction that decided it, so an older correction applied later cannot
// override a newer one, and its event id is derived from (that correction, the charge). A pass
// that finds newer overlapping corrections when it ends runs again with them.
//
// The family: corrections-terms.ts (the request, its id, its place among the model's
// corrections), corrections-pricing.ts (re-pricing a charge), corrections-plans.ts (reading the
// window a page at a time), corrections-report.ts (the reconciliation report and its CSV),
// corrections-apply.ts (appending the adjustments), and this module: the dry run.
import type { Ledger } from '../ledger/ledger.ts';
import type { CorrectionInput } from './corrections-terms.ts';
import { cursorOf, decodeCursor, encodeCursor, pageOfCharges, pagesOfPlans, plansFor, windowOf } from './corrections-plans.ts';
import { ReportBuilder, reportOf, type ChargeDetail, type ReconciliationReport } from './corrections-report.ts';
import { invalid } from '../ledger/errors.ts';
import { Pacer } from './pacing.ts';

export interface DryRunOptions {
  /** Hears of every charge, in order (a streamed detail); the next page waits for its promise. */
  onCharge?: (charge: ChargeDetail) => void | Promise<void>;
}

/**
 * Checks the terms (bad ones, an unknown model, a reused id are refused here), then answers the
 * function that runs the dry run: the reconciliation report, every charge the correction covers,
 * as billed originally, billed now and corrected, per account and in total. Writes nothing. It
 * reads the window a page at a time: `items` lists the charges only while the window holds at
 * most REPORT_ITEMS_MAX of them (`itemsComplete`); `onCharge` hears of every one.
 */
export async function prepareDryRun(ledger: Ledger, c: CorrectionInput): Promise<(opts?: DryRunOptions) => Promise<ReconciliationReport>> {
  const w = await windowOf(ledger, c);
  return async (opts = {}) => {
    const report = new ReportBuilder();
    const pacer = new Pacer();
    try {
      for await (const plans of pagesOfPlans(ledger, w, pacer)) {
        report.add(plans);
        if (opts.onCharge) for (const p of plans) await opts.onCharge({ accountId: p.accountId, ...p.item });
      }
    } finally {
      pacer.stop();
    }
    return reportOf(w.self, c.modelId, report);
  };
}

/** The reconciliation report (see prepareDryRun). Writes nothing. */
export async function dryRunCorrection(ledger: Ledger, c: CorrectionInput, opts: DryRunOptions = {}): Promise<ReconciliationReport> {
  return (await prepareDryRun(ledger, c))(opts);
}

export interface ChargesPage {
  correctionId: string;
  items: ChargeDetail[];
  /** Where the next page starts (`after`), or null at the end of the window. */
  next: string | null;
}

/** Most charges in one page of the dry run's detail. */
export const DETAIL_PAGE_MAX = 10_000;

/** One page of the dry run's detail: up to `limit` charges after the cursor `after`. Writes nothing. */
export async function dryRunPage(ledger: Ledger, c: CorrectionInput, after: string | null, limit: number): Promise<ChargesPage> {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > DETAIL_PAGE_MAX)
    throw invalid(`'limit' must be a whole number from 1 to ${DETAIL_PAGE_MAX}`, { param: 'limit' });
  const cursor = after === null ? null : decodeCursor(after);
  const w = await windowOf(ledger, c);
  const rows = await pageOfCharges(ledger, w, cursor, limit);
  const plans = await plansFor(ledger, w, rows);
  return {
    correctionId: w.self.correctionId,
    items: plans.map((p) => ({ accountId: p.accountId, ...p.item })),
    next: rows.length === limit ? encodeCursor(cursorOf(rows[rows.length - 1])) : null,
  };
}
