// Invariants checked event by event over an account's history: the decider's state and the
// accounts read model never show more spent or held than the plan and extra tokens allow.
import * as assert from 'uvu/assert';
import { accountDecider } from '../../src/accounts/account-decider.ts';
import { reservedTokens } from '../../src/accounts/account-state.ts';
import { accounts as accountsProjection, type AccountRow } from '../../projections/accounts/accounts.ts';
import { streamEvent, type DomainEvent } from '../../src/ledger/events.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';

/** Replays the account's events through the decider and the read model, checking after each one. */
export function assertNeverBelowZero(events: StoredEvent[]): void {
  let state = accountDecider.initialState();
  let row: AccountRow | undefined;
  for (const e of events) {
    // The account's own stream through its decider (a key's events, on streams of their own, leave it as it is).
    if (e.stream.startsWith('account-')) state = accountDecider.evolve(state, streamEvent('account', { type: e.type, data: e.data } as DomainEvent));
    row = accountsProjection.evolve(row, e, String(e.data.accountId)) ?? undefined;
    const quota = state.subscription?.quota ?? 0;
    const at = `after ${e.type} #${e.position}`;
    assert.ok(state.quotaUsed <= quota, `quota used ${state.quotaUsed} > ${quota} ${at}`);
    assert.ok(state.extraUsed <= state.extraGranted, `extra used beyond grant ${at}`);
    assert.ok(reservedTokens(state) <= quota - state.quotaUsed + state.extraGranted - state.extraUsed, `holds exceed the balance ${at}`);
    assert.ok(row && row.quota_total - row.quota_used >= 0 && row.reserved >= 0 && row.open_holds >= 0, `read model negative ${at}: ${JSON.stringify(row)}`);
    assert.ok(row.quota_total - row.quota_used + row.extra_granted - row.extra_used - row.reserved >= 0, `read model remaining negative ${at}`);
  }
}
