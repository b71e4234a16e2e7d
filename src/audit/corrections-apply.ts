// Applying a correction: the correction appended to the model's stream, then every charge of its
// window brought to its corrected figure, a page at a time, by adjustments decided on the
// accounts' streams. Safe to run again and side by side (see corrections.ts).
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import type { ModelCommand } from '../catalogue/index.ts';
import { definedOnly } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import type { ChargeToAdjust } from '../accounts/index.ts';
import { Pacer } from './pacing.ts';
import { chargesInWindowCount, ensureChargeStatistics } from '../calls/index.ts';
import { adjustmentEventId, correctCommand, correctionIdOf, withCorrection, type CorrectionInput } from './corrections-terms.ts';
import type { PriceInputs } from './corrections-pricing.ts';
import { ReportBuilder, reportOf, type ReconciliationReport } from './corrections-report.ts';
import { chargeWindowOf, modelOrNotFound, pagesOfPlans, plansFor, readModel, type Plan, type Window } from './corrections-plans.ts';
import { accountCommand, accountState } from '../accounts/index.ts';
import { modelCommand } from '../catalogue/index.ts';

/** Passes over the window at most this often (a pass runs again only when newer overlapping corrections appeared during it). */
const MAX_PASSES = 8;
/** The most charges one AdjustPage command decides (an account's part of a page may hold more). */
const CHARGES_PER_COMMAND = 200;
/** Times one account's adjustments of a page are decided again after another writer adjusted the account meanwhile. */
const MAX_RESYNCS = 20;

export interface AppliedCorrection {
  report: ReconciliationReport;
  appended: number;
  alreadyApplied: number;
  passes: number;
}

export interface CorrectionProgress {
  phase: 'adjust';
  /** Charges of the window gone through in this pass, of `total`. */
  done: number;
  total: number;
  appended: number;
  pass: number;
}

/**
 * Appends the correction (and the price from now on, with alsoFromNow) and brings every charge in
 * its window to its corrected figure, a page at a time. Safe to run again, and side by side with
 * other corrections; an interrupted one is finished by running it again (every adjustment has a
 * deterministic id and is decided against what is billed now). The report is the one before this
 * call's adjustments (billed now, corrected, difference).
 */
export async function applyCorrection(ledger: Ledger, c: CorrectionInput, actor: string, opts: ApplyOptions = {}): Promise<AppliedCorrection> {
  return (await prepareCorrection(ledger, c, actor))(opts);
}

export interface ApplyOptions {
  onProgress?: (p: CorrectionProgress) => void;
  /** Charges read and adjusted together (default CHARGES_PAGE); progress is told after each page. */
  pageSize?: number;
  /** The most charges of one account one command decides (default CHARGES_PER_COMMAND). */
  chargesPerCommand?: number;
}

/** Checks the terms (bad ones, an unknown model, a reused id are refused here, before anything is written), then answers the function that applies it (applyCorrection). */
export async function prepareCorrection(ledger: Ledger, c: CorrectionInput, actor: string): Promise<(opts?: ApplyOptions) => Promise<AppliedCorrection>> {
  const now = new Date();
  const correctionId = c.correctionId ?? correctionIdOf(c);
  const command = correctCommand(c, correctionId, now);
  withCorrection(await modelOrNotFound(ledger, c.modelId), command);
  return (opts = {}) => applyChecked(ledger, c, correctionId, command, metadataFor(actor, correctionId), opts);
}

async function applyChecked(
  ledger: Ledger,
  c: CorrectionInput,
  correctionId: string,
  command: Extract<ModelCommand, { type: 'Correct' }>,
  md: ReturnType<typeof metadataFor>,
  opts: ApplyOptions,
): Promise<AppliedCorrection> {
  await modelCommand(ledger, c.modelId, command, md);
  await ensureChargeStatistics(ledger.readModels.db, ledger.rmSchema);

  let report: ReconciliationReport | null = null;
  let appended = 0;
  let alreadyApplied = 0;
  let passes = 0;
  // Paced against the read side, a page behind: the next page waits until the page before this
  // one is projected (in this process, beside live calls), so a page's projection overlaps the
  // next one's planning and append, and the backlog never grows past two pages. A read side that
  // is slow to answer only slows the pace: the figures are read after caughtUp below.
  let projected: Promise<void> = Promise.resolve();
  const pacer = new Pacer(() => {
    const previous = projected;
    projected = ledger.caughtUp().catch(() => undefined);
    return previous;
  });
  try {
    for (;;) {
      passes++;
      const model = await readModel(ledger, c.modelId);
      const self = model.corrections.find((w) => w.correctionId === correctionId);
      if (!self) throw new Error(`correction ${correctionId} is not in the stream of model ${c.modelId}`);
      const w: Window = { modelId: c.modelId, self, corrections: model.corrections };
      await ledger.caughtUp();
      const total = await chargesInWindowCount(ledger.readModels.db, ledger.rmSchema, chargeWindowOf(w));
      const first = passes === 1 ? new ReportBuilder() : null;
      const adjuster = new PageAdjuster(ledger, w, md, opts.chargesPerCommand ?? CHARGES_PER_COMMAND);
      let done = 0;
      opts.onProgress?.({ phase: 'adjust', done, total, appended, pass: passes });
      for await (const plans of pagesOfPlans(ledger, w, pacer, opts.pageSize)) {
        if (first) {
          first.add(plans);
          alreadyApplied += plans.filter((p) => p.item.difference === 0 && p.item.adjustments.length > 0).length;
        }
        appended += await adjuster.apply(plans);
        done += plans.length;
        opts.onProgress?.({ phase: 'adjust', done: Math.min(done, total), total: Math.max(done, total), appended, pass: passes });
      }
      if (first) report = reportOf(self, c.modelId, first);
      // A correction appended after this pass read the model, overlapping this window, may have
      // been applied before this pass's adjustments: run again with it, so the newest wins.
      const after = await readModel(ledger, c.modelId);
      const newer = after.corrections.some(
        (o) => o.revision > model.revision && Date.parse(o.from) < Date.parse(self.to) && Date.parse(self.from) < Date.parse(o.to),
      );
      if (!newer || passes >= MAX_PASSES) break;
    }
    await ledger.caughtUp();
    return { report: report!, appended, alreadyApplied, passes };
  } finally {
    pacer.stop();
  }
}

