// The accounts feature as the other features see it: what they may import, and nothing else.

export { type AccountRow } from '../../projections/accounts/accounts.ts';
export * as accountsReadModel from '../../projections/accounts/accounts.ts';
export * as holdsReadModel from '../../projections/accounts/holds.ts';
export { type ChargeToAdjust } from './account-adjust.ts';
export { accountDecider, type AccountCommand } from './account-decider.ts';
export { availableTokens, balanceOf, isModelEnabled, type AccountState, type AdjustedCharge } from './account-state.ts';
export { LIMIT_PERIODS, isLimitPeriod, isPlanActive, type Balance, type SpendLimit } from './balance.ts';
export * as balance from './balance.ts';
export { type CancellationCommand, type CancellationKind } from './cancellation.ts';
export {
  accountCommand,
  accountDecideEarly,
  accountState,
  accountStateChecked,
  definePlan,
  grantExtra,
  openAccount,
  planTerms,
  subscribe,
  updatePlan,
} from './commands.ts';
export {
  MAX_KEY_LIMIT,
  defaultKeyControls,
  isKeyExpired,
  isModelAllowedForKey,
  keyAvailableTokens,
  keyControlsOf,
  keyExpired,
  keyLimitExceeded,
  keyStanding,
} from './key-limits.ts';
export { paidAs, poolShare, type PaidLot } from './lots.ts';
export {
  DEFAULT_PRIORITY,
  drawCredits,
  drawOrder,
  isLive,
  isTermed,
  requireCreditTerms,
  requireExpiryDays,
  requireModels,
  requirePriority,
  type CreditDraw,
  type CreditLot,
  type CreditTerms,
} from './credits.ts';
export { cancellationBody, creditsBody, paymentBody, paymentsInOrder } from './payment-bodies.ts';
export { type RateNow, type RecordPaymentCommand } from './payment-rules.ts';
export { requireThreshold, tokensLeft, type AutoTopUp } from './auto-top-up.ts';
export { requireAlertThresholds } from './balance-alerts.ts';
export { balanceAlertRoutes } from './balance-alert-routes.ts';
export { noticesOf, unmailedNotices, type NoticeRow } from '../../projections/accounts/notices.ts';
export { accountsWithCreditsDue } from '../../projections/accounts/credit-expiries.ts';
