// Reading a correction's window: the model's corrections, the window's charges a page at a time
// from the charge log (with what each is billed now), and each charge's plan (its corrected figure).
import type { Ledger } from '../ledger/ledger.ts';
import { modelDecider, type CorrectionWindow, type ModelState } from '../catalogue/index.ts';
import { fold } from '../ledger/decider.ts';
import { definedOnly, streams, type DomainEvent } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import type { AdjustedCharge } from '../accounts/index.ts';
import {
  adjustmentsOfCharges,
  type ChargeCursor,
  type ChargeRow,
  chargesPage,
  type ChargeWindow,
  ensureChargeStatistics,
  isVoidCorrection,
  VOID_RANK,
} from '../calls/index.ts';
import { correctCommand, correctionIdOf, withCorrection, type CorrectionInput } from './corrections-terms.ts';
import { correctedFigure, KINDS, type PriceInputs } from './corrections-pricing.ts';
import type { AffectedCharge, PriorAdjustment } from './corrections-report.ts';
import type { Pacer } from './pacing.ts';
import { TimeSlicer } from '../next-turn.ts';

/** One charge to bring to its corrected figure (what the report does not show). */
export interface Plan {
  accountId: string;
  row: ChargeRow;
  item: AffectedCharge;
  original: PriceInputs;
  inputs: PriceInputs;
  owner: CorrectionWindow;
  /** The charge's figure now, from the charge log (absent: never adjusted). */
  current?: AdjustedCharge;
}

/** The model's state read from its stream now (not from a cache another process may have moved past). */
export async function readModel(ledger: Ledger, modelId: string): Promise<ModelState> {
  const events = await ledger.events.readStream(streams.model(modelId), 0);
  return fold(
    modelDecider,
    events.map((e) => ({ type: e.type, data: e.data }) as DomainEvent),
  );
}

/** Charges read from the charge log at a time: one page is one index range and one batch of adjustments. */
export const CHARGES_PAGE = 2_000;

/** A place in the window's charges: after this charge (opaque to clients). */
export const encodeCursor = (c: ChargeCursor): string => Buffer.from(`${c.at}|${c.position}`).toString('base64url');
export function decodeCursor(text: string): ChargeCursor {
  const [at, position] = Buffer.from(text, 'base64url').toString().split('|');
  if (!at || Number.isNaN(Date.parse(at)) || !/^\d+$/.test(position ?? '')) throw invalid("'after' is not a cursor this report gave", { param: 'after' });
  return { at, position: Number(position) };
}
export const cursorOf = (r: ChargeRow): ChargeCursor => ({ at: new Date(r.at).toISOString(), position: Number(r.position) });

/** A window's charges and the corrections that price them, read a page at a time. */
export interface Window {
  modelId: string;
  self: CorrectionWindow;
  corrections: CorrectionWindow[];
}

export const chargeWindowOf = (w: Window): ChargeWindow => ({ model: w.modelId, kinds: KINDS[w.self.component], from: w.self.from, to: w.self.to });

/** The next page of the window's charges after `after` (empty at its end). */
export async function pageOfCharges(ledger: Ledger, w: Window, after: ChargeCursor | null, limit = CHARGES_PAGE): Promise<ChargeRow[]> {
  return chargesPage(ledger.readModels.db, ledger.rmSchema, chargeWindowOf(w), after, limit);
}

