// Which appends wait for the disk. A hold (QuotaReserved) commits without waiting for the WAL
// flush; everything that moves money (charges, releases, grants, subscriptions) waits. Checked
// on the requests the command handler sends and on the store: a relaxed append is committed and
// visible to another connection at once, and a batch mixing both kinds is durable.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import type { AppendRequest, EventStore } from '../src/eventstore/port.ts';
import { createCommandHandler, SNAPSHOT_EVERY } from '../src/ledger/command-handler.ts';
import { accountDecider } from '../src/accounts/account-decider.ts';
import { streams } from '../src/ledger/events.ts';
import { testDatabases, type TestDatabase } from './support/db.ts';

const md = { correlationId: 'c', causationId: null, actor: 'test' };

for (const engine of testDatabases()) {
  const t = suite(`append durability on ${engine.label}`);
  let tdb: TestDatabase;
  let store: EventStore;
  t.before(async () => {
    tdb = await engine.open();
    store = await createPostgresEventStore(tdb.db, { schema: tdb.schema });
  });
  t.after(async () => {
    await store.close();
    await tdb.cleanup();
  });

  t('holds are appended without waiting for the disk; charges, releases and grants wait', async () => {
    const sent: AppendRequest[] = [];
    const handler = createCommandHandler({
      store,
      append: (r) => {
        sent.push(r);
        return store.append(r);
      },
    });
    const stream = streams.account('acct_dur');
    const run = (c: unknown) => handler.handle(accountDecider, stream, c as never, md);
    await run({ type: 'Open', accountId: 'acct_dur', name: 'Durability' });
    await run({
      type: 'Subscribe',
      accountId: 'acct_dur',
      plan: { planId: 'p', name: 'P', quota: 10_000, validityDays: 30, requestsPerMinute: 60, models: ['*'] },
      now: new Date(),
    });
    await run({ type: 'GrantExtra', accountId: 'acct_dur', amount: 500, reason: 'test' });
    const hold = (id: string) => ({
      type: 'Reserve',
      holdId: id,
      requestId: `req_${id}`,
      keyId: 'key_1',
      model: 'm',
      kind: 'chat',
      amount: 100,
      now: new Date(),
      ttlMs: 60_000,
    });
    await run(hold('h1'));
    await run({
      type: 'SettleChat',
      holdId: 'h1',
      multiplierMilli: 1000,
      promptTokens: 10,
      completionTokens: 20,
      reasoningEffort: null,
      api: 'chat.completions',
      streamed: false,
      aborted: false,
    });
    await run(hold('h2'));
    await run({ type: 'Release', holdId: 'h2', reason: 'upstream_error' });
    assert.equal(
      sent.map((r) => [r.events.map((e) => e.type).join(','), r.durable]),
      [
        ['AccountOpened', true],
        ['SubscriptionStarted', true],
        ['ExtraTokensGranted', true],
        ['QuotaReserved', false],
        ['ChatCharged', true],
        ['QuotaReserved', false],
        ['ReservationReleased', true],
      ],
    );
  });

  t('a relaxed append is committed and visible at once; a mixed batch is durable; both keep their order', async () => {
    const ev = (type: string) => ({ type, data: { n: 1 }, metadata: md });
    const relaxed = await store.append({ stream: 'dur-a', expectedRevision: 'no_stream', events: [ev('T')], durable: false });
    // A fresh read through the store (another pooled connection on PostgreSQL) sees it.
    const seen = await store.readStream('dur-a', 0);
    assert.is(seen.length, 1);
    assert.is(seen[0].position, relaxed.firstPosition);
    const results = await store.appendMany([
      { stream: 'dur-a', expectedRevision: 0, events: [ev('T')], durable: false },
      { stream: 'dur-b', expectedRevision: 'no_stream', events: [ev('T')] },
    ]);
    assert.ok(results.every((r) => !(r instanceof Error)));
    const all = await store.readAll(relaxed.firstPosition - 1, 10);
    assert.equal(
      all.map((e) => e.stream),
      ['dur-a', 'dur-a', 'dur-b'],
    );
  });

  t('snapshots are stored every SNAPSHOT_EVERY revisions and load back (holds included) to the state a full fold gives', async () => {
    const stream = streams.account('acct_snap');
    const first = createCommandHandler({ store });
    const run = (c: unknown) => first.handle(accountDecider, stream, c as never, md);
    await run({ type: 'Open', accountId: 'acct_snap', name: 'Snap' });
    await run({
      type: 'Subscribe',
      accountId: 'acct_snap',
      plan: { planId: 'p', name: 'P', quota: 1_000_000, validityDays: 30, requestsPerMinute: 60, models: ['*'] },
      now: new Date(),
    });
    // 2 + 45 events: one snapshot mark crossed (revision 32), 14 events after it.
    for (let i = 0; i < 45; i++)
      await run({ type: 'Reserve', holdId: `h${i}`, requestId: `r${i}`, keyId: 'k', model: 'm', kind: 'chat', amount: 10 + i, now: new Date(), ttlMs: 60_000 });
    const snap = await store.readSnapshot(stream);
    assert.ok(snap, 'a snapshot was stored');
    assert.is(Math.floor(snap!.revision / SNAPSHOT_EVERY), 1);
    // A new handler (a new process) loads from the snapshot plus the tail.
    const second = createCommandHandler({ store });
    const loaded = await second.state(accountDecider, stream);
    const events = await store.readStream(stream, 0);
    const folded = events.reduce((s, e) => accountDecider.evolve(s, { type: e.type, data: e.data } as never), accountDecider.initialState());
    assert.is(loaded.revision, 46);
    assert.is(loaded.state.holds.size, 45);
    assert.is(loaded.state.reserved, folded.reserved);
    assert.equal(loaded.state.holds.toJSON(), folded.holds.toJSON());
    assert.equal({ ...loaded.state, holds: null }, { ...folded, holds: null });
    // And it decides from there: the next hold is refused as a duplicate, a new one fits.
    await second.handle(
      accountDecider,
      stream,
      { type: 'Reserve', holdId: 'h45', requestId: 'r45', keyId: 'k', model: 'm', kind: 'chat', amount: 1, now: new Date(), ttlMs: 60_000 } as never,
      md,
    );
    const duplicate = await second
      .handle(
        accountDecider,
        stream,
        { type: 'Reserve', holdId: 'h0', requestId: 'r0', keyId: 'k', model: 'm', kind: 'chat', amount: 1, now: new Date(), ttlMs: 60_000 } as never,
        md,
      )
      .then(
        () => 'accepted',
        (e: Error) => e.message,
      );
    assert.match(duplicate, /hold h0 exists/);
  });

  t.run();
}
