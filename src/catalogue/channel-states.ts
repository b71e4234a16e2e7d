// Keeps the channel registry's operator switches current: loaded from each channel's stream at
// start, then from ChannelDisabled / ChannelEnabled events as they are appended (this process's
// at once, other processes' within one poll of the event feed).
import type { EventEmitter } from 'node:events';
import type { StoredEvent, Subscription } from '../eventstore/port.ts';
import type { EventFeed } from '../eventstore/event-feed.ts';
import type { ChannelRegistry } from '../upstream/channels/registry.ts';
import { streams } from '../ledger/events.ts';
import type { Ledger } from '../ledger/ledger.ts';

export async function followChannelStates(opts: {
  registry: ChannelRegistry;
  ledger: Ledger;
  feed: EventFeed;
  localEvents: EventEmitter;
}): Promise<{ close(): Promise<void> }> {
  const apply = (events: StoredEvent[]) => {
    for (const e of events) {
      if (e.type !== 'ChannelDisabled' && e.type !== 'ChannelEnabled') continue;
      const { channelId, reason } = e.data as { channelId: string; reason: string };
      opts.registry.setDisabled(channelId, e.type === 'ChannelDisabled' ? { by: e.metadata.actor, reason, at: e.timestamp } : null);
    }
  };
  opts.localEvents.on('events', apply);
  const subscription: Subscription = opts.feed.subscribe(await opts.feed.readableHead(), async (events) => apply(events));
  for (const channel of opts.registry.list()) apply(await opts.ledger.events.readStream(streams.channel(channel.id)));
  return {
    async close() {
      opts.localEvents.off('events', apply);
      await subscription.close();
    },
  };
}
