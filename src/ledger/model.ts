// The model decider: price (multiplier, status, alias, effective from now) and retroactive
// corrections over non-overlapping time windows.
import type { Decider } from './decider.ts';
import type { DomainEvent } from './events.ts';
import { DomainError, invalid } from './errors.ts';

export interface CorrectionWindow { correctionId: string; from: string; to: string; multiplierMilli: number }

export interface ModelState {
  exists: boolean;
  modelId: string;
  multiplierMilli: number;
  status: 'ACTIVE' | 'INACTIVE';
  alias: string | null;
  corrections: CorrectionWindow[];
}

export type ModelCommand =
  | { type: 'Price'; modelId: string; multiplierMilli?: number; status?: 'ACTIVE' | 'INACTIVE'; alias?: string | null }
  | { type: 'Correct'; correctionId: string; from: Date; to: Date; multiplierMilli: number; reason: string; now: Date };

function requireMilli(milli: number): number {
  if (!Number.isSafeInteger(milli) || milli < 1) throw invalid('multiplier must be greater than 0', { param: 'multiplier' });
  return milli;
}

export const modelDecider: Decider<ModelState, ModelCommand> = {
  initialState: () => ({ exists: false, modelId: '', multiplierMilli: 0, status: 'INACTIVE', alias: null, corrections: [] }),
  decide(c, s): DomainEvent[] {
    if (c.type === 'Price') {
      if (!s.exists && c.multiplierMilli === undefined) throw invalid('a new model needs a multiplier', { param: 'multiplier' });
      const multiplierMilli = requireMilli(c.multiplierMilli ?? s.multiplierMilli);
      return [{
        type: 'ModelPriced',
        data: { modelId: c.modelId, multiplierMilli, status: c.status ?? (s.exists ? s.status : 'ACTIVE'), alias: c.alias === undefined ? s.alias : c.alias },
      }];
    }
    if (!s.exists) throw new DomainError('not_found', 'model not found');
    requireMilli(c.multiplierMilli);
    if (!(c.from.getTime() < c.to.getTime())) throw invalid('correction window is inverted or empty: from must be before to', { param: 'from' });
    if (c.to.getTime() > c.now.getTime()) throw invalid('correction window must end in the past', { param: 'to' });
    const overlap = s.corrections.find((w) => c.from.getTime() < Date.parse(w.to) && Date.parse(w.from) < c.to.getTime());
    if (overlap?.correctionId === c.correctionId) return [];
    if (overlap) throw new DomainError('conflict', `correction window overlaps correction ${overlap.correctionId} (${overlap.from} to ${overlap.to})`);
    return [{
      type: 'MultiplierCorrected',
      data: { modelId: s.modelId, correctionId: c.correctionId, from: c.from.toISOString(), to: c.to.toISOString(), multiplierMilli: c.multiplierMilli, reason: c.reason },
    }];
  },
  evolve(s, e) {
    if (e.type === 'ModelPriced') return { ...s, exists: true, modelId: e.data.modelId, multiplierMilli: e.data.multiplierMilli, status: e.data.status, alias: e.data.alias };
    if (e.type === 'MultiplierCorrected') return { ...s, corrections: [...s.corrections, { correctionId: e.data.correctionId, from: e.data.from, to: e.data.to, multiplierMilli: e.data.multiplierMilli }] };
    return s;
  },
};
