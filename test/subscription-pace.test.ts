// The pace of a subscription (src/eventstore/subscription.ts) when someone waits for events it was
// not told of: expect() has them read after the linger, as appends are, so an operator's read
// never cuts the projector's batching short; caughtUp() reads at once.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EventEmitter } from 'node:events';
import { pollingSubscription } from '../src/eventstore/subscription.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';

const LINGER_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const event = (position: number) =>
  ({ position, id: `e${position}`, type: 'AccountOpened', stream: 'account-a', revision: position }) as unknown as StoredEvent;

function subscribed() {
  const log: StoredEvent[] = [];
  const seen: number[] = [];
  const sub = pollingSubscription({
    afterPosition: 0,
    handler: async (events) => void seen.push(...events.map((e) => e.position)),
    readAll: async (after, limit) => log.filter((e) => e.position > after).slice(0, limit),
    head: async () => log.length,
    // Never notified, a poll that never comes: only expect() and caughtUp() can move it.
    notifier: new EventEmitter(),
    pollIntervalMs: 60_000,
    lingerMs: LINGER_MS,
  });
  return { log, seen, sub };
}

test('expect() reads events nobody notified, after the linger', async () => {
  const { log, seen, sub } = subscribed();
  try {
    await sleep(LINGER_MS + 100); // its first read (of nothing, after a linger) done
    log.push(event(1), event(2));
    const asked = Date.now();
    sub.expect(2);
    await sleep(LINGER_MS / 3);
    assert.equal(seen, [], 'not before the linger');
    while (seen.length < 2 && Date.now() - asked < 5000) await sleep(5);
    assert.equal(seen, [1, 2]);
    assert.ok(Date.now() - asked >= LINGER_MS - 10, `read after ${Date.now() - asked} ms`);
  } finally {
    await sub.close();
  }
});

test('caughtUp() reads them at once', async () => {
  const { log, seen, sub } = subscribed();
  try {
    await sleep(LINGER_MS + 100);
    log.push(event(1));
    const asked = Date.now();
    await sub.caughtUp();
    assert.equal(seen, [1]);
    assert.ok(Date.now() - asked < LINGER_MS, `read after ${Date.now() - asked} ms`);
  } finally {
    await sub.close();
  }
});

test.run();
