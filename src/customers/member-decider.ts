// The members decider: an account's members and invitations on its members stream. Invariant: an
// account that has an owner keeps at least one (the last owner can be neither demoted nor
// removed), and only an owner (or the operator) grants, changes or removes the owner role.
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, StreamEvents } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import type { Member, Role } from '../ledger/roles.ts';

export interface MembersState {
  accountId: string;
  /** By member id (a plain object: the state is its own JSON snapshot). */
  members: Record<string, Member>;
}

/** Who acts: a member with their role, or the operator (null), who may do everything. */
export type ActorRole = Role | null;

export type MembersCommand =
  | { type: 'Invite'; accountId: string; memberId: string; email: string; role: Role; actorRole: ActorRole }
  /** The invited address proved itself at sign-in. */
  | { type: 'Join'; email: string }
  /** Sign-up: the first member of a new account, its owner. */
  | { type: 'Found'; accountId: string; memberId: string; email: string }
  | { type: 'ChangeRole'; memberId: string; role: Role; actorRole: ActorRole }
  | { type: 'Remove'; memberId: string; actorRole: ActorRole };

/** Addresses are compared as lower case, trimmed: one person, one spelling. */
export const normalEmail = (email: string): string => email.trim().toLowerCase();

export const memberByEmail = (s: MembersState, email: string): Member | undefined => {
  const e = normalEmail(email);
  for (const m of Object.values(s.members)) if (m.email === e) return m;
  return undefined;
};

const activeOwners = (s: MembersState) => Object.values(s.members).filter((m) => m.status === 'active' && m.role === 'owner').length;

function requireMember(s: MembersState, memberId: string): Member {
  const m = Object.hasOwn(s.members, memberId) ? s.members[memberId] : undefined;
  if (!m) throw new DomainError('not_found', `member ${memberId} not found`, { param: 'member_id' });
  return m;
}

function requireOwnerFor(actorRole: ActorRole, ...roles: Role[]): void {
  if (actorRole !== null && actorRole !== 'owner' && roles.includes('owner'))
    throw new DomainError('forbidden', 'only an owner can grant, change or remove the owner role');
}

function requireOtherOwner(s: MembersState, m: Member): void {
  if (m.status === 'active' && m.role === 'owner' && activeOwners(s) <= 1)
    throw new DomainError('conflict', 'an account keeps at least one owner: make another member owner first', { param: 'member_id' });
}

export const membersDecider: Decider<MembersState, MembersCommand, StreamEvents['members']> = {
  initialState: () => ({ accountId: '', members: {} }),
  decide(c, s) {
    switch (c.type) {
      case 'Invite': {
        requireOwnerFor(c.actorRole, c.role);
        const existing = memberByEmail(s, c.email);
        if (existing)
          throw new DomainError('already_exists', `${existing.email} is already ${existing.status === 'active' ? 'a member' : 'invited'}`, { param: 'email' });
        return [{ type: 'MemberInvited', data: { accountId: c.accountId, memberId: c.memberId, email: normalEmail(c.email), role: c.role } }];
      }
      case 'Join': {
        const m = memberByEmail(s, c.email);
        if (!m || m.status !== 'invited') return [];
        return [{ type: 'MemberJoined', data: { accountId: s.accountId, memberId: m.memberId, email: m.email, role: m.role, invited: true } }];
      }
      case 'Found':
        if (Object.keys(s.members).length > 0) throw new DomainError('conflict', `account ${c.accountId} already has members`);
        return [{ type: 'MemberJoined', data: { accountId: c.accountId, memberId: c.memberId, email: normalEmail(c.email), role: 'owner', invited: false } }];
      case 'ChangeRole': {
        const m = requireMember(s, c.memberId);
        if (m.role === c.role) return [];
        requireOwnerFor(c.actorRole, m.role, c.role);
        if (c.role !== 'owner') requireOtherOwner(s, m);
        return [{ type: 'MemberRoleChanged', data: { accountId: s.accountId, memberId: m.memberId, email: m.email, from: m.role, to: c.role } }];
      }
      case 'Remove': {
        const m = requireMember(s, c.memberId);
        requireOwnerFor(c.actorRole, m.role);
        requireOtherOwner(s, m);
        return [{ type: 'MemberRemoved', data: { accountId: s.accountId, memberId: m.memberId, email: m.email, role: m.role, status: m.status } }];
      }
    }
  },
  evolve(s, e: DomainEvent) {
    const members = { ...s.members };
    switch (e.type) {
      case 'MemberInvited':
        members[e.data.memberId] = { memberId: e.data.memberId, email: e.data.email, role: e.data.role, status: 'invited' };
        return { accountId: e.data.accountId, members };
      case 'MemberJoined':
        members[e.data.memberId] = { memberId: e.data.memberId, email: e.data.email, role: e.data.role, status: 'active' };
        return { accountId: e.data.accountId, members };
      case 'MemberRoleChanged':
        members[e.data.memberId] = { ...members[e.data.memberId], role: e.data.to };
        return { ...s, members };
      case 'MemberRemoved':
        delete members[e.data.memberId];
        return { ...s, members };
      default:
        return s;
    }
  },
};
