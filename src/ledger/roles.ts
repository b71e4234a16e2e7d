// Who in a customer's account may do what: the one permission table (role -> actions). Routes ask
// `can(role, action)`; nothing else decides a member's rights.

export const ROLES = ['owner', 'admin', 'billing', 'developer'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (v: unknown): v is Role => typeof v === 'string' && (ROLES as readonly string[]).includes(v);

export type Action =
  /** See the account's members and their history. */
  | 'members.read'
  /** Invite, change roles and remove members (owners alone touch the owner role: see decideMembers). */
  | 'members.manage'
  /** See keys and each key's spend against its limit. */
  | 'keys.read'
  /** Create, change, rotate and revoke keys. */
  | 'keys.manage'
  /** Usage per day and model. */
  | 'usage.read'
  /** Price list, purchases, codes, payments, receipts, statements and the usage CSV. */
  | 'billing';

export const PERMISSIONS: Readonly<Record<Role, ReadonlySet<Action>>> = {
  owner: new Set<Action>(['members.read', 'members.manage', 'keys.read', 'keys.manage', 'usage.read', 'billing']),
  admin: new Set<Action>(['members.read', 'members.manage', 'keys.read', 'keys.manage']),
  billing: new Set<Action>(['members.read', 'billing']),
  developer: new Set<Action>(['members.read', 'keys.read', 'keys.manage', 'usage.read']),
};

export const can = (role: Role, action: Action): boolean => PERMISSIONS[role].has(action);

/** A person on an account: invited until they accept, then active. */
export interface Member {
  memberId: string;
  email: string;
  role: Role;
  status: 'invited' | 'active';
}
