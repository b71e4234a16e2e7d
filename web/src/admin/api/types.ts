// The /admin/v1 answers the console reads, as the gateway sends them.
export interface List<T> {
  object: 'list';
  data: T[];
  has_more?: boolean;
  next_after?: string | null;
}

export interface AccountSummary {
  account_id: string;
  name: string;
  plan: { id: string; name: string } | null;
  status: 'active' | 'expired' | 'no_plan' | string;
  quota: { total: number; used: number; reserved: number; remaining: number };
  extra_tokens: { granted: number; used: number; remaining: number };
  remaining_tokens: number;
  open_holds: number;
  starts_at: string | null;
  expires_at: string | null;
  rate_limit: { requests_per_minute: number | null };
}

/** GET /accounts/{id}/balance: the summary and the grants with terms (open ones in draw-down order, then those expired). */
import type { Credit } from '../../shared/v1.ts';
export type { Credit };

export interface AccountBalance extends AccountSummary {
  credits: Credit[];
}

/** POST /accounts/{id}/extra-tokens. */
export interface ExtraTokensGrant {
  object: 'extra_tokens';
  account_id: string;
  granted: number;
  expires_at: string | null;
  priority: number;
  models: string[] | null;
}

export interface KeyRow {
  key_id: string;
  name: string;
  masked: string;
  status: 'active' | 'revoked' | string;
  expired?: boolean;
  issued_at: string;
  last_used_at: string | null;
  revoked_at?: string | null;
  spend_limit?: { tokens: number; period: string } | null;
  spend?: { spent: number; remaining?: number | null } | null;
  models?: string[] | null;
  expires_at?: string | null;
}

export interface Plan {
  plan_id: string;
  name: string;
  quota: number;
  validity_days: number;
  requests_per_minute: number;
  models: string[];
  updated_at: string;
}

export interface Model {
  model_id: string;
  alias: string | null;
  multiplier_milli: number;
  status: 'ACTIVE' | 'INACTIVE';
  cache_read_milli: number | null;
  cache_write_milli: number | null;
  updated_at: string;
}

export interface Channel {
  id: string;
  provider: string;
  upstream_model: string;
  models: string[];
  state: 'closed' | 'open' | 'half_open' | 'disabled';
  calls: number;
  failures: number;
  failovers: number;
  retry_at: string | null;
  disabled: { by: string; reason: string | null; at: string } | null;
}

export interface ReconciledCharge {
  requestId: string;
  at: string;
  billedOriginally: number;
  billedNow: number;
  corrected: number;
  difference: number;
  adjustments: Array<{ correctionId: string; delta: number }>;
}

export interface ReconciledAccount {
  accountId: string;
  charges: number;
  billedOriginally: number;
  billedNow: number;
  corrected: number;
  difference: number;
  items: ReconciledCharge[];
}

export interface CorrectionReport {
  correctionId: string;
  modelId: string;
  component: string;
  value: number;
  from: string;
  to: string;
  accounts: ReconciledAccount[];
  totals: { charges: number; billedOriginally: number; billedNow: number; corrected: number; difference: number };
}

export interface AppliedCorrection extends CorrectionReport {
  appended: number;
  already_applied: number;
  passes: number;
}

export interface Verification {
  object: 'verification';
  ok: boolean;
  events: number;
  streams: number;
  chainProblems: Array<{ stream: string; revision: number; position: number; problem: string }>;
  readModelDifferences: Array<{ table: string; key: string }>;
  /** A full verification, or one from the last checkpoint on (docs/operating.md). */
  mode: 'full' | 'since_checkpoint';
  /** The events this verification read (`events`: since the log began). */
  checkedEvents: number;
  since: { position: number; verifiedAt: string } | null;
  checkpoint: { position: number; verifiedAt: string; fullAt: string } | null;
}

export interface PriceList {
  currency: string;
  plans: Array<{ plan_id: string; name: string; amount: number; currency: string; display: string }>;
  packs: Array<{ pack_id: string; name: string; tokens: number; amount: number; currency: string; display: string }>;
}

export interface Payment {
  id: string;
  account_id: string;
  processor: string;
  amount: number;
  currency: string;
  display: string;
  fee: number | null;
  received_at: string;
  reference: string | null;
  item: { kind: 'plan'; plan_id: string; tokens: number } | { kind: 'pack'; pack_id: string; tokens: number };
  refunded: number;
  tokens_withdrawn: number;
  already_recorded?: boolean;
}

export interface Dispute {
  id: string;
  payment_id: string;
  amount: number;
  suspends_keys: boolean;
  status: 'open' | 'won' | 'lost' | string;
}

export interface CodeBatch {
  batch_id: string;
  item: { kind: string; id?: string; plan_id?: string; pack_id?: string; tokens?: number } | string;
  currency: string;
  expires_at: string | null;
  codes: string[];
}

// The report's row and the reconciliation's line are the server's own types (type-only: nothing of
// the server is bundled).
export type { FinanceRow } from '../../../../src/books/finance.ts';
export type { MoneyLine } from '../../../../src/books/finance-reconcile.ts';
import type { FinanceRow } from '../../../../src/books/finance.ts';
import type { MoneyLine } from '../../../../src/books/finance-reconcile.ts';

export interface FinanceReport {
  currency: string;
  from: string;
  to: string;
  rows: FinanceRow[];
  deferred: Array<{ day: string; account_id: string; deferred: number }>;
  totals: Omit<FinanceRow, 'day' | 'account_id' | 'model' | 'channel'>;
  /** The closed (or reopened) months the range touches. */
  periods: Period[];
}

/** A month of the books closed, or closed and reopened (GET /admin/v1/finance/periods). */
export interface Period {
  period: string;
  status: 'closed' | 'reopened';
  closed_at: string;
  closed_by: string;
  reconciliation_difference: number;
  bill_lines_differing: number;
  override_reason: string | null;
  reopened_at: string | null;
  reopened_by: string | null;
  reopen_reason: string | null;
}

export interface MoneyReconciliation {
  currency: string;
  from: string;
  to: string;
  lines: MoneyLine[];
  total: MoneyLine;
}
