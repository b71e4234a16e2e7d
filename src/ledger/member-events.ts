import type { Role } from './roles.ts';

// Customers (src/customers): members of an account on its members stream; sign-in links and
// sessions on streams of their own. Secrets are stored only as SHA-256 hashes.
export interface MemberEvents {
  MemberInvited: { accountId: string; memberId: string; email: string; role: Role };
  /** The invited address signed in (invitationId) or founded the account by sign-up (null). */
  MemberJoined: { accountId: string; memberId: string; email: string; role: Role; invited: boolean };
  MemberRoleChanged: { accountId: string; memberId: string; email: string; from: Role; to: Role };
  /** A member removed, or an invitation withdrawn (status says which). */
  MemberRemoved: { accountId: string; memberId: string; email: string; role: Role; status: 'invited' | 'active' };
  SignInLinkIssued: { linkId: string; email: string; hash: string; expiresAt: string };
  SignInLinkUsed: { linkId: string; email: string };
  SessionStarted: { sessionId: string; email: string; hash: string; method: 'email' | 'oidc'; expiresAt: string };
  SessionEnded: { sessionId: string; email: string; reason: 'sign_out' | 'ended_by_member' | 'ended_by_operator' };
  /** A sign-in link was asked for an address (its SHA-256 only) in a UTC minute: counted across gateways. */
  SignInRequested: { address: string; minute: string };
  /** A key that manages the account's API keys over HTTP and can call no model (src/ledger/management-keys.ts). */
  ManagementKeyIssued: { accountId: string; keyId: string; name: string; hash: string; last4: string; issuedAt: string };
  ManagementKeyRevoked: { accountId: string; keyId: string };
}
