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
import { uuidFrom } from '../ledger/event-ids.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { modelDecider, type CorrectionWindow, type ModelCommand, type ModelState } from '../ledger/model.ts';
import { fold } from '../ledger/decider.ts';
import { CORRECTION_COMPONENTS, definedOnly, streams, type CorrectionComponent, type DomainEvent } from '../ledger/events.ts';
import { chatCharge, imageCharge } from '../ledger/pricing.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import { csvCell } from './statements.ts';
import {
  adjustmentsOfCharges,
  chargesInWindowCount,
  chargesPage,
  type ChargeCursor,
  type ChargeRow,
  type ChargeWindow,
} from '../../projections/read-models.ts';
import type { AdjustedCharge } from '../ledger/account-state.ts';
import { isVoidCorrection, VOID_RANK } from '../ledger/charge-void.ts';

export interface CorrectionInput {
  modelId: string;
  from: Date;
  /** End of the window (exclusive). Left out only with alsoFromNow: the window then ends at the act. */
  to?: Date;
  /** What the correction fixes (default 'multiplier'). */
  component?: CorrectionComponent;
  /** The corrected value: thousandths for the multiplier and the cache weights, tokens for image_tokens. */
  value?: number;
  /** The corrected multiplier: the value of a 'multiplier' correction, as before components existed. */
  multiplierMilli?: number;
  reason: string;
  /** Also price the component from now on, in the same append as the correction. */
  alsoFromNow?: boolean;
  /** Chosen by the operator; by default derived from the terms, so the same correction has the same id. */
  correctionId?: string;
}

/** An adjustment already applied to a charge. */
export interface PriorAdjustment {
  correctionId: string;
  delta: number;
}

export interface AffectedCharge {
  eventId: string;
  requestId: string;
  at: string;
  kind: 'chat' | 'image';
  /** The charge as it was billed. */
  billedOriginally: number;
  /** Billed now: the charge plus every adjustment already applied to it. */
  billedNow: number;
  /** Re-priced with every correction covering it, this one included. */
  corrected: number;
  /** corrected - billedNow: what applying the correction adjusts. */
  difference: number;
  /** The same as billedNow (kept for clients of the first report). */
  billed: number;
  /** The multiplier the charge was billed at, and the one it is corrected to. */
  multiplierMilli: number;
  correctedMultiplierMilli: number;
  /** The correction that decides the corrected figure (the latest covering the charge). */
  correctedBy: string;
  /** The corrections already applied to the charge, in order. */
  adjustments: PriorAdjustment[];
  fromQuota: number;
}

interface Figures {
  charges: number;
  billedOriginally: number;
  billedNow: number;
  billed: number;
  corrected: number;
  difference: number;
}

export interface AccountReconciliation extends Figures {
  accountId: string;
  items: AffectedCharge[];
}

export interface ReconciliationReport {
  correctionId: string;
  modelId: string;
  from: string;
  to: string;
  component: CorrectionComponent;
  value: number;
  /** The corrected multiplier for a 'multiplier' correction, else null. */
  multiplierMilli: number | null;
  alsoFromNow: boolean;
  /** Its revision in the model's stream (the order of corrections); for a dry run, the one it would get. */
  revision: number;
  accounts: AccountReconciliation[];
  totals: Figures;
  /** Whether `items` list every charge (false: more than REPORT_ITEMS_MAX; page or stream the detail). */
  itemsComplete: boolean;
}

const componentOf = (c: CorrectionInput): CorrectionComponent => c.component ?? 'multiplier';
const valueOf = (c: CorrectionInput): number | undefined => c.value ?? (componentOf(c) === 'multiplier' ? c.multiplierMilli : undefined);

/** Same terms, same id: the key to applying a correction exactly once. */
export function correctionIdOf(c: CorrectionInput): string {
  const component = componentOf(c);
  const to = c.to ? c.to.toISOString() : 'now';
  // A multiplier correction keeps the id it had before components existed.
  const terms =
    component === 'multiplier'
      ? `correction|${c.modelId}|${c.from.toISOString()}|${to}|${valueOf(c)}`
      : `correction|${c.modelId}|${c.from.toISOString()}|${to}|${component}|${valueOf(c)}`;
  return uuidFrom(c.alsoFromNow ? `${terms}|also-from-now` : terms);
}

