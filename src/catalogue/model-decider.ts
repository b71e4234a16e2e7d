// The model decider: price (multiplier, status, alias, effective from now) and retroactive
// corrections over past time windows. Windows may overlap: corrections are ordered by their
// revision in this stream, and where two cover the same charge the later one decides.
import { isDeepStrictEqual } from 'node:util';
import type { Decider } from '../ledger/decider.ts';
import { definedOnly, type CachePrice, type CorrectionComponent, type DomainEvent, type StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';

export interface CorrectionWindow {
  correctionId: string;
  from: string;
  to: string;
  /** What it fixes, and the corrected value (thousandths, or tokens for image_tokens). */
  component: CorrectionComponent;
  value: number;
  alsoFromNow: boolean;
  /** Its revision in the model's stream: the order of corrections. */
  revision: number;
}

export interface ModelState {
  exists: boolean;
  modelId: string;
  multiplierMilli: number;
  status: 'ACTIVE' | 'INACTIVE';
  alias: string | null;
  corrections: CorrectionWindow[];
  /** Optional cache weights of the price (thousandths); absent: the specification's rule. */
  cache?: CachePrice;
  /** Revision of the last event folded (-1: none): the stream's revision. */
  revision: number;
}

export type ModelCommand =
  | {
      type: 'Price';
      modelId: string;
      multiplierMilli?: number;
      status?: 'ACTIVE' | 'INACTIVE';
      alias?: string | null;
      cacheReadMilli?: number | null;
      cacheWriteMilli?: number | null;
    }
  | {
      type: 'Correct';
      correctionId: string;
      from: Date;
      to: Date;
      reason: string;
      now: Date;
      /** The corrected multiplier (component 'multiplier', the default). */
      multiplierMilli?: number;
      component?: CorrectionComponent;
      /** The corrected value of `component` (thousandths, or tokens for image_tokens). */
      value?: number;
      /** Also price the component from now on, in the same append. */
      alsoFromNow?: boolean;
      /** `to` is the moment of the act (not given by the operator): a retry with other `to` is the same correction. */
      toIsNow?: boolean;
    };

function requireMilli(milli: number): number {
  if (!Number.isSafeInteger(milli) || milli < 1) throw invalid('multiplier must be greater than 0', { param: 'multiplier' });
  if (milli > 1_000_000) throw invalid('multiplier must be at most 1000', { param: 'multiplier' });
  return milli;
}

/** The bounds of each component's value; a value beyond them is invalid. */
export function requireComponentValue(component: CorrectionComponent, value: number | undefined): number {
  if (value === undefined || !Number.isSafeInteger(value)) throw invalid(`a correction of ${component} needs a value`, { param: 'value' });
  switch (component) {
    case 'multiplier':
      return requireMilli(value);
    case 'cache_read_weight':
    case 'cache_write_weight':
      if (value < 0 || value > 1_000_000) throw invalid(`${component} must be between 0 and 1000`, { param: 'value' });
      return value;
    case 'image_tokens':
      if (value < 1 || value > 1_000_000_000) throw invalid('image_tokens must be a whole number of tokens from 1 to 1000000000', { param: 'value' });
      return value;
    default:
      throw invalid(`unknown component '${String(component)}'`, { param: 'component' });
  }
}

const sameTerms = (w: CorrectionWindow, c: { from: Date; to: Date; component: CorrectionComponent; value: number; alsoFromNow: boolean; toIsNow: boolean }) =>
  w.from === c.from.toISOString() &&
  (c.toIsNow ? w.alsoFromNow : w.to === c.to.toISOString()) &&
  w.component === c.component &&
  w.value === c.value &&
  w.alsoFromNow === c.alsoFromNow;

export const modelDecider: Decider<ModelState, ModelCommand, StreamEvents['model']> = {
  initialState: () => ({ exists: false, modelId: '', multiplierMilli: 0, status: 'INACTIVE', alias: null, corrections: [], revision: -1 }),
  decide(c, s) {
    if (c.type === 'Price') {
      if (!s.exists && c.multiplierMilli === undefined) throw invalid('a new model needs a multiplier', { param: 'multiplier' });
      const multiplierMilli = requireMilli(c.multiplierMilli ?? s.multiplierMilli);
      // A weight left out keeps the current one; null removes it (back to the specification's rule).
      const weight = (given: number | null | undefined, current: number | undefined, param: string) => {
        if (given === null) return undefined;
        if (given === undefined) return current;
        if (!Number.isSafeInteger(given) || given < 0 || given > 1_000_000) throw invalid(`${param} must be between 0 and 1000`, { param });
        return given;
      };
      const cache = definedOnly({
        cacheReadMilli: weight(c.cacheReadMilli, s.cache?.cacheReadMilli, 'cache_read_weight'),
        cacheWriteMilli: weight(c.cacheWriteMilli, s.cache?.cacheWriteMilli, 'cache_write_weight'),
      });
      const price = { multiplierMilli, status: c.status ?? (s.exists ? s.status : 'ACTIVE'), alias: c.alias === undefined ? s.alias : c.alias, ...cache };
      // The price in force again changes nothing.
      if (s.exists && isDeepStrictEqual(price, { multiplierMilli: s.multiplierMilli, status: s.status, alias: s.alias, ...s.cache })) return [];
      return [{ type: 'ModelPriced', data: { modelId: c.modelId, ...price } }];
    }
    if (!s.exists) throw new DomainError('not_found', 'model not found');
    const component = c.component ?? 'multiplier';
    const value = requireComponentValue(component, c.value ?? c.multiplierMilli);
    if (!(c.from.getTime() < c.to.getTime())) throw invalid('correction window is inverted or empty: from must be before to', { param: 'from' });
    if (c.to.getTime() > c.now.getTime()) throw invalid('correction window must end in the past', { param: 'to' });
    const alsoFromNow = c.alsoFromNow === true;
    if (alsoFromNow && component === 'image_tokens')
      throw invalid('also_from_now cannot set image_tokens: the tokens counted per image are a setting of the gateway, not part of a price', {
        param: 'also_from_now',
      });
    const existing = s.corrections.find((w) => w.correctionId === c.correctionId);
    if (existing) {
      if (sameTerms(existing, { from: c.from, to: c.to, component, value, alsoFromNow, toIsNow: c.toIsNow === true })) return [];
      throw new DomainError(
        'conflict',
        `correction ${c.correctionId} was applied with other terms (${existing.component} ${existing.value} from ${existing.from} to ${existing.to}); give this one another id`,
      );
    }
    const window = { modelId: s.modelId, correctionId: c.correctionId, from: c.from.toISOString(), to: c.to.toISOString() };
    const corrected: DomainEvent =
      component === 'multiplier'
        ? { type: 'MultiplierCorrected', data: { ...window, multiplierMilli: value, reason: c.reason, ...(alsoFromNow ? { alsoFromNow } : {}) } }
        : { type: 'PriceComponentCorrected', data: { ...window, component, value, reason: c.reason, ...(alsoFromNow ? { alsoFromNow } : {}) } };
    if (!alsoFromNow) return [corrected];
    // The price from now on, in the same append: nothing is priced between the two.
    const price = modelDecider.decide(
      {
        type: 'Price',
        modelId: s.modelId,
        ...(component === 'multiplier'
          ? { multiplierMilli: value }
          : component === 'cache_read_weight'
            ? { cacheReadMilli: value }
            : { cacheWriteMilli: value }),
      },
      s,
    );
    return [corrected, ...price];
  },
  evolve(s, e) {
    const revision = s.revision + 1;
    if (e.type === 'ModelPriced') {
      return {
        ...s,
        revision,
        exists: true,
        modelId: e.data.modelId,
        multiplierMilli: e.data.multiplierMilli,
        status: e.data.status,
        alias: e.data.alias,
        cache: definedOnly({ cacheReadMilli: e.data.cacheReadMilli, cacheWriteMilli: e.data.cacheWriteMilli }),
      };
    }
    if (e.type === 'MultiplierCorrected' || e.type === 'PriceComponentCorrected') {
      const d = e.data;
      const window: CorrectionWindow = {
        correctionId: d.correctionId,
        from: d.from,
        to: d.to,
        revision,
        alsoFromNow: d.alsoFromNow === true,
        ...(e.type === 'MultiplierCorrected'
          ? { component: 'multiplier', value: e.data.multiplierMilli }
          : { component: e.data.component, value: e.data.value }),
      };
      return { ...s, revision, corrections: [...s.corrections, window] };
    }
    return { ...s, revision };
  },
};
