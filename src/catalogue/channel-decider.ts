// The channel decider: an operator takes an upstream channel out of rotation or puts it back.
// Each change is an event with its actor (in the metadata) and reason; a request for the state
// the channel is already in changes nothing.
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, StreamEvents } from '../ledger/events.ts';
import { invalid } from '../ledger/errors.ts';
import { CHANNEL_ID_PATTERN } from '../ledger/event-atoms.ts';

export interface ChannelState {
  disabled: boolean;
}

export type ChannelCommand = { type: 'Disable' | 'Enable'; channelId: string; reason: string };

const CHANNEL_ID = new RegExp(CHANNEL_ID_PATTERN);

export const channelDecider: Decider<ChannelState, ChannelCommand, StreamEvents['channel']> = {
  initialState: () => ({ disabled: false }),
  decide(c, s) {
    if (!CHANNEL_ID.test(c.channelId)) throw invalid('channel id must be 1-200 letters, digits and _ . : / @ -', { param: 'channel_id' });
    const reason = c.reason.slice(0, 500);
    if (c.type === 'Disable') return s.disabled ? [] : [{ type: 'ChannelDisabled', data: { channelId: c.channelId, reason } }];
    return s.disabled ? [{ type: 'ChannelEnabled', data: { channelId: c.channelId, reason } }] : [];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'ChannelDisabled') return { disabled: true };
    if (e.type === 'ChannelEnabled') return { disabled: false };
    return s;
  },
};
