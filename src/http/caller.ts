// Who is calling: resolved once, by the middleware that checked the request's credential, and kept
// typed on ctx.state.caller (http/state.ts). Routes hand it on as a plain value to the layers
// below, which know nothing of HTTP: this module imports no koa.
import type { Member } from '../ledger/roles.ts';

/** An API key calling the models under /v1 (http/auth.ts). */
export interface KeyCaller {
  kind: 'api_key';
  keyId: string;
  accountId: string;
  /** `key:<key id>`: the actor of what the key's calls write. */
  actor: string;
  /** The request it calls with: the events written for it name it. */
  requestId: string;
}

/** The account's management key, managing the account's API keys at /v1/keys (routes/key-management.ts). */
export interface ManagementKeyCaller {
  kind: 'management_key';
  /** No API key calls: a management key calls no model. */
  keyId: null;
  accountId: string;
  managementKeyId: string;
  /** `management-key:<id>`. */
  actor: string;
  requestId: string;
}

/** A signed-in member acting in one of their accounts, under /app/api/accounts/:account (routes/customer-account.ts). */
export interface MemberCaller {
  kind: 'member';
  keyId: null;
  accountId: string;
  /** The member, whose role allowed the route's action. */
  member: Member;
  /** `member:<id>:<email>`. */
  actor: string;
  requestId: string;
}

export type Caller = KeyCaller | ManagementKeyCaller | MemberCaller;

/** The caller of an API key the directory found live (http/auth.ts checked it). */
export const keyCaller = (key: { keyId: string; accountId: string }, requestId: string): KeyCaller => ({
  kind: 'api_key',
  keyId: key.keyId,
  accountId: key.accountId,
  actor: `key:${key.keyId}`,
  requestId,
});
