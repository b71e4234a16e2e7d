// Members, sign-in links and sessions: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Id, Instant, Email, Sha256, Role, Bool } from '../event-atoms.ts';

export const CUSTOMER_EVENTS = {
  // Customers: members, sign-in links and sessions (secrets only as SHA-256 hashes).
  MemberInvited: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role },
    'An address is invited to an account with a role; it joins when it signs in.',
  ),
  MemberJoined: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role, invited: Bool },
    'A person is a member of the account from now on: an invitation accepted at sign-in, or the founder of an account opened by sign-up.',
  ),
  MemberRoleChanged: Event(
    { accountId: Id, memberId: Id, email: Email, from: Role, to: Role },
    "A member's role changes; the account keeps at least one owner.",
  ),
  MemberRemoved: Event(
    { accountId: Id, memberId: Id, email: Email, role: Role, status: Type.Union([Type.Literal('invited'), Type.Literal('active')]) },
    'A member is removed or an invitation withdrawn; the account keeps at least one owner.',
  ),
  SignInRequested: Event(
    { address: Sha256, minute: Type.String({ pattern: '^[0-9]{12}$' }) },
    'A sign-in link was asked for an address in a UTC minute (the address is kept only as its SHA-256): the per-address limit counts these on every gateway.',
  ),
  SignInLinkIssued: Event(
    { linkId: Id, email: Email, hash: Sha256, expiresAt: Instant },
    'A single-use sign-in link is sent to an address; only the SHA-256 hash of its secret is kept.',
  ),
  SignInLinkUsed: Event({ linkId: Id, email: Email }, 'A sign-in link is used (it cannot be used again).'),
  SessionStarted: Event(
    { sessionId: Id, email: Email, hash: Sha256, method: Type.Union([Type.Literal('email'), Type.Literal('oidc')]), expiresAt: Instant },
    'A person signed in to /app; only the hash of the session secret is kept (the CSRF token is derived from the secret).',
  ),
  SessionEnded: Event(
    { sessionId: Id, email: Email, reason: Type.Union([Type.Literal('sign_out'), Type.Literal('ended_by_member'), Type.Literal('ended_by_operator')]) },
    'A session ends on the server: signed out, ended from another session of the member, or by the operator.',
  ),
};
