// The plan decider: a plan's terms, defined once and updated for future subscriptions.
import { isDeepStrictEqual } from 'node:util';
import type { Decider } from '../ledger/decider.ts';
import type { PlanTerms, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';

export interface PlanState {
  exists: boolean;
  terms: PlanTerms | null;
}

export type PlanCommand = { type: 'Define' | 'Update'; terms: PlanTerms };

function checkTerms(t: PlanTerms): void {
  requireTokenAmount(t.quota, 'quota', { allowZero: true });
  if (!Number.isSafeInteger(t.validityDays) || t.validityDays < 1 || t.validityDays > 3650)
    throw invalid('validity_days must be a whole number from 1 to 3650', { param: 'validity_days' });
  if (!Number.isSafeInteger(t.requestsPerMinute) || t.requestsPerMinute < 1)
    throw invalid('requests_per_minute must be a whole number >= 1', { param: 'requests_per_minute' });
  if (!Array.isArray(t.models) || t.models.length === 0) throw invalid('models must list at least one model id, or "*"', { param: 'models' });
}

const sameTerms = (a: PlanTerms, b: PlanTerms): boolean => {
  const asSet = (t: PlanTerms) => ({ ...t, models: [...new Set(t.models)].sort() });
  return isDeepStrictEqual(asSet(a), asSet(b));
};

export const planDecider: Decider<PlanState, PlanCommand, StreamEvents['plan']> = {
  initialState: () => ({ exists: false, terms: null }),
  decide(c, s) {
    checkTerms(c.terms);
    if (c.type === 'Define') {
      if (s.exists) throw new DomainError('already_exists', `plan ${c.terms.planId} exists`);
      return [{ type: 'PlanDefined', data: c.terms }];
    }
    if (!s.exists) throw new DomainError('not_found', `plan ${c.terms.planId} not found`);
    // The same terms again change nothing (compared as values: a model list as a set).
    if (s.terms && sameTerms(s.terms, c.terms)) return [];
    return [{ type: 'PlanUpdated', data: c.terms }];
  },
  evolve(s, e) {
    if (e.type === 'PlanDefined' || e.type === 'PlanUpdated') return { exists: true, terms: e.data };
    return s;
  },
};