/** These charges as billed, as billed now (the charge log's adjustments of them) and as corrected. */
export async function plansFor(ledger: Ledger, w: Window, rows: ChargeRow[]): Promise<Plan[]> {
  const revisionOf = new Map(w.corrections.map((c) => [c.correctionId, c.revision]));
  const prior = new Map<string, { list: PriorAdjustment[]; now: AdjustedCharge }>();
  const adjustments = await adjustmentsOfCharges(
    ledger.readModels.db,
    ledger.rmSchema,
    rows.map((r) => r.event_id),
  );
  // An adjustment by a correction appended after this pass read the model (another gateway's):
  // its revision from the model's stream now, so an older correction never overrides it.
  if (adjustments.some((a) => !revisionOf.has(a.correction_id) && !isVoidCorrection(a.correction_id)))
    for (const c of (await readModel(ledger, w.modelId)).corrections) revisionOf.set(c.correctionId, c.revision);
  for (const a of adjustments) {
    const p = prior.get(a.charge_event_id) ?? { list: [], now: { billed: 0, quotaDelta: 0, multiplierMilli: 0, rank: -1 } };
    prior.set(a.charge_event_id, p);
    p.list.push({ correctionId: a.correction_id, delta: Number(a.billed) });
    p.now.billed += Number(a.billed);
    p.now.quotaDelta += Number(a.from_quota);
    p.now.multiplierMilli = Number(a.multiplier_milli);
    // A voided charge (its call failed) stays voided: no correction re-prices it.
    p.now.rank = Math.max(p.now.rank, revisionOf.get(a.correction_id) ?? (isVoidCorrection(a.correction_id) ? VOID_RANK : -1));
  }
  const plans: Plan[] = [];
  const slicer = new TimeSlicer(); // live calls get turns between slices of a page
  for (const r of rows) {
    if (slicer.used()) await slicer.rest();
    const fig = correctedFigure(r, w.corrections);
    if (!fig.owner) continue; // not in `corrections` (cannot happen for the window of one of them)
    const applied = prior.get(r.event_id);
    const billedOriginally = Number(r.billed);
    const billedNow = billedOriginally + (applied?.now.billed ?? 0);
    const item: AffectedCharge = {
      eventId: r.event_id,
      requestId: r.request_id,
      at: new Date(r.at).toISOString(),
      kind: r.kind as 'chat' | 'image',
      billedOriginally,
      billedNow,
      corrected: fig.billed,
      difference: fig.billed - billedNow,
      billed: billedNow,
      multiplierMilli: fig.original.multiplierMilli,
      correctedMultiplierMilli: fig.inputs.multiplierMilli,
      correctedBy: fig.owner.correctionId,
      adjustments: applied?.list ?? [],
      fromQuota: Number(r.from_quota),
    };
    const current = applied ? { ...applied.now, billed: billedNow } : undefined;
    plans.push({ accountId: r.account_id, row: r, item, original: fig.original, inputs: fig.inputs, owner: fig.owner, ...definedOnly({ current }) });
  }
  return plans;
}

/** Every page of the window's charges, as plans, in order (reading the next page while the caller works on this one; `pacer` steps between two pages). */
export async function* pagesOfPlans(ledger: Ledger, w: Window, pacer: Pacer, pageSize = CHARGES_PAGE): AsyncGenerator<Plan[]> {
  let next = pageOfCharges(ledger, w, null, pageSize);
  for (;;) {
    const rows = await next;
    if (rows.length === 0) return;
    next = rows.length < pageSize ? Promise.resolve([]) : pageOfCharges(ledger, w, cursorOf(rows[rows.length - 1]), pageSize);
    next.catch(() => undefined); // awaited on the next turn; a failure then is the caller's
    yield await plansFor(ledger, w, rows);
    await pacer.step();
  }
}

export async function modelOrNotFound(ledger: Ledger, modelId: string): Promise<ModelState> {
  const model = await readModel(ledger, modelId);
  if (!model.exists) throw new DomainError('not_found', `model ${modelId} not found`);
  return model;
}

/** The correction's window as it would be applied now (refusing bad terms, an unknown model, a reused id). */
export async function windowOf(ledger: Ledger, c: CorrectionInput): Promise<Window> {
  const command = correctCommand(c, c.correctionId ?? correctionIdOf(c), new Date());
  const model = await modelOrNotFound(ledger, c.modelId);
  const { corrections, self } = withCorrection(model, command);
  await ledger.caughtUp();
  await ensureChargeStatistics(ledger.readModels.db, ledger.rmSchema);
  return { modelId: c.modelId, self, corrections };
}