export const adjustmentEventId = (correctionId: string, chargeEventId: string) => uuidFrom(`adjustment|${correctionId}|${chargeEventId}`);

/**
 * The rest of a correction request: `component` (default multiplier), the corrected `value` (or
 * `multiplier` for a multiplier correction) as the operator writes it (1.25, a weight of 0.1,
 * 50000 tokens per image), `also_from_now`, `correction_id` and `reason`.
 */
export function correctionInput(b: Record<string, unknown>, base: Pick<CorrectionInput, 'modelId' | 'from' | 'to'>): CorrectionInput {
  const component = b.component === undefined ? 'multiplier' : b.component;
  if (typeof component !== 'string' || !(CORRECTION_COMPONENTS as readonly string[]).includes(component)) {
    throw invalid(`'component' must be one of ${CORRECTION_COMPONENTS.join(', ')}`, { param: 'component' });
  }
  const c = component as CorrectionComponent;
  if (b.multiplier !== undefined && c !== 'multiplier')
    throw invalid(`'multiplier' is for a multiplier correction; a ${c} correction takes 'value'`, { param: 'multiplier' });
  if (b.multiplier !== undefined && b.value !== undefined) throw invalid("give 'multiplier' or 'value', not both", { param: 'value' });
  const param = b.multiplier !== undefined ? 'multiplier' : 'value';
  const raw = b.multiplier ?? b.value;
  if (raw === undefined) throw invalid(c === 'multiplier' ? "'multiplier' is required" : `'value' is required for a ${c} correction`, { param });
  if (typeof raw !== 'number' || !Number.isFinite(raw)) throw invalid(`'${param}' must be a number`, { param });
  let value: number;
  if (c === 'image_tokens') {
    if (!Number.isSafeInteger(raw) || raw < 1) throw invalid("'value' must be a whole number of tokens per image, at least 1", { param });
    value = raw;
  } else {
    if (c === 'multiplier' && raw <= 0) throw invalid(`'${param}' must be a number greater than 0`, { param });
    if (raw < 0) throw invalid(`'${param}' must be 0 or more`, { param });
    value = Math.round(raw * 1000);
    if (Math.abs(value - raw * 1000) > 1e-6) throw invalid(`'${param}' may have at most three decimals`, { param });
  }
  if (b.also_from_now !== undefined && typeof b.also_from_now !== 'boolean') throw invalid("'also_from_now' must be true or false", { param: 'also_from_now' });
  if (b.correction_id !== undefined && (typeof b.correction_id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/.test(b.correction_id))) {
    throw invalid("'correction_id' must be 1-100 letters, digits, '_', '.', ':' or '-'", { param: 'correction_id' });
  }
  return {
    ...base,
    component: c,
    value,
    reason: typeof b.reason === 'string' ? b.reason.slice(0, 500) : '',
    alsoFromNow: b.also_from_now === true,
    ...definedOnly({ correctionId: b.correction_id as string | undefined }),
  };
}

// ---------------------------------------------------------------------------------------------
// Re-pricing one charge

interface PriceInputs {
  multiplierMilli: number;
  cacheReadMilli: number;
  cacheWriteMilli: number;
  tokensPerImage: number;
}

const INPUT_OF: Record<CorrectionComponent, keyof PriceInputs> = {
  multiplier: 'multiplierMilli',
  cache_read_weight: 'cacheReadMilli',
  cache_write_weight: 'cacheWriteMilli',
  image_tokens: 'tokensPerImage',
};

/** The charges a component prices: the multiplier all, cache weights chat, tokens per image images. */
const KINDS: Record<CorrectionComponent, Array<'chat' | 'image'>> = {
  multiplier: ['chat', 'image'],
  cache_read_weight: ['chat'],
  cache_write_weight: ['chat'],
  image_tokens: ['image'],
};

