// The keys feature as the other features see it: what they may import, and nothing else.

export * as keysReadModel from '../../projections/keys/keys.ts';
export { accountKeyHandlers } from './account-keys-routes.ts';
export { issueKey, keyCommand, revokeKey } from './commands.ts';
export { revokeRotatedKeys } from './key-rotation.ts';
export { issueManagementKey, listManagementKeys, revokeManagementKey } from './management-keys.ts';
export { hashKey, sameHash } from './secrets.ts';
export type { KeysDeps } from './keys-deps.ts';
