import type { RouteDeps } from '../http/route-deps.ts';
import type { ModelCatalog } from '../catalogue/index.ts';
import type { Payments } from './payments.ts';
import type { StripeGateway } from './stripe.ts';
import type { PaymentSettings } from '../config.ts';
import type { ReadRunner } from '../eventstore/read-thread.ts';

/** What the money routes are given: prices, payments, refunds, disputes and codes, and the Stripe path. */
export interface BooksDeps extends RouteDeps {
  catalog: ModelCatalog;
  payments: Payments;
  /** The payment settings (src/config.ts): the checkout's, the code attempts' limit, … */
  paymentSettings: PaymentSettings;
  /** The Stripe path; null when it is off (no STRIPE_SECRET_KEY / STRIPE_WEBHOOK_SECRET). */
  stripe: StripeGateway | null;
  /** The finance reports' reads (finance-answers.ts): on a thread of their own on a PostgreSQL server, else here. */
  financeReads: ReadRunner;
}
