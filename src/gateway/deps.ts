import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import type { ModelCatalog } from './model-catalog.ts';
import type { Metering } from './metering.ts';
import type { KeyDirectory } from '../http/key-directory.ts';
import type { Database } from '../eventstore/db.ts';
import type { ChannelRegistry } from '../upstream/channels/registry.ts';
import type { Payments } from '../payments/service.ts';
import type { StripeGateway } from '../payments/stripe.ts';
import type { PaymentSettings } from '../config.ts';

/** Everything a route needs, built once at start-up. */
export interface GatewayDeps {
  db: Database;
  ledger: Ledger;
  catalog: ModelCatalog;
  metering: Metering;
  keys: KeyDirectory;
  /** Every model's upstream channels and their health. */
  channels: ChannelRegistry;
  log: Logger;
  /** Prices, payments, refunds, disputes and redemption codes (src/payments), with their settings. */
  payments: Payments;
  paymentSettings: PaymentSettings;
  /** The Stripe path; null when it is off (no STRIPE_SECRET_KEY / STRIPE_WEBHOOK_SECRET). */
  stripe: StripeGateway | null;
  /** {base_url} named in answers: TOLLGATE_PUBLIC_BASE_URL, else the public origin + /v1, else as the caller reached us. */
  baseUrl(ctx: Context): string;
  /** The origin of every link Tollgate sends or redirects to (src/http/public-origin.ts); null: none configured. */
  publicOrigin(): string | null;
}
