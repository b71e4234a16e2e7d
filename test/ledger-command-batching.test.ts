// The command handler batches commands on one stream: while an append is in flight, the commands
// that arrive are decided one after another and appended together. Each must still succeed or
// fail on its own, exactly as if the commands had run one at a time.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { createGroupCommitter } from '../src/eventstore/group-commit.ts';
import { AppendDeadlinePassed, StaleReadError, InvalidEventError, DuplicateEventError, WrongExpectedRevisionError } from '../src/eventstore/errors.ts';
import { toApiError } from '../src/http/errors.ts';
import type { AppendRequest, EventStore, NewEvent } from '../src/eventstore/port.ts';
import { createCommandHandler } from '../src/ledger/command-handler.ts';
import type { Decider } from '../src/ledger/decider.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { testDatabases, type TestDatabase } from './support/db.ts';

interface Counter {
  total: number;
  n: number;
}
interface Add {
  type: 'Add';
  by: number;
  max?: number;
  bad?: boolean;
}

/** A small decider: adds to a total, refusing to pass `max`. */
const counter: Decider<Counter, Add> = {
  initialState: () => ({ total: 0, n: 0 }),
  decide(c, s) {
    if (c.max !== undefined && s.total + c.by > c.max) throw new DomainError('insufficient_quota', `${s.total} + ${c.by} > ${c.max}`);
    return [{ type: 'Added', data: { by: c.by, bad: c.bad ?? false } }] as never;
  },
  evolve: (s, e) => ({ total: s.total + (e.data as unknown as { by: number }).by, n: s.n + 1 }),
};

interface Account {
  reserved: number;
  charged: number;
  holds: string[];
}
type AccountCmd = { type: 'Hold'; id: string; amount: number; max: number } | { type: 'Charge'; id: string; amount: number };

/** Holds (provisional events) and their charges, refusing a hold past `max` or a charge without its hold. */
const holder: Decider<Account, AccountCmd> = {
  initialState: () => ({ reserved: 0, charged: 0, holds: [] }),
  decide(c, s) {
    if (c.type === 'Hold') {
      if (s.reserved + s.charged + c.amount > c.max) throw new DomainError('insufficient_quota', 'no room');
      return [{ type: 'QuotaReserved', data: { id: c.id, amount: c.amount } }] as never;
    }
    if (!s.holds.includes(c.id)) throw new DomainError('conflict', `hold ${c.id} is not open`);
    return [{ type: 'Charged', data: { id: c.id, amount: c.amount } }] as never;
  },
  evolve(s, e) {
    const d = e.data as unknown as { id: string; amount: number };
    return e.type === 'QuotaReserved'
      ? { ...s, reserved: s.reserved + d.amount, holds: [...s.holds, d.id] }
      : { ...s, reserved: s.reserved - 10, charged: s.charged + d.amount, holds: s.holds.filter((h) => h !== d.id) };
  },
};

const md = { correlationId: 'c', causationId: null, actor: 'test' };

/** Refuses events marked bad, as the catalogue validator refuses an invalid event. */
const validate = (e: NewEvent) => {
  if ((e.data as { bad?: boolean }).bad) throw new InvalidEventError(e.type, 'marked bad');
};

function counting(store: EventStore) {
  const appends: AppendRequest[] = [];
  const committer = createGroupCommitter(store);
  return {
    appends,
    append: (r: AppendRequest) => {
      appends.push(r);
      return committer.append(r);
    },
  };
}

/** Appends that wait at a gate the test opens, one at a time (so another process can write in between). */
function gated(store: EventStore) {
  const gate: Array<() => void> = [];
  const waiting = async () => {
    while (gate.length === 0) await new Promise((r) => setTimeout(r, 2));
  };
  return {
    append: async (r: AppendRequest) => {
      await new Promise<void>((go) => gate.push(go));
      return store.append(r);
    },
    waiting,
    async open() {
      await waiting();
      gate.shift()!();
    },
  };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e: Error) => e.name,
  );

