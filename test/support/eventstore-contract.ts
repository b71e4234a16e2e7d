// The event store contract: every adapter must pass these, whatever engine is behind it.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomUUID } from 'node:crypto';
import type { EventStore, NewEvent, StoredEvent } from '../../src/eventstore/port.ts';
import { InvalidEventError, InvalidStreamNameError, WrongExpectedRevisionError, DuplicateEventError } from '../../src/eventstore/errors.ts';

export interface ContractTarget {
  store: EventStore;
  /** Tries to edit or delete a stored event behind the store's back; resolves true if it worked. */
  tamper?: (sql: 'update' | 'delete' | 'truncate') => Promise<boolean>;
  close(): Promise<void>;
}

const md = { correlationId: 'corr-1', causationId: null, actor: 'test' };
const ev = (type = 'AccountOpened', n = 1): NewEvent => ({ type, data: { accountId: `a${n}`, name: `n${n}` }, metadata: md });

export function defineEventStoreContract(label: string, open: () => Promise<ContractTarget>) {
  const s = suite<{ t: ContractTarget }>(`event store contract: ${label}`, {} as never);
  s.before.each(async (ctx) => {
    ctx.t = await open();
  });
  s.after.each(async (ctx) => {
    await ctx.t.close();
  });

  s('append to a new stream, then read it back in order with hash chain', async ({ t }) => {
    const stream = `account-${randomUUID()}`;
    const r = await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev(), ev('AccountOpened', 2)] });
    assert.is(r.revision, 1);
    const read = await t.store.readStream(stream);
    assert.equal(
      read.map((e) => e.revision),
      [0, 1],
    );
    assert.equal(
      read.map((e) => e.data.accountId),
      ['a1', 'a2'],
    );
    assert.is(read[0].prevHash, '0'.repeat(64));
    assert.is(read[1].prevHash, read[0].hash);
    assert.equal(read[0].metadata, md);
    assert.ok(read[0].position < read[1].position);
    assert.ok(!Number.isNaN(Date.parse(read[0].timestamp)));
  });

  s('stale expected revision is a typed conflict and writes nothing', async ({ t }) => {
    const stream = `account-${randomUUID()}`;
    await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev()] });
    const before = await t.store.headPosition();
    for (const expected of ['no_stream', 5] as const) {
      try {
        await t.store.append({ stream, expectedRevision: expected, events: [ev()] });
        assert.unreachable('should conflict');
      } catch (err) {
        assert.instance(err, WrongExpectedRevisionError);
        assert.is((err as WrongExpectedRevisionError).actual, 0);
      }
    }
    assert.is(await t.store.headPosition(), before);
    assert.is((await t.store.readStream(stream)).length, 1);
  });

  s('appendMany decides each request on its own revision', async ({ t }) => {
    const a = `account-${randomUUID()}`;
    const b = `account-${randomUUID()}`;
    await t.store.append({ stream: a, expectedRevision: 'no_stream', events: [ev()] });
    const results = await t.store.appendMany([
      { stream: a, expectedRevision: 'no_stream', events: [ev()] },
      { stream: b, expectedRevision: 'no_stream', events: [ev()] },
    ]);
    assert.instance(results[0], WrongExpectedRevisionError);
    assert.is((results[1] as { revision: number }).revision, 0);
    assert.is((await t.store.readStream(b)).length, 1);
  });

  s('empty, over-long and reserved stream names are refused', async ({ t }) => {
    for (const stream of ['', 'x'.repeat(201), '$all']) {
      try {
        await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev()] });
        assert.unreachable('should refuse');
      } catch (err) {
        assert.instance(err, InvalidStreamNameError);
      }
    }
  });

  s('an event that fails its schema is refused and nothing is stored', async ({ t }) => {
    const stream = `account-${randomUUID()}`;
    const head = await t.store.headPosition();
    for (const bad of [
      { type: 'AccountOpened', data: { accountId: 'a' }, metadata: md },
      { type: 'NoSuchEvent', data: {}, metadata: md },
      { type: 'ExtraTokensGranted', data: { accountId: 'a', amount: -5, reason: '' }, metadata: md },
      { type: 'AccountOpened', data: { accountId: 'a', name: 'n' }, metadata: { actor: 'x' } },
    ]) {
      try {
        await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev(), bad as NewEvent] });
        assert.unreachable('should refuse');
      } catch (err) {
        assert.instance(err, InvalidEventError);
      }
    }
    assert.is(await t.store.headPosition(), head);
    assert.is((await t.store.readStream(stream)).length, 0);
  });

  s('a repeated event id is refused as a duplicate', async ({ t }) => {
    const id = randomUUID();
    await t.store.append({ stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [{ ...ev(), id }] });
    const [r] = await t.store.appendMany([{ stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [{ ...ev(), id }] }]);
    assert.instance(r, DuplicateEventError);
  });

  s('snapshots are stored with the revision they describe', async ({ t }) => {
    const stream = `account-${randomUUID()}`;
    assert.is(await t.store.readSnapshot(stream), null);
    await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev(), ev()], snapshot: { total: 2 } });
    await t.store.append({ stream, expectedRevision: 1, events: [ev()] });
    assert.equal(await t.store.readSnapshot(stream), { revision: 1, state: { total: 2 } });
  });

  s('stored events cannot be updated, deleted or truncated', async ({ t }) => {
    if (!t.tamper) return;
    await t.store.append({ stream: `account-${randomUUID()}`, expectedRevision: 'no_stream', events: [ev()] });
    for (const op of ['update', 'delete', 'truncate'] as const) assert.is(await t.tamper(op), false, op);
  });

  s('subscribe catches up, then receives live appends, each exactly once', async ({ t }) => {
    const start = await t.store.headPosition();
    const stream = `account-${randomUUID()}`;
    await t.store.append({ stream, expectedRevision: 'no_stream', events: [ev(), ev()] });
    const seen: StoredEvent[] = [];
    const sub = t.store.subscribe(start, async (events) => {
      seen.push(...events);
    });
    await sub.caughtUp();
    assert.is(seen.length, 2);
    await t.store.append({ stream, expectedRevision: 1, events: [ev()] });
    await sub.caughtUp();
    assert.is(seen.length, 3);
    await sub.close();
    assert.equal(
      seen.map((e) => e.revision),
      [0, 1, 2],
    );
  });

  s('many concurrent writers: a live reader sees every event exactly once, in position order', async ({ t }) => {
    const start = await t.store.headPosition();
    const seen: StoredEvent[] = [];
    const sub = t.store.subscribe(start, async (events) => {
      seen.push(...events);
    });
    const writers = 16;
    const perWriter = 25;
    const appended: string[] = [];
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const stream = `account-w${w}-${randomUUID()}`;
        for (let i = 0; i < perWriter; i++) {
          const id = randomUUID();
          // Uneven batch sizes and pauses make commits interleave in every order.
          const events = [{ ...ev(), id }, ...(i % 3 === 0 ? [ev()] : [])];
          await t.store.append({ stream, expectedRevision: i === 0 ? 'no_stream' : 'any', events });
          appended.push(id);
          if (i % 5 === w % 5) await new Promise((r) => setTimeout(r, Math.random() * 3));
        }
      }),
    );
    await sub.caughtUp();
    await sub.close();
    const ids = seen.map((e) => e.id);
    assert.is(new Set(ids).size, ids.length, 'no event seen twice');
    for (const id of appended) assert.ok(ids.includes(id), `event ${id} seen`);
    const expectedTotal = writers * perWriter + writers * Math.ceil(perWriter / 3);
    assert.is(seen.length, expectedTotal);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].position > seen[i - 1].position, 'increasing positions');
    // readAll gives the same sequence the subscriber saw.
    const all = await t.store.readAll(start, 100_000);
    assert.equal(
      all.map((e) => e.id),
      ids,
    );
  });

  return s;
}
