// The calls feature as the other features see it: what they may import, and nothing else.

export {
  adjustmentsOfCharges,
  chargesInWindowCount,
  chargesPage,
  ensureChargeStatistics,
  ofAccountPage,
  type ChargeCursor,
  type ChargeRow,
  type ChargeWindow,
} from '../../projections/calls/charges.ts';
export { subscription, usage } from './account-routes.ts';
export { VOID_RANK, isVoidCorrection } from './charge-void.ts';
export { guardedLookup, isNonPublicAddress } from './image-source.ts';
export { sweepExpiredCredits, sweepExpiredHolds, sweepOrphanedHolds } from './sweeper.ts';
export type { CallDeps } from './call-deps.ts';
