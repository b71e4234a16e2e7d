// An account's billing routes of the session API, typed (paths of src/customers/customer-account-routes.ts).
import { appApi } from '../api/client.ts';
import type { Subscription } from '../../shared/v1.ts';
import type { AutoTopUpView, BalanceAlertsView, BillingProfile, CheckoutSession, IssuedDocument, Payment, PriceList } from './types.ts';

const at = (accountId: string, path: string) => `accounts/${encodeURIComponent(accountId)}/${path}`;

export const billingApi = (accountId: string) => ({
  subscription: () => appApi.json<Subscription>(at(accountId, 'subscription')),
  prices: () => appApi.json<PriceList>(at(accountId, 'prices')),
  payments: () => appApi.json<{ data: Payment[] }>(at(accountId, 'payments')).then((r) => r.data),
  /** `currency`: pay in another currency than the settlement one (given only then). */
  checkout: (item: ({ plan_id: string; recurring: boolean } | { pack_id: string }) & { currency?: string }) =>
    appApi.json<CheckoutSession>(at(accountId, 'checkout'), { method: 'POST', body: item }),
  redeem: (code: string) => appApi.json<{ payment: Payment }>(at(accountId, 'redemptions'), { method: 'POST', body: { code } }).then((r) => r.payment),
  /** A payment's printable receipt (HTML). */
  receipt: (paymentId: string) => appApi.call(at(accountId, `payments/${encodeURIComponent(paymentId)}?format=html`)),
  /** The account's invoices and credit notes, newest first. */
  documents: () => appApi.json<{ data: IssuedDocument[] }>(at(accountId, 'invoices')).then((r) => r.data),
  /** One invoice or credit note as a PDF. */
  documentPdf: (number: string) => appApi.call(at(accountId, `invoices/${encodeURIComponent(number)}?format=pdf`)),
  /** The statement of [from, to) as CSV. */
  statement: (from: string, to: string) => appApi.call(at(accountId, `statement?${new URLSearchParams({ format: 'csv', from, to })}`)),
  /** Who the account's invoices are made out to (null until set). */
  profile: () => appApi.json<BillingProfile>(at(accountId, 'billing-profile')),
  /** Sets the whole billing profile (the server checks every field and names a wrong one). */
  saveProfile: (fields: Record<string, unknown>) => appApi.json<BillingProfile>(at(accountId, 'billing-profile'), { method: 'PUT', body: fields }),
  /** Auto top-up: the saved card, the threshold and pack, the last top-ups. */
  autoTopUp: () => appApi.json<AutoTopUpView>(at(accountId, 'auto-top-up')),
  setAutoTopUp: (body: { threshold_tokens: number; pack_id: string }) => appApi.json<AutoTopUpView>(at(accountId, 'auto-top-up'), { method: 'PUT', body }),
  autoTopUpOff: () => appApi.json<AutoTopUpView>(at(accountId, 'auto-top-up'), { method: 'DELETE' }),
  /** A Stripe Checkout session in setup mode, to save a card (nothing is charged). */
  saveCard: () => appApi.json<CheckoutSession>(at(accountId, 'auto-top-up/card'), { method: 'POST', body: {} }),
  balanceAlerts: () => appApi.json<BalanceAlertsView>(at(accountId, 'balance-alerts')),
  setBalanceAlerts: (thresholds: number[]) =>
    appApi.json<BalanceAlertsView>(at(accountId, 'balance-alerts'), { method: 'PUT', body: { thresholds_tokens: thresholds } }),
  /** The usage of the last `days` days per UTC day and key, as CSV. */
  usageCsv: (days: number) => appApi.call(at(accountId, `billing/usage?group_by=key&format=csv&range=${days}d`)),
});

export type BillingApi = ReturnType<typeof billingApi>;