for (const engine of testDatabases()) {
  const t = suite(`command batching on ${engine.label}`);
  let tdb: TestDatabase;
  let store: EventStore;
  t.before(async () => {
    tdb = await engine.open();
    store = await createPostgresEventStore(tdb.db, { schema: tdb.schema, validate });
  });
  t.after(async () => {
    await store.close();
    await tdb.cleanup();
  });

  t('concurrent commands on one stream: two appends, each command its own events, in order', async () => {
    const c = counting(store);
    const handler = createCommandHandler({ store, append: c.append });
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => handler.handle(counter, 'counter-a', { type: 'Add', by: i + 1 }, md)));
    // The first goes out alone; the 49 that queue behind it share the second append.
    assert.is(c.appends.length, 2);
    assert.equal(
      c.appends.map((a) => a.events.length),
      [1, 49],
    );
    assert.equal(
      results.map((r) => r.revision),
      Array.from({ length: 50 }, (_, i) => i),
    );
    assert.equal(
      results.map((r) => r.events.length),
      Array(50).fill(1),
    );
    for (let i = 1; i < 50; i++) assert.ok(results[i].lastPosition > results[i - 1].lastPosition, 'in order');
    // Positions are consecutive within one append (one transaction), not across appends.
    for (let i = 2; i < 50; i++) assert.is(results[i].lastPosition, results[i - 1].lastPosition + 1);
    // Each result's state is the state after its own command.
    assert.equal(
      results.map((r) => (r.state as Counter).total),
      Array.from({ length: 50 }, (_, i) => ((i + 1) * (i + 2)) / 2),
    );
    const stored = await store.readStream('counter-a');
    assert.equal(
      stored.map((e) => (e.data as { by: number }).by),
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
    assert.equal(
      stored.map((e) => e.position),
      results.map((r) => r.lastPosition),
    );
  });

  t('a command its predecessors in the batch leave no room for is refused; the rest commit', async () => {
    const handler = createCommandHandler({ store, append: counting(store).append });
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => outcome(handler.handle(counter, 'counter-b', { type: 'Add', by: 10, max: 100 }, md))));
    assert.is(outcomes.filter((o) => o === 'ok').length, 10);
    assert.is(outcomes.filter((o) => o === 'DomainError').length, 10);
    assert.is((await handler.state(counter, 'counter-b')).state.total, 100);
    assert.is((await store.readStream('counter-b')).length, 10);
  });

  t('an event the store refuses fails only its own command', async () => {
    const handler = createCommandHandler({ store, append: counting(store).append });
    const first = handler.handle(counter, 'counter-c', { type: 'Add', by: 1 }, md);
    const rest = [2, 3, 4, 5, 6].map((by) => handler.handle(counter, 'counter-c', { type: 'Add', by, bad: by === 4 }, md));
    const outcomes = await Promise.all([first, ...rest].map(outcome));
    assert.equal(outcomes, ['ok', 'ok', 'ok', 'InvalidEventError', 'ok', 'ok']);
    assert.equal(
      (await store.readStream('counter-c')).map((e) => (e.data as { by: number }).by),
      [1, 2, 3, 5, 6],
    );
    assert.is((await handler.state(counter, 'counter-c')).state.total, 17);
  });

  t('a duplicate event id fails only its own command', async () => {
    const handler = createCommandHandler({ store, append: counting(store).append });
    const ids = (n: number) => () => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
    await handler.handle(counter, 'counter-d', { type: 'Add', by: 1 }, md, ids(1));
    const outcomes = await Promise.all(
      [
        handler.handle(counter, 'counter-d', { type: 'Add', by: 2 }, md, ids(2)),
        handler.handle(counter, 'counter-d', { type: 'Add', by: 3 }, md, ids(3)),
        handler.handle(counter, 'counter-d', { type: 'Add', by: 4 }, md, ids(1)),
        handler.handle(counter, 'counter-d', { type: 'Add', by: 5 }, md, ids(5)),
      ].map((p) =>
        p.then(
          () => 'ok',
          (e: Error) => (e instanceof DuplicateEventError ? 'duplicate' : e.name),
        ),
      ),
    );
    assert.equal(outcomes, ['ok', 'ok', 'duplicate', 'ok']);
    assert.equal(
      (await store.readStream('counter-d')).map((e) => (e.data as { by: number }).by),
      [1, 2, 3, 5],
    );
  });

  t('another writer on the stream (another process): the batch is decided again and commits', async () => {
    const mine = createCommandHandler({ store, append: counting(store).append });
    const theirs = createCommandHandler({ store });
    await mine.handle(counter, 'counter-e', { type: 'Add', by: 1, max: 10 }, md);
    // The other process appends; our cache is now one revision behind.
    await theirs.handle(counter, 'counter-e', { type: 'Add', by: 5, max: 10 }, md);
    const outcomes = await Promise.all([1, 1, 1, 1, 1].map((by) => outcome(mine.handle(counter, 'counter-e', { type: 'Add', by, max: 10 }, md))));
    // Decided against the fresh state (total 6): four fit under the max of 10, the fifth does not.
    assert.equal(outcomes, ['ok', 'ok', 'ok', 'ok', 'DomainError']);
    const stored = await store.readStream('counter-e');
    assert.equal(
      stored.map((e) => e.revision),
      [0, 1, 2, 3, 4, 5],
    );
    assert.is((await mine.state(counter, 'counter-e')).state.total, 10);
  });

  t('a writer that wins the stream on every attempt: the command gives up with the conflict, which answers a retryable 503', async () => {
    const theirs = createCommandHandler({ store });
    let attempts = 0;
    const mine = createCommandHandler({
      store,
      maxRetries: 3,
      // Before each of our appends the other process commits one of its own: ours always conflicts.
      append: async (r: AppendRequest) => {
        attempts++;
        await theirs.handle(counter, 'counter-contended', { type: 'Add', by: 100 }, md);
        return store.append(r);
      },
    });
    const err = await mine.handle(counter, 'counter-contended', { type: 'Add', by: 1 }, md).then(
      () => null,
      (e: unknown) => e,
    );
    assert.instance(err, WrongExpectedRevisionError);
    assert.is(attempts, 4, 'the first attempt and three retries');
    assert.equal(
      (await store.readStream('counter-contended')).map((e) => (e.data as { by: number }).by),
      [100, 100, 100, 100],
      'only the other writer committed',
    );
    const answer = toApiError(err);
    assert.is(answer.status, 503);
    assert.is(answer.code, 'ledger_contended');
    assert.is(answer.headers?.['retry-after'], '1');
  });

  t('decideEarly: answers at the decision, then at the commit; a refusal is final even when the batch is decided again', async () => {
    const handler = createCommandHandler({ store });
    const first = handler.decideEarly(counter, 'counter-f', { type: 'Add', by: 4, max: 10 }, md);
    // The decision arrives while the append is still in flight: nothing on the stream yet.
    const decided = await first.decided;
    assert.is(decided.state.total, 4);
    assert.equal(await store.readStream('counter-f'), []);
    assert.is((await first.committed).revision, 0);
    // Another process takes the room between this handler's cached state and its append.
    const other = createCommandHandler({ store });
    await other.handle(counter, 'counter-f', { type: 'Add', by: 5, max: 10 }, md);
    const overturned = handler.decideEarly(counter, 'counter-f', { type: 'Add', by: 6, max: 10 }, md);
    const refusedEarly = handler.decideEarly(counter, 'counter-f', { type: 'Add', by: 1, max: 4 }, md);
    // Both decided on the stale state (4): the first looked fine, the second was refused at once.
    assert.is((await overturned.decided).state.total, 10);
    assert.is(await outcome(refusedEarly.decided), 'DomainError');
    // The append met the other writer's event: decided again on 9, the first is refused after all,
    // and the early refusal stays a refusal although 9 + 1 would now fit under neither rule anyway.
    assert.is(await outcome(overturned.committed), 'DomainError');
    assert.is(await outcome(refusedEarly.committed), 'DomainError');
    const events = await store.readStream('counter-f');
    assert.equal(
      events.map((e) => (e.data as { by: number }).by),
      [4, 5],
    );
  });

  t(
    "decideEarly: a refusal on a cached state waits for its batch's append; when another writer moved the stream, it is decided again and may commit",
    async () => {
      // Appends wait at a gate the test opens, so another process can write in between.
      const { append, waiting, open } = gated(store);
      const handler = createCommandHandler({ store, append });
      const primed = handler.handle(counter, 'counter-g', { type: 'Add', by: 8 }, md);
      await open();
      await primed;
      const lead = handler.handle(counter, 'counter-g', { type: 'Add', by: 1 }, md);
      await waiting(); // its append is in flight: the next two queue behind it and are decided together
      const growing = handler.decideEarly(counter, 'counter-g', { type: 'Add', by: 1 }, md);
      const refused = handler.decideEarly(counter, 'counter-g', { type: 'Add', by: 5, max: 10 }, md);
      let refusalTold = false;
      void refused.decided.catch(() => (refusalTold = true));
      await open();
      await lead;
      // Decided together on 9 (this process's cache): +1 fits and is told at once; +5 would pass 10,
      // but a refusal from a cached state is not answered before the log confirms it.
      assert.is((await growing.decided).state.total, 10);
      await waiting();
      assert.is(refusalTold, false, 'the refusal waits for the append that confirms its state');
      // While their append waits, another process takes the total down to 1.
      await createCommandHandler({ store }).handle(counter, 'counter-g', { type: 'Add', by: -8 }, md);
      await open(); // refused: the stream moved
      await open(); // the same batch, decided again on the log's state (1): both fit now
      assert.is((await growing.committed).state.total, 2);
      assert.is((await refused.committed).state.total, 7);
      assert.equal(
        (await store.readStream('counter-g')).map((e) => (e.data as { by: number }).by),
        [8, 1, -8, 1, 5],
      );
    },
  );

  t('a refusal decided on a cached state that another process has moved is confirmed against the log and decided again: it commits', async () => {
    const mine = createCommandHandler({ store });
    const theirs = createCommandHandler({ store });
    await mine.handle(counter, 'counter-confirm', { type: 'Add', by: 10 }, md);
    // Another process (a payment on the other gateway) makes room; this handler's cache still says 10.
    await theirs.handle(counter, 'counter-confirm', { type: 'Add', by: -10 }, md);
    assert.is((await mine.state(counter, 'counter-confirm', { cached: true })).state.total, 10, 'the cache is stale');
    const r = await mine.handle(counter, 'counter-confirm', { type: 'Add', by: 5, max: 10 }, md);
    assert.is(r.state.total, 5, 'decided on the log, not on the cache');
    // And a refusal that the log confirms stays a refusal.
    await theirs.handle(counter, 'counter-confirm', { type: 'Add', by: 5 }, md);
    assert.is(await outcome(mine.handle(counter, 'counter-confirm', { type: 'Add', by: 1, max: 10 }, md)), 'DomainError');
    assert.equal(
      (await store.readStream('counter-confirm')).map((e) => (e.data as { by: number }).by),
      [10, -10, 5, 5],
    );
  });

  t('an early refusal (decideEarly) from a stale cache is not told: the command is decided on the log and commits', async () => {
    const mine = createCommandHandler({ store });
    await mine.handle(counter, 'counter-early', { type: 'Add', by: 10 }, md);
    await createCommandHandler({ store }).handle(counter, 'counter-early', { type: 'Add', by: -10 }, md);
    const { decided, committed } = mine.decideEarly(counter, 'counter-early', { type: 'Add', by: 3, max: 10 }, md);
    assert.is((await decided).state.total, 3);
    assert.is((await committed).state.total, 3);
  });

  t("state() answers what the log holds now; { cached: true } answers this process's copy", async () => {
    const mine = createCommandHandler({ store });
    await mine.handle(counter, 'counter-state', { type: 'Add', by: 2 }, md);
    await createCommandHandler({ store }).handle(counter, 'counter-state', { type: 'Add', by: 3 }, md);
    const cached = await mine.state(counter, 'counter-state', { cached: true });
    assert.is(cached.state.total, 2);
    assert.is(cached.confirmed, false);
    const current = await mine.state(counter, 'counter-state');
    assert.is(current.state.total, 5);
    assert.is(current.revision, 1);
    assert.is(current.confirmed, true);
  });

  t('a command whose caller has gone is withdrawn before it is sent: nothing of it is stored, the others in its batch commit', async () => {
    const { append, waiting, open } = gated(store);
    const handler = createCommandHandler({ store, append });
    // A stalled append holds the stream; two commands queue behind it.
    const stalled = handler.handle(counter, 'counter-gone', { type: 'Add', by: 1 }, md);
    await waiting();
    let answered = false;
    const abandoned = outcome(handler.handle(counter, 'counter-gone', { type: 'Add', by: 100 }, md, undefined, { gone: () => answered }));
    const kept = handler.handle(counter, 'counter-gone', { type: 'Add', by: 2 }, md, undefined, { gone: () => false });
    answered = true; // its caller got a 503 while the append stalled
    await open();
    await stalled;
    await open();
    assert.is(await abandoned, 'CommandWithdrawn');
    assert.is((await kept).state.total, 3);
    assert.is(handler.withdrawnCount(), 1);
    assert.equal(
      (await store.readStream('counter-gone')).map((e) => (e.data as { by: number }).by),
      [1, 2],
    );
  });

  t(
    "an append that reaches the database after its notAfter writes nothing (the database's clock decides); beside it in one transaction, another request commits",
    async () => {
      const past = Date.now() - 1;
      const event = (by: number) => ({ type: 'Added', data: { by, bad: false }, metadata: md });
      const [late, onTime] = await store.appendMany([
        { stream: 'counter-fence-a', expectedRevision: -1, events: [event(1)], notAfter: past },
        { stream: 'counter-fence-b', expectedRevision: -1, events: [event(2)] },
      ]);
      assert.instance(late, AppendDeadlinePassed);
      assert.not.instance(onTime, Error);
      const alone = await store.append({ stream: 'counter-fence-a', expectedRevision: -1, events: [event(3)], notAfter: past }).then(
        () => null,
        (e: unknown) => e,
      );
      assert.instance(alone, AppendDeadlinePassed);
      assert.equal(await store.readStream('counter-fence-a'), []);
      assert.equal(
        (await store.readStream('counter-fence-b')).map((e) => (e.data as { by: number }).by),
        [2],
      );
      await store.append({ stream: 'counter-fence-a', expectedRevision: -1, events: [event(4)], notAfter: Date.now() + 60_000 });
      assert.is((await store.readStream('counter-fence-a')).length, 1, 'a deadline still ahead commits');
    },
  );

  t('a command held up on its way past its notAfter (a stalled link) is withdrawn by the fence; the other command of its batch commits', async () => {
    const { append, waiting, open } = gated(store);
    const handler = createCommandHandler({ store, append });
    const stalled = handler.handle(counter, 'counter-fenced', { type: 'Add', by: 1 }, md);
    await waiting();
    const notAfter = Date.now() + 150;
    const charged = outcome(handler.handle(counter, 'counter-fenced', { type: 'Add', by: 100 }, md, undefined, { notAfter }));
    const kept = handler.handle(counter, 'counter-fenced', { type: 'Add', by: 2 }, md);
    await open();
    await stalled;
    // Their append is decided before the deadline and held at the gate (on the wire) until after it.
    await waiting();
    while (Date.now() <= notAfter + 20) await new Promise((r) => setTimeout(r, 10));
    await open();
    await open(); // decided again without the late command
    assert.is(await charged, 'CommandWithdrawn');
    assert.is((await kept).state.total, 3);
    assert.equal(
      (await store.readStream('counter-fenced')).map((e) => (e.data as { by: number }).by),
      [1, 2],
    );
  });

  t('an append that names a stream its decision read (unchanged) commits only if that stream has not moved since, checked in its transaction', async () => {
    const event = (by: number) => ({ type: 'Added', data: { by, bad: false }, metadata: md });
    await store.append({ stream: 'plan-read', expectedRevision: -1, events: [event(1000)] });
    const read = { stream: 'plan-read', revision: 0 };
    await store.append({ stream: 'plan-read', expectedRevision: 0, events: [event(5000)] }); // the plan moves on (another gateway)
    const [stale, other] = await store.appendMany([
      { stream: 'acct-read-a', expectedRevision: -1, events: [event(1000)], unchanged: [read] },
      { stream: 'acct-read-b', expectedRevision: -1, events: [event(7)] },
    ]);
    assert.instance(stale, StaleReadError);
    assert.is((stale as StaleReadError).actual, 1);
    assert.not.instance(other, Error);
    assert.equal(await store.readStream('acct-read-a'), []);
    await store.append({ stream: 'acct-read-a', expectedRevision: -1, events: [event(5000)], unchanged: [{ stream: 'plan-read', revision: 1 }] });
    assert.equal(
      (await store.readStream('acct-read-a')).map((e) => (e.data as { by: number }).by),
      [5000],
      'read at the current revision: it commits',
    );
    const absent = await store.append({ stream: 'acct-read-c', expectedRevision: -1, events: [event(1)], unchanged: [{ stream: 'plan-none', revision: -1 }] });
    assert.is(absent.revision, 0, 'a stream read as absent that is still absent passes');
  });

  t('a command whose read stream moved is refused with StaleReadError (its caller reads again); the other command of its batch commits', async () => {
    const { append, waiting, open } = gated(store);
    const handler = createCommandHandler({ store, append });
    const stalled = handler.handle(counter, 'counter-reads', { type: 'Add', by: 1 }, md);
    await waiting();
    await createCommandHandler({ store }).handle(counter, 'counter-plan', { type: 'Add', by: 1 }, md);
    const reading = outcome(
      handler.handle(counter, 'counter-reads', { type: 'Add', by: 10 }, md, undefined, { unchanged: [{ stream: 'counter-plan', revision: -1 }] }),
    );
    const kept = handler.handle(counter, 'counter-reads', { type: 'Add', by: 2 }, md);
    await open();
    await stalled;
    await open(); // the batch: refused, the plan moved
    await open(); // decided again without the stale command
    assert.is(await reading, 'StaleReadError');
    assert.is((await kept).state.total, 3);
    assert.equal(
      (await store.readStream('counter-reads')).map((e) => (e.data as { by: number }).by),
      [1, 2],
    );
  });

  t('a command whose caller goes while its batch waits to be sent (a linger) is withdrawn, and the batch is decided again without it', async () => {
    const handler = createCommandHandler({ store, lingerMs: 50 });
    let answered = false;
    const { committed } = handler.decideEarly(holder, 'acct-gone-linger', { type: 'Hold', id: 'h1', amount: 10, max: 100 }, md, {
      linger: true,
      gone: () => answered,
    });
    answered = true;
    assert.is(await outcome(committed), 'CommandWithdrawn');
    assert.equal(await store.readStream('acct-gone-linger'), []);
  });

  t('linger: a hold waits for the charge that follows it at once, and both go out in one durable append', async () => {
    const c = counting(store);
    const handler = createCommandHandler({ store, append: c.append, lingerMs: 60_000 });
    const { decided, committed } = handler.decideEarly(holder, 'acct-linger-a', { type: 'Hold', id: 'h1', amount: 10, max: 100 }, md, { linger: true });
    await decided;
    assert.is(c.appends.length, 0, 'the hold lingers');
    const started = Date.now();
    const charged = await handler.handle(holder, 'acct-linger-a', { type: 'Charge', id: 'h1', amount: 7 }, md);
    // Far below the 60 s linger, far above an append's time: not a measure of speed.
    assert.ok(Date.now() - started < 10_000, 'the charge ended the wait');
    await committed;
    assert.is(c.appends.length, 1);
    assert.equal(
      c.appends[0].events.map((e) => e.type),
      ['QuotaReserved', 'Charged'],
    );
    assert.is(c.appends[0].durable, true, 'a charge in the append makes it wait for the disk');
    assert.is(charged.state.charged, 7);
    assert.equal(
      (await store.readStream('acct-linger-a')).map((e) => e.type),
      ['QuotaReserved', 'Charged'],
    );
  });

  t('linger: a hold nothing follows goes out alone after the wait; without linger at once', async () => {
    const c = counting(store);
    const handler = createCommandHandler({ store, append: c.append, lingerMs: 40 });
    const started = Date.now();
    await handler.decideEarly(holder, 'acct-linger-b', { type: 'Hold', id: 'h1', amount: 10, max: 100 }, md, { linger: true }).committed;
    assert.ok(Date.now() - started >= 35, 'it waited');
    assert.is(c.appends.length, 1);
    assert.is(c.appends[0].durable, false, 'a hold alone does not wait for the disk');
    await handler.decideEarly(holder, 'acct-linger-b', { type: 'Hold', id: 'h2', amount: 10, max: 100 }, md).committed;
    await handler.handle(holder, 'acct-linger-b', { type: 'Charge', id: 'h2', amount: 5 }, md);
    assert.is(c.appends.length, 3, 'no linger asked: the hold went out before its charge');
  });

  t('linger: another process writing the stream meanwhile overturns the lingering hold; its charge finds no hold; nothing of theirs is stored', async () => {
    const handler = createCommandHandler({ store, append: counting(store).append, lingerMs: 100 });
    const other = createCommandHandler({ store, append: counting(store).append });
    const { decided, committed } = handler.decideEarly(holder, 'acct-linger-c', { type: 'Hold', id: 'mine', amount: 60, max: 100 }, md, { linger: true });
    await decided;
    // While it lingers, another process takes most of the room.
    await other.handle(holder, 'acct-linger-c', { type: 'Hold', id: 'theirs', amount: 50, max: 100 }, md);
    const charge = outcome(handler.handle(holder, 'acct-linger-c', { type: 'Charge', id: 'mine', amount: 60 }, md));
    assert.is(await outcome(committed), 'DomainError', 'the hold, decided again on the fresh state, is refused');
    assert.is(await charge, 'DomainError');
    assert.equal(
      (await store.readStream('acct-linger-c')).map((e) => (e.data as { id: string }).id),
      ['theirs'],
    );
  });

  t.run();
}
