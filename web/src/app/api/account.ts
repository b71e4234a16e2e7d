// An account's members and keys, typed (paths of src/customers/customer-account-routes.ts).
import { appApi } from './client.ts';
import type { ApiKey, KeyControls, ManagementKey, Member, MemberEvent, NewKey, Role } from './types.ts';

const at = (accountId: string, path: string) => `accounts/${encodeURIComponent(accountId)}/${path}`;

export const membersApi = (accountId: string) => ({
  list: () => appApi.json<{ members: Member[]; events: MemberEvent[] }>(at(accountId, 'members')),
  invite: (email: string, role: Role) => appApi.json<Member>(at(accountId, 'members'), { method: 'POST', body: { email, role } }),
  changeRole: (memberId: string, role: Role) =>
    appApi.json<Member>(at(accountId, `members/${encodeURIComponent(memberId)}`), { method: 'PATCH', body: { role } }),
  remove: (memberId: string) => appApi.json<unknown>(at(accountId, `members/${encodeURIComponent(memberId)}`), { method: 'DELETE' }),
});

export const keysApi = (accountId: string) => ({
  list: () => appApi.json<{ data: ApiKey[] }>(at(accountId, 'keys')).then((r) => r.data),
  create: (controls: KeyControls) => appApi.json<NewKey>(at(accountId, 'keys'), { method: 'POST', body: controls }),
  update: (keyId: string, controls: KeyControls) =>
    appApi.json<unknown>(at(accountId, `keys/${encodeURIComponent(keyId)}`), { method: 'PATCH', body: controls }),
  rotate: (keyId: string, graceSeconds = 0) =>
    appApi.json<NewKey>(at(accountId, `keys/${encodeURIComponent(keyId)}/rotate`), { method: 'POST', body: { grace_seconds: graceSeconds } }),
  revoke: (keyId: string) => appApi.json<unknown>(at(accountId, `keys/${encodeURIComponent(keyId)}/revoke`), { method: 'POST', body: {} }),
});

export const managementKeysApi = (accountId: string) => ({
  list: () => appApi.json<{ data: ManagementKey[] }>(at(accountId, 'management-keys')).then((r) => r.data),
  create: (name: string) => appApi.json<NewKey>(at(accountId, 'management-keys'), { method: 'POST', body: { name } }),
  revoke: (keyId: string) => appApi.json<unknown>(at(accountId, `management-keys/${encodeURIComponent(keyId)}/revoke`), { method: 'POST', body: {} }),
});
