// The session API's billing answers as the page reads them (src/books/payments-routes.ts shapes them).

/** An item's price in another currency than the settlement one, as it is offered in it. */
export interface OfferedPrice {
  amount: number;
  currency: string;
  display: string;
}

export interface PlanPrice {
  plan_id: string;
  name: string;
  amount: number;
  currency: string;
  display: string;
  /** Its prices in the other currencies it is on sale in. */
  offered: OfferedPrice[];
}

export interface PackPrice {
  pack_id: string;
  name: string;
  tokens: number;
  amount: number;
  currency: string;
  display: string;
  /** Its prices in the other currencies it is on sale in. */
  offered: OfferedPrice[];
}

export interface PriceList {
  /** The settlement currency: the one every price above is in. */
  currency: string;
  /** The currencies a payment may be in: the settlement currency first, then those an item is offered in. */
  currencies: string[];
  plans: PlanPrice[];
  packs: PackPrice[];
}

export interface Payment {
  id: string;
  processor: string;
  amount: number;
  currency: string;
  display: string;
  received_at: string;
  item: { kind: 'plan'; plan_id: string; tokens: number } | { kind: 'pack'; pack_id: string; tokens: number };
  refunded: number;
  tokens_withdrawn: number;
  /** Paid in another currency than the settlement one: as paid, and the rate it was booked at (amount and currency above are the booking). */
  paid_in: PaidIn | null;
}

export interface PaidIn {
  amount: number;
  currency: string;
  display: string;
  refunded: number;
  /** Settlement currency per 1 unit of this one, as a decimal string. */
  rate: string;
  day: string;
  source: string;
}

/** A Checkout session: amount and currency are what the customer pays (the chosen currency's). */
export interface CheckoutSession {
  id: string;
  url: string;
  mode?: string;
  amount: number;
  tax?: number;
  currency: string;
}

/** Who the account's invoices are made out to (src/books/billing-profiles.ts shapes it). */
export interface BillingProfileFields {
  legal_name: string;
  address_lines: string[];
  city: string;
  postal_code: string | null;
  region: string | null;
  country: string;
  tax_id: string | null;
  tax_id_checked: boolean;
  business: boolean;
  invoice_email: string;
}

export interface BillingProfile {
  object: 'billing_profile';
  account_id: string;
  profile: BillingProfileFields | null;
  updated_at: string | null;
  updated_by: string | null;
}

/** An issued invoice or credit note as the session API lists it (src/books/document-views.ts). */
export interface IssuedDocument {
  object: 'invoice' | 'credit_note';
  number: string;
  issued_at: string;
  invoice_number?: string;
  total: number;
  currency: string;
  display: { subtotal: string; tax: string; total: string };
}

/** Auto top-up as GET /auto-top-up shows it (src/books/auto-top-up-routes.ts shapes it). */
export interface AutoTopUpView {
  enabled: boolean;
  threshold_tokens: number | null;
  pack_id: string | null;
  tokens_left: number;
  card: { brand: string | null; last4: string | null } | null;
  pending_top_up: string | null;
  failed_reason: string | null;
  top_ups: Array<{ id: string; pack_id: string; status: 'pending' | 'succeeded' | 'failed'; started_at: string; reason: string | null }>;
}

/** Balance alerts as GET /balance-alerts shows them (src/accounts/balance-alert-routes.ts shapes them). */
export interface BalanceAlertsView {
  thresholds_tokens: number[];
  tokens_left: number;
  alerts: Array<{ id: string; threshold_tokens: number; tokens_left: number; raised_at: string; emailed_at: string | null; recipients: number | null }>;
}
