// The session API's answers as the pages read them (src/customers/customer-auth-routes.ts, customer-account.ts).
import type { Role } from '../../../../src/ledger/roles.ts';

export type { Action, Role } from '../../../../src/ledger/roles.ts';

export interface Membership {
  account_id: string;
  member_id: string;
  role: Role;
}

export interface Session {
  object: 'session';
  email: string;
  session_id: string;
  expires_at: string;
  csrf_token: string;
  accounts: Membership[];
  sign_in: { oidc: string | null };
}

export interface SignInOptions {
  object: 'sign_in_options';
  oidc: { name: string } | null;
  sign_up: { open: boolean; plan: string | null };
}

export interface OpenSession {
  session_id: string;
  method: 'email' | 'oidc';
  started_at: string;
  expires_at: string;
  current: boolean;
}

export interface Member {
  member_id: string;
  email: string;
  role: Role;
  status: 'invited' | 'active' | 'removed' | string;
}

export interface MemberEvent {
  type: string;
  at: string;
  actor: string;
  [field: string]: unknown;
}

export interface SpendLimit {
  tokens: number;
  period: 'none' | 'daily' | 'weekly' | 'monthly';
}

export interface ApiKey {
  key_id: string;
  name: string;
  masked: string;
  status: 'active' | 'revoked' | string;
  issued_at: string;
  revoked_at: string | null;
  revoke_reason: string | null;
  last_used_at: string | null;
  spend_limit: SpendLimit | null;
  models: string[] | null;
  expires_at: string | null;
  expired: boolean;
  spend: { period: string; period_start: string | null; resets_at: string | null; spent: number; reserved: number; remaining: number | null };
  rotation: { replaced_by: string; revoke_at: string | null } | null;
}

/** A key as created or rotated: the only answer that holds its secret. */
export interface NewKey {
  key_id: string;
  key: string;
  masked: string;
  name?: string;
  replaces?: { key_id: string; revoke_at: string | null };
}

export interface KeyControls {
  name?: string;
  spend_limit?: SpendLimit | null;
  models?: string[] | null;
  expires_at?: string | null;
}

/** A key for the account's own software at /v1/keys: it manages keys and calls no model. */
export interface ManagementKey {
  key_id: string;
  name: string;
  masked: string;
  status: 'active' | 'revoked' | string;
  issued_at: string;
}
