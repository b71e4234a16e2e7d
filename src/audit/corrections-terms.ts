// A correction's terms: the operator's request read and checked, its id (same terms, same id),
// the model command that records it, and where it falls among the model's corrections. Pure.
import { uuidFrom } from '../ledger/event-ids.ts';
import { modelDecider, type CorrectionWindow, type ModelCommand, type ModelState } from '../catalogue/index.ts';
import { fold } from '../ledger/decider.ts';
import { CORRECTION_COMPONENTS, definedOnly, type CorrectionComponent } from '../ledger/events.ts';
import { invalid } from '../ledger/errors.ts';

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

export const componentOf = (c: CorrectionInput): CorrectionComponent => c.component ?? 'multiplier';
export const valueOf = (c: CorrectionInput): number | undefined => c.value ?? (componentOf(c) === 'multiplier' ? c.multiplierMilli : undefined);

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

export function correctCommand(c: CorrectionInput, correctionId: string, now: Date): Extract<ModelCommand, { type: 'Correct' }> {
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
export function withCorrection(
  model: ModelState,
  command: Extract<ModelCommand, { type: 'Correct' }>,
): { corrections: CorrectionWindow[]; self: CorrectionWindow } {
  const events = modelDecider.decide(command, model); // refuses bad terms and a reused id: nothing is written
  const corrections = events.length ? fold(modelDecider, events, model).corrections : model.corrections;
  return { corrections, self: corrections.find((w) => w.correctionId === command.correctionId)! };
}
