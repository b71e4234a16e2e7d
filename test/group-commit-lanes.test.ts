// Operator work (a correction's pages of adjustments) is appended in a lane of its own: a live
// call's append goes out while a background batch is still in flight, and never shares its
// transaction. The command handler puts a command there only when asked.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createGroupCommitter } from '../src/eventstore/group-commit.ts';
import type { AppendRequest, AppendResult, EventStore } from '../src/eventstore/port.ts';
import { createCommandHandler } from '../src/ledger/command-handler.ts';
import type { Decider } from '../src/ledger/decider.ts';

/** A store whose appendMany calls are held until released, so the test sees what is in flight. */
function heldStore() {
  const calls: Array<{ requests: AppendRequest[]; release: () => void }> = [];
  let position = 0;
  const store = {
    appendMany(requests: AppendRequest[]): Promise<AppendResult[]> {
      return new Promise((resolve) => {
        calls.push({
          requests,
          release: () =>
            resolve(
              requests.map((r) => {
                const firstPosition = position + 1;
                position += r.events.length;
                return { stream: r.stream, revision: r.events.length - 1, firstPosition, lastPosition: position, timestamp: new Date().toISOString() };
              }),
            ),
        });
      });
    },
  } as unknown as EventStore;
  return { store, calls };
}

const request = (stream: string, background?: boolean): AppendRequest => ({
  stream,
  expectedRevision: 'any',
  events: [{ type: 'Noted', data: {}, metadata: { correlationId: 'c', causationId: null, actor: 't' } }],
  ...(background ? { background } : {}),
});
const turns = async (n = 3) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

const t = suite('group commit lanes');

t('a live append goes out while a background batch is in flight, in a transaction of its own', async () => {
  const { store, calls } = heldStore();
  const committer = createGroupCommitter(store, { maxInFlight: 1 });
  const bg = committer.append(request('account-a', true));
  await turns();
  assert.is(calls.length, 1, 'the background batch is sent');
  const live = committer.append(request('account-b'));
  await turns();
  // With one lane, maxInFlight 1 would have held the live append until the background one ended.
  assert.is(calls.length, 2, 'the live append did not wait for the background batch');
  assert.equal(
    calls[1].requests.map((r) => r.stream),
    ['account-b'],
  );
  calls[1].release();
  assert.is((await live).stream, 'account-b');
  calls[0].release();
  assert.is((await bg).stream, 'account-a');
});

t('background batches go one at a time and never carry a live append', async () => {
  const { store, calls } = heldStore();
  const committer = createGroupCommitter(store);
  const first = committer.append(request('account-a', true));
  await turns();
  const second = committer.append(request('account-c', true));
  const live = committer.append(request('account-b'));
  await turns();
  assert.is(calls.length, 2, 'the first background batch and the live one; the second background waits');
  assert.ok(calls.every((c) => c.requests.every((r) => Boolean(r.background) === Boolean(c.requests[0].background))));
  calls[0].release();
  await first;
  await turns();
  assert.is(calls.length, 3, 'the second background batch goes once the first is done');
  assert.equal(
    calls[2].requests.map((r) => r.stream),
    ['account-c'],
  );
  calls[1].release();
  calls[2].release();
  await Promise.all([second, live]);
  await committer.drain();
});

interface Count {
  n: number;
}
const counter: Decider<Count, { type: 'Add' }> = {
  initialState: () => ({ n: 0 }),
  decide: () => [{ type: 'Added', data: {} } as never],
  evolve: (s) => ({ n: s.n + 1 }),
};

t('the command handler marks a batch background only when every command in it asked', async () => {
  const seen: AppendRequest[] = [];
  const store = {
    readSnapshot: async () => null,
    readStream: async () => [],
  } as unknown as EventStore;
  let position = 0;
  const handler = createCommandHandler({
    store,
    append: async (r) => {
      seen.push(r);
      position += r.events.length;
      return {
        stream: r.stream,
        revision: position - 1,
        firstPosition: position - r.events.length + 1,
        lastPosition: position,
        timestamp: new Date().toISOString(),
      };
    },
  });
  await handler.handle(counter, 'counter-1', { type: 'Add' }, { correlationId: 'c', causationId: null, actor: 't' }, undefined, { background: true });
  await handler.handle(counter, 'counter-2', { type: 'Add' }, { correlationId: 'c', causationId: null, actor: 't' });
  assert.equal(
    seen.map((r) => r.background === true),
    [true, false],
  );
});

t.run();
