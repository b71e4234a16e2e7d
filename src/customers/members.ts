// An account's members as the session API and the operator use them: who may act (the role table
// in src/ledger/roles.ts), invitations, role changes and removals, joining at sign-in, and the
// founding of an account by sign-up. Every change is an event naming its actor.
import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { memberByEmail, membersDecider, normalEmail, type ActorRole, type MembersState } from './member-decider.ts';
import type { Member } from '../ledger/roles.ts';
import { can, type Action, type Role } from '../ledger/roles.ts';
import { membershipsOf } from '../../projections/customers/members.ts';
import { accountState, openAccount, subscribe } from '../accounts/index.ts';

/** How a member is named as the actor of the events they cause. */
export const memberActor = (m: Pick<Member, 'memberId' | 'email'>): string => `member:${m.memberId}:${m.email}`.slice(0, 200);

const newMemberId = () => `mem_${randomUUID().replace(/-/g, '').slice(0, 16)}`;

/** The account's members as the log has them now (another process may have changed them). */
export const membersOf = (ledger: Ledger, accountId: string): Promise<MembersState> => ledger.streamState(membersDecider, streams.members(accountId));

/**
 * The signed-in person as a member of this account allowed to do `action`; otherwise a 403 and
 * nothing is written. A non-member and a member without the right get the same kind of answer.
 */
export async function requireMember(ledger: Ledger, accountId: string, email: string, action: Action): Promise<Member> {
  const m = memberByEmail(await membersOf(ledger, accountId), email);
  if (!m || m.status !== 'active') throw new DomainError('forbidden', `you are not a member of account ${accountId}`);
  if (!can(m.role, action)) throw new DomainError('forbidden', `the ${m.role} role may not do this (${action})`);
  return m;
}

const command = (ledger: Ledger, accountId: string, c: Parameters<typeof membersDecider.decide>[0], actor: string) =>
  ledger.command(membersDecider, streams.members(accountId), c, metadataFor(actor));

export async function invite(ledger: Ledger, accountId: string, email: string, role: Role, by: { actorRole: ActorRole; actor: string }) {
  const acct = await accountState(ledger, accountId);
  if (!acct.opened) throw new DomainError('not_found', `account ${accountId} not found`);
  const memberId = newMemberId();
  await command(ledger, accountId, { type: 'Invite', accountId, memberId, email, role, actorRole: by.actorRole }, by.actor);
  return { member_id: memberId, email: normalEmail(email), role, status: 'invited' as const };
}

export async function changeRole(ledger: Ledger, accountId: string, memberId: string, role: Role, by: { actorRole: ActorRole; actor: string }) {
  const r = await command(ledger, accountId, { type: 'ChangeRole', memberId, role, actorRole: by.actorRole }, by.actor);
  return r.state.members[memberId];
}

export async function remove(ledger: Ledger, accountId: string, memberId: string, by: { actorRole: ActorRole; actor: string }) {
  await command(ledger, accountId, { type: 'Remove', memberId, actorRole: by.actorRole }, by.actor);
}

/** At sign-in: every invitation of this address is accepted (a MemberJoined each, by the person). */
export async function joinInvitations(ledger: Ledger, email: string): Promise<void> {
  await ledger.readYourWrites();
  for (const row of await membershipsOf(ledger.readModels.db, ledger.rmSchema, normalEmail(email))) {
    if (row.status !== 'invited') continue;
    await command(ledger, row.account_id, { type: 'Join', email }, memberActor({ memberId: row.member_id, email: row.email }));
  }
}

/** The accounts an address belongs to (active memberships), with its role in each. */
export async function accountsOf(ledger: Ledger, email: string) {
  await ledger.readYourWrites();
  const rows = await membershipsOf(ledger.readModels.db, ledger.rmSchema, normalEmail(email));
  return rows.filter((r) => r.status === 'active').map((r) => ({ account_id: r.account_id, member_id: r.member_id, role: r.role }));
}

/** Whether the address is a member of, or invited to, any account. */
export async function isKnown(ledger: Ledger, email: string): Promise<boolean> {
  await ledger.readYourWrites();
  return (await membershipsOf(ledger.readModels.db, ledger.rmSchema, normalEmail(email))).length > 0;
}

/** Sign-up: a new account whose owner is this address, on the starter plan if the operator named one. */
export async function foundAccount(ledger: Ledger, email: string, starterPlan: string | undefined) {
  const memberId = newMemberId();
  const actor = memberActor({ memberId, email: normalEmail(email) });
  const accountId = await openAccount(ledger, { name: normalEmail(email).slice(0, 200) }, actor);
  await command(ledger, accountId, { type: 'Found', accountId, memberId, email }, actor);
  if (starterPlan) await subscribe(ledger, accountId, starterPlan, actor);
  return accountId;
}

/** The members and every change to them with its actor and time (the operator's view, and the owners'). */
export async function membersWithHistory(ledger: Ledger, accountId: string) {
  const state = await membersOf(ledger, accountId);
  const events = await ledger.events.readStream(streams.members(accountId));
  return {
    members: Object.values(state.members).map((m) => ({ member_id: m.memberId, email: m.email, role: m.role, status: m.status })),
    events: events.map((e) => ({ type: e.type, at: e.timestamp, actor: e.metadata.actor, ...e.data })),
  };
}
