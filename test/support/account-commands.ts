// The account decider driven by hand, as the pure tests drive it: a command decided and folded
// into the state, and a chat hold's Reserve command.
import { accountDecider, type AccountCommand } from '../../src/accounts/account-decider.ts';
import type { AccountState } from '../../src/accounts/account-state.ts';
import { fold } from '../../src/ledger/decider.ts';
import type { StreamEvents } from '../../src/ledger/events.ts';

/** `c` decided on `state`, and the state after its events. */
export function runAccount(state: AccountState, c: AccountCommand): { events: StreamEvents['account'][]; state: AccountState } {
  const events = accountDecider.decide(c, state);
  return { events, state: fold(accountDecider, events, state) };
}

/** A chat hold of `amount` tokens for `model` on key k1, taken at `now` for a minute. */
export const reserveCommand = (holdId: string, amount: number, model: string, now: Date): AccountCommand => ({
  type: 'Reserve',
  holdId,
  requestId: `r-${holdId}`,
  keyId: 'k1',
  model,
  kind: 'chat',
  amount,
  now,
  ttlMs: 60_000,
});