const inputsOf = (r: ChargeRow): PriceInputs => ({
  multiplierMilli: Number(r.multiplier_milli),
  cacheReadMilli: Number(r.cache_read_milli ?? 1000),
  cacheWriteMilli: Number(r.cache_write_milli ?? 1000),
  tokensPerImage: Number(r.tokens_per_image),
});

function priceOf(r: ChargeRow, p: PriceInputs): number {
  return r.kind === 'image'
    ? imageCharge(p.multiplierMilli, Number(r.images), p.tokensPerImage)
    : chatCharge(
        Number(r.prompt_tokens),
        Number(r.completion_tokens),
        p.multiplierMilli,
        { cachedTokens: Number(r.cached_tokens ?? 0), cacheWriteTokens: Number(r.cache_write_tokens ?? 0) },
        { readMilli: p.cacheReadMilli, writeMilli: p.cacheWriteMilli },
      );
}

const covers = (w: CorrectionWindow, r: ChargeRow, at: number) =>
  Date.parse(w.from) <= at && at < Date.parse(w.to) && KINDS[w.component].includes(r.kind as 'chat' | 'image');

/**
 * The charge re-priced with every correction that covers it (`corrections` in stream order: the
 * later one's value wins). A charge that was capped (billed below its price because the account
 * could not cover more) moves by the difference the correction makes to its price, so a
 * correction back to the original inputs gives back exactly what was billed.
 */
function correctedFigure(
  r: ChargeRow,
  corrections: CorrectionWindow[],
): { billed: number; original: PriceInputs; inputs: PriceInputs; owner: CorrectionWindow | null } {
  const at = new Date(r.at).getTime();
  const original = inputsOf(r);
  const inputs = { ...original };
  let owner: CorrectionWindow | null = null;
  for (const w of corrections) {
    if (!covers(w, r, at)) continue;
    inputs[INPUT_OF[w.component]] = w.value;
    owner = w;
  }
  const billed = Number(r.billed);
  if (!owner) return { billed, original, inputs, owner };
  return { billed: Math.max(0, billed + priceOf(r, inputs) - priceOf(r, original)), original, inputs, owner };
}

// ---------------------------------------------------------------------------------------------
// The report, a page of charges at a time

/** One charge to bring to its corrected figure (what the report does not show). */
interface Plan {
  accountId: string;
  row: ChargeRow;
  item: AffectedCharge;
  original: PriceInputs;
  inputs: PriceInputs;
  owner: CorrectionWindow;
  /** The charge's figure now, from the charge log (absent: never adjusted). */
  current?: AdjustedCharge;
}

const zeroFigures = (): Figures => ({ charges: 0, billedOriginally: 0, billedNow: 0, billed: 0, corrected: 0, difference: 0 });
function addTo(f: Figures, i: AffectedCharge): void {
  f.charges++;
  f.billedOriginally += i.billedOriginally;
  f.billedNow += i.billedNow;
  f.billed += i.billed;
  f.corrected += i.corrected;
  f.difference += i.difference;
}

