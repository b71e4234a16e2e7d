// The books feature as the other features see it: what they may import, and nothing else.

export { LotCheck } from './lot-check.ts';
export { type LotFoldState } from './lot-fold.ts';
export { paymentRoutes } from './payments-routes.ts';
export { billingProfileHandlers } from './billing-profile-routes.ts';
export { documentHandlers } from './document-routes.ts';
export { autoTopUpRoutes } from './auto-top-up-routes.ts';
export type { BooksDeps } from './books-deps.ts';
