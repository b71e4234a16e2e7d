// The customers feature as the other features see it: what they may import, and nothing else.

export { SESSION_COOKIE } from './sessions.ts';
export type { CustomerDeps } from './customer-deps.ts';