/** The model's state read from its stream now (not from a cache another process may have moved past). */
async function readModel(ledger: Ledger, modelId: string): Promise<ModelState> {
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
const cursorOf = (r: ChargeRow): ChargeCursor => ({ at: new Date(r.at).toISOString(), position: Number(r.position) });

/** A window's charges and the corrections that price them, read a page at a time. */
interface Window {
  modelId: string;
  self: CorrectionWindow;
  corrections: CorrectionWindow[];
}

const chargeWindowOf = (w: Window): ChargeWindow => ({ model: w.modelId, kinds: KINDS[w.self.component], from: w.self.from, to: w.self.to });

/** The next page of the window's charges after `after` (empty at its end). */
async function pageOfCharges(ledger: Ledger, w: Window, after: ChargeCursor | null, limit = CHARGES_PAGE): Promise<ChargeRow[]> {
  return chargesPage(ledger.readModels.db, ledger.rmSchema, chargeWindowOf(w), after, limit);
}

/** These charges as billed, as billed now (the charge log's adjustments of them) and as corrected. */
async function plansFor(ledger: Ledger, w: Window, rows: ChargeRow[]): Promise<Plan[]> {
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
  for (const r of rows) {
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

/** Gives the event loop to live traffic between two pages of operator work. */
const yieldToTraffic = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Every page of the window's charges, as plans, in order (reading the next page while the caller works on this one). */
async function* pagesOfPlans(ledger: Ledger, w: Window, pageSize = CHARGES_PAGE): AsyncGenerator<Plan[]> {
  let next = pageOfCharges(ledger, w, null, pageSize);
  for (;;) {
    const rows = await next;
    if (rows.length === 0) return;
    next = rows.length < pageSize ? Promise.resolve([]) : pageOfCharges(ledger, w, cursorOf(rows[rows.length - 1]), pageSize);
    next.catch(() => undefined); // awaited on the next turn; a failure then is the caller's
    yield await plansFor(ledger, w, rows);
    await yieldToTraffic();
  }
}

/** Most charges listed in a report's `items` (beyond them the report has the figures, and the detail is paged or streamed). */
export const REPORT_ITEMS_MAX = 1_000;

/** Per-account and total figures over a whole window, with the items while there are few enough. */
class ReportBuilder {
  private readonly byAccount = new Map<string, AccountReconciliation>();
  readonly totals = zeroFigures();
  itemsComplete = true;
  add(plans: Plan[]): void {
    for (const p of plans) {
      let a = this.byAccount.get(p.accountId);
      if (!a) this.byAccount.set(p.accountId, (a = { accountId: p.accountId, ...zeroFigures(), items: [] }));
      addTo(a, p.item);
      addTo(this.totals, p.item);
      if (this.itemsComplete) a.items.push(p.item);
    }
    if (this.itemsComplete && this.totals.charges > REPORT_ITEMS_MAX) {
      this.itemsComplete = false;
      for (const a of this.byAccount.values()) a.items = [];
    }
  }
  accounts(): AccountReconciliation[] {
    return [...this.byAccount.values()].sort((x, y) => (x.accountId < y.accountId ? -1 : x.accountId > y.accountId ? 1 : 0));
  }
}

// ---------------------------------------------------------------------------------------------
// Dry run and apply

function correctCommand(c: CorrectionInput, correctionId: string, now: Date): Extract<ModelCommand, { type: 'Correct' }> {
  if (!(c.from instanceof Date) || Number.isNaN(c.from.getTime())) throw invalid("'from' must be an ISO 8601 time", { param: 'from' });
  if (c.to !== undefined && (!(c.to instanceof Date) || Number.isNaN(c.to.getTime()))) throw invalid("'to' must be an ISO 8601 time", { param: 'to' });
  if (c.to === undefined && !c.alsoFromNow)
    throw invalid("'to' is required (it may be left out only with also_from_now: the window then ends now)", { param: 'to' });
  return {
    type: 'Correct',
    correctionId,
    from: c.from,
    to: c.to ?? now,
    reason: c.reason.slice(0, 500),
    now,
    component: componentOf(c),
    ...definedOnly({ value: valueOf(c) }),
    alsoFromNow: c.alsoFromNow === true,
    toIsNow: c.to === undefined,
  };
}

/** The model's corrections with this one among them: as recorded, or where it would be appended. */
function withCorrection(model: ModelState, command: Extract<ModelCommand, { type: 'Correct' }>): { corrections: CorrectionWindow[]; self: CorrectionWindow } {
  const events = modelDecider.decide(command, model); // refuses bad terms and a reused id: nothing is written
  const corrections = events.length ? fold(modelDecider, events, model).corrections : model.corrections;
  return { corrections, self: corrections.find((w) => w.correctionId === command.correctionId)! };
}

function reportOf(self: CorrectionWindow, modelId: string, r: ReportBuilder): ReconciliationReport {
  return {
    correctionId: self.correctionId,
    modelId,
    from: self.from,
    to: self.to,
    component: self.component,
    value: self.value,
    multiplierMilli: self.component === 'multiplier' ? self.value : null,
    alsoFromNow: self.alsoFromNow,
    revision: self.revision,
    accounts: r.accounts(),
    totals: r.totals,
    itemsComplete: r.itemsComplete,
  };
}

async function modelOrNotFound(ledger: Ledger, modelId: string): Promise<ModelState> {
  const model = await readModel(ledger, modelId);
  if (!model.exists) throw new DomainError('not_found', `model ${modelId} not found`);
  return model;
}

/** The correction's window as it would be applied now (refusing bad terms, an unknown model, a reused id). */
async function windowOf(ledger: Ledger, c: CorrectionInput): Promise<Window> {
  const command = correctCommand(c, c.correctionId ?? correctionIdOf(c), new Date());
  const model = await modelOrNotFound(ledger, c.modelId);
  const { corrections, self } = withCorrection(model, command);
  await ledger.caughtUp();
  return { modelId: c.modelId, self, corrections };
}

/** A charge of the detail: which account it is on, and its figures. */
export type ChargeDetail = AffectedCharge & { accountId: string };

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
    for await (const plans of pagesOfPlans(ledger, w)) {
      report.add(plans);
      if (opts.onCharge) for (const p of plans) await opts.onCharge({ accountId: p.accountId, ...p.item });
    }
    return reportOf(w.self, c.modelId, report);
  };
}

/** The reconciliation report (see prepareDryRun). Writes nothing. */
export async function dryRunCorrection(ledger: Ledger, c: CorrectionInput, opts: DryRunOptions = {}): Promise<ReconciliationReport> {
  return (await prepareDryRun(ledger, c))(opts);
}

const DETAIL_COLUMNS = [
  'account_id',
  'event_id',
  'request_id',
  'at',
  'kind',
  'billed_originally',
  'billed_now',
  'corrected',
  'difference',
  'multiplier',
  'corrected_multiplier',
  'corrected_by',
  'from_quota',
  'adjusted_by',
] as const;
const FIGURE_COLUMNS = ['charges', 'billed_originally', 'billed_now', 'corrected', 'difference'] as const;

/** The dry run's detail as CSV: its header line, then one line per charge. */
export const detailCsvHeader = (): string => DETAIL_COLUMNS.join(',') + '\n';
export function detailCsvLine(c: ChargeDetail): string {
  return (
    [
      c.accountId,
      c.eventId,
      c.requestId,
      c.at,
      c.kind,
      c.billedOriginally,
      c.billedNow,
      c.corrected,
      c.difference,
      c.multiplierMilli / 1000,
      c.correctedMultiplierMilli / 1000,
      c.correctedBy,
      c.fromQuota,
      c.adjustments.map((a) => `${a.correctionId}:${a.delta}`).join(' '),
    ]
      .map(csvCell)
      .join(',') + '\n'
  );
}
/** The CSV's end: after a blank line, one line per account and the total. */
export function detailCsvFooter(r: ReconciliationReport): string {
  const figures = (f: Figures) => [f.charges, f.billedOriginally, f.billedNow, f.corrected, f.difference].join(',');
  return [
    '',
    ['account_id', ...FIGURE_COLUMNS].join(','),
    ...r.accounts.map((a) => `${csvCell(a.accountId)},${figures(a)}`),
    `total,${figures(r.totals)}`,
    '',
  ].join('\n');
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

/** Passes over the window at most this often (a pass runs again only when newer overlapping corrections appeared during it). */
const MAX_PASSES = 8;
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
  await ledger.model(c.modelId, command, md);

  let report: ReconciliationReport | null = null;
  let appended = 0;
  let alreadyApplied = 0;
  let passes = 0;
  for (;;) {
    passes++;
    const model = await readModel(ledger, c.modelId);
    const self = model.corrections.find((w) => w.correctionId === correctionId);
    if (!self) throw new Error(`correction ${correctionId} is not in the stream of model ${c.modelId}`);
    const w: Window = { modelId: c.modelId, self, corrections: model.corrections };
    await ledger.caughtUp();
    const total = await chargesInWindowCount(ledger.readModels.db, ledger.rmSchema, chargeWindowOf(w));
    const first = passes === 1 ? new ReportBuilder() : null;
    const adjuster = new PageAdjuster(ledger, w, md);
    let done = 0;
    opts.onProgress?.({ phase: 'adjust', done, total, appended, pass: passes });
    for await (const plans of pagesOfPlans(ledger, w, opts.pageSize)) {
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
}

/** Whether an adjustment would change the charge: its figure differs and no newer correction decided it. */
const needsAdjusting = (p: Plan) => p.item.difference !== 0 && !(p.current && p.owner.revision <= p.current.rank);

/**
 * Brings a pass's pages of charges to their corrected figures. Each account's adjustments are
 * decided on its stream against the figures the charge log has for the charges, at the account's
 * count of adjustments when they were read (see AdjustCommand): this pass keeps that count per
 * account, adding what it appends, so the log is read once per page. When another writer adjusted
 * the account meanwhile, the account refuses, and its charges of the page are read again.
 */
class PageAdjuster {
  /** Adjustments each account has, as this pass knows it (the charge log includes all of them). */
  private readonly seen = new Map<string, { count: number; last: string }>();
  constructor(
    private readonly ledger: Ledger,
    private readonly w: Window,
    private readonly md: ReturnType<typeof metadataFor>,
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
          this.ledger.forgetAccount(accountId);
          const state = await this.ledger.accountState(accountId);
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
      await Promise.all(
        [...byAccount].map(async ([accountId, list]) => {
          const base = this.seen.get(accountId)!;
          // Each command names the one before it: if another writer gets in anywhere, the rest are refused.
          const results = await Promise.allSettled(
            list.map((p, i) => this.adjust(p, base.count + i, i === 0 ? base.last : `${list[i - 1].owner.correctionId}|${list[i - 1].item.eventId}`)),
          );
          const done = results.filter((r) => r.status === 'fulfilled' && r.value).length;
          appended += done;
          const failed = results.find((r) => r.status === 'rejected' && !isStale(r.reason));
          if (failed) throw (failed as PromiseRejectedResult).reason;
          const last = list[list.length - 1];
          if (done === list.length) this.seen.set(accountId, { count: base.count + done, last: `${last.owner.correctionId}|${last.item.eventId}` });
          else {
            this.seen.delete(accountId);
            stale.push(...list);
          }
        }),
      );
      if (stale.length === 0) return appended;
      if (attempt >= MAX_RESYNCS) throw new DomainError('conflict', 'the accounts kept being adjusted by another writer; apply the correction again');
      plans = stale;
    }
  }

  /** Appends one adjustment; whether it appended one (false: the account decided nothing needs changing). */
  private async adjust(p: Plan, adjustmentsSeen: number, lastAdjustment: string): Promise<boolean> {
    const changed = (k: keyof PriceInputs) => (p.inputs[k] !== p.original[k] ? p.inputs[k] : undefined);
    const r = await this.ledger.account(
      p.accountId,
      {
        type: 'Adjust',
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
        adjustmentsSeen,
        lastAdjustment,
        ...definedOnly({
          keyId: p.row.key_id ?? undefined,
          current: p.current,
          cacheReadMilliCorrected: changed('cacheReadMilli'),
          cacheWriteMilliCorrected: changed('cacheWriteMilli'),
          tokensPerImageCorrected: changed('tokensPerImage'),
        }),
      },
      this.md,
      () => adjustmentEventId(p.owner.correctionId, p.item.eventId),
    );
    return r.events.length > 0;
  }
}

/** The account moved since its figures were read (another writer's adjustment), or the same adjustment is already there. */
const isStale = (err: unknown) => (err instanceof DomainError && err.code === 'conflict') || err instanceof DuplicateEventError;