/** Whether an adjustment would change the charge: its figure differs and no newer correction decided it. */
const needsAdjusting = (p: Plan) => p.item.difference !== 0 && !(p.current && p.owner.revision <= p.current.rank);

/**
 * Brings a pass's pages of charges to their corrected figures. Each account's adjustments of a
 * page are AdjustPage commands of up to CHARGES_PER_COMMAND charges (one decision, one append
 * each, one after another), decided on its stream against the figures the charge log has for the
 * charges, at the account's count of adjustments when they were read: this pass keeps that count
 * per account from what its commands leave, so the log is read once per page. When another writer
 * adjusted the account meanwhile, the account refuses the command, and its charges of the page
 * from there on are read again.
 */
class PageAdjuster {
  /** Adjustments each account has, as this pass knows it (the charge log includes all of them). */
  private readonly seen = new Map<string, { count: number; last: string }>();
  constructor(
    private readonly ledger: Ledger,
    private readonly w: Window,
    private readonly md: ReturnType<typeof metadataFor>,
    private readonly perCommand: number,
  ) {}

  /** Appends the page's adjustments; the number appended. */
  async apply(page: Plan[]): Promise<number> {
    let plans = page;
    let appended = 0;
    for (let attempt = 0; ; attempt++) {
      const fresh = [...new Set(plans.filter((p) => needsAdjusting(p) && !this.seen.has(p.accountId)).map((p) => p.accountId))];
      if (fresh.length > 0) {
        // The count first, then the charge log caught up to it: the figures then include every
        // adjustment counted (and one more means a writer got in between: refused, read again).
        for (const accountId of fresh) {
          const state = await accountState(this.ledger, accountId);
          this.seen.set(accountId, { count: state.adjustments, last: state.lastAdjustment });
        }
        await this.ledger.caughtUp();
        plans = await plansFor(
          this.ledger,
          this.w,
          plans.map((p) => p.row),
        );
      }
      const byAccount = new Map<string, Plan[]>();
      for (const p of plans) {
        if (!needsAdjusting(p)) continue;
        const list = byAccount.get(p.accountId);
        if (list) list.push(p);
        else byAccount.set(p.accountId, [p]);
      }
      const stale: Plan[] = [];
      // Once one account's command fails, the others append no further part: the apply has failed.
      let failed = false;
      await Promise.all(
        [...byAccount].map(async ([accountId, list]) => {
          // One command per part: deciding a big account's whole page at once would hold the
          // event loop for tens of milliseconds.
          for (let at = 0; at < list.length && !failed; at += this.perCommand) {
            const base = this.seen.get(accountId)!;
            try {
              const r = await this.adjustPage(accountId, list.slice(at, at + this.perCommand), base);
              appended += r.events.length;
              this.seen.set(accountId, { count: r.state.adjustments, last: r.state.lastAdjustment });
            } catch (err) {
              if (!isStale(err)) {
                failed = true;
                throw err;
              }
              this.seen.delete(accountId);
              stale.push(...list.slice(at));
              return;
            }
          }
        }),
      );
      if (stale.length === 0) return appended;
      if (attempt >= MAX_RESYNCS) throw new DomainError('conflict', 'the accounts kept being adjusted by another writer; apply the correction again');
      plans = stale;
    }
  }

  /** Appends one account's adjustments of the page, as one command. */
  private adjustPage(accountId: string, list: Plan[], base: { count: number; last: string }) {
    return accountCommand(
      this.ledger,
      accountId,
      { type: 'AdjustPage', adjustmentsSeen: base.count, lastAdjustment: base.last, charges: list.map(chargeToAdjust) },
      this.md,
      (e) => {
        const d = e.data as { correctionId: string; chargeEventId: string };
        return adjustmentEventId(d.correctionId, d.chargeEventId);
      },
      // Live calls' appends do not queue behind a page of adjustments.
      { background: true },
    );
  }
}

/** What the account needs to know of a charge to adjust it (see AdjustCommand). */
function chargeToAdjust(p: Plan): ChargeToAdjust {
  const changed = (k: keyof PriceInputs) => (p.inputs[k] !== p.original[k] ? p.inputs[k] : undefined);
  return {
    correctionId: p.owner.correctionId,
    correctionRevision: p.owner.revision,
    chargeEventId: p.item.eventId,
    requestId: p.item.requestId,
    model: p.row.model,
    chargedAt: p.item.at,
    billedBefore: p.item.billedOriginally,
    billedCorrected: p.item.corrected,
    multiplierMilliBefore: p.original.multiplierMilli,
    multiplierMilliCorrected: p.inputs.multiplierMilli,
    fromQuotaBefore: p.item.fromQuota,
    ...definedOnly({
      keyId: p.row.key_id ?? undefined,
      current: p.current,
      cacheReadMilliCorrected: changed('cacheReadMilli'),
      cacheWriteMilliCorrected: changed('cacheWriteMilli'),
      tokensPerImageCorrected: changed('tokensPerImage'),
    }),
  };
}

/** The account moved since its figures were read (another writer's adjustment), or the same adjustment is already there. */
const isStale = (err: unknown) => (err instanceof DomainError && err.code === 'conflict') || err instanceof DuplicateEventError;
