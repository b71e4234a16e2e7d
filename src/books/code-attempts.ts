// Guessing redemption codes is limited per account, the same on every gateway: each wrong, expired
// or used code is an event on the account's stream for the current UTC hour, and the decider refuses
// to record more than the hour's limit. The event store's optimistic concurrency makes the count
// exact across gateways (two gateways cannot both take the last attempt), and a stream never holds
// more than `limit` events. The code itself is not kept.
import type { Decider } from '../ledger/decider.ts';
import type { StreamEvents } from '../ledger/events.ts';

/** The UTC hour of an instant as yyyymmddhh: the window attempts are counted in. */
export const utcHour = (at: Date): string => at.toISOString().slice(0, 13).replace(/[-T]/g, '');

/** Seconds until the next UTC hour, when the count starts over. */
export const secondsToNextHour = (at: Date): number => Math.max(1, 3600 - Math.floor((at.getTime() % 3_600_000) / 1000));

export interface CodeAttemptsState {
  refused: number;
}

/** Records one refused code, unless the hour's `limit` is already reached (then nothing: the caller answers 429). */
export type CodeAttemptCommand = { type: 'Refuse'; accountId: string; hour: string; limit: number };

export const codeAttemptsDecider: Decider<CodeAttemptsState, CodeAttemptCommand, StreamEvents['codeAttempts']> = {
  initialState: () => ({ refused: 0 }),
  decide: (c, s) => (s.refused >= c.limit ? [] : [{ type: 'RedemptionCodeRefused', data: { accountId: c.accountId, hour: c.hour } }]),
  evolve: (s, e) => (e.type === 'RedemptionCodeRefused' ? { refused: s.refused + 1 } : s),
};
