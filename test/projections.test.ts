// Read models fed by the runner: exact rows after a scenario, and a rebuild from zero that
// yields identical rows, on PGlite and (with DATABASE_URL) PostgreSQL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomUUID } from 'node:crypto';
import { testDatabases, type TestDatabase } from './support/db.ts';
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { openLedger, metadataFor, type Ledger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import { dropReadModels, dumpReadModels, rebuildReadModels, replayInto } from '../projections/runner/rebuild.ts';
import * as checkpoint from '../projections/runner/checkpoint.ts';
import { ensureChargeStatistics } from '../projections/calls/charges.ts';
import { ALL_PROJECTIONS } from '../projections/read-models.ts';
import { hashKey } from '../src/keys/secrets.ts';
import { issueKey, revokeKey } from '../src/keys/index.ts';
import { accountCommand, definePlan, grantExtra, openAccount, subscribe } from '../src/accounts/index.ts';
import { seedModels } from '../src/catalogue/index.ts';

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase; ledger: Ledger }>(`projections on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
    ctx.ledger = await openLedger({ db: ctx.t.db, schema: ctx.t.schema, readSide: readSide({ db: ctx.t.db, eventSchema: ctx.t.schema, projectHere: true }) });
  });
  s.after(async (ctx) => {
    await ctx.ledger.close();
    await ctx.t.cleanup();
  });

  s('a metered scenario lands in every read model to the token', async ({ ledger, t }) => {
    await seedModels(ledger);
    await definePlan(ledger, { planId: 'pro', name: 'Pro', quota: 10_000, validityDays: 30, requestsPerMinute: 60, models: ['*'] }, 'admin:test');
    const acct = await openAccount(ledger, { accountId: 'acme', name: 'Acme' }, 'admin:test');
    await subscribe(ledger, acct, 'pro', 'admin:test');
    await grantExtra(ledger, acct, 500, 'welcome', 'admin:test');
    const key = await issueKey(ledger, acct, 'ci', 'admin:test');
    const md = metadataFor(`key:${key.keyId}`);
    const reserve = (holdId: string, amount: number) =>
      accountCommand(
        ledger,
        acct,
        {
          type: 'Reserve',
          holdId,
          requestId: `req-${holdId}`,
          keyId: key.keyId,
          model: 'cx/gen-6-terra',
          kind: 'chat',
          amount,
          now: new Date(),
          ttlMs: 60_000,
        },
        md,
      );
    await reserve('h1', 1000);
    await accountCommand(
      ledger,
      acct,
      {
        type: 'SettleChat',
        holdId: 'h1',
        multiplierMilli: 1250,
        promptTokens: 40,
        completionTokens: 13,
        reasoningEffort: 'max',
        api: 'chat.completions',
        streamed: true,
        aborted: false,
      },
      md,
    );
    await reserve('h2', 2000);
    await accountCommand(ledger, acct, { type: 'Release', holdId: 'h2', reason: 'upstream_error' }, md);
    await reserve('h3', 3000);
    await ledger.caughtUp();
    const rm = ledger.rmSchema;
    const [a] = await t.db.query<Record<string, number>>(
      `SELECT quota_total, quota_used, reserved, open_holds, extra_granted, extra_used FROM "${rm}".accounts WHERE account_id = 'acme'`,
    );
    assert.equal({ ...a }, { quota_total: 10_000, quota_used: 67, reserved: 3000, open_holds: 1, extra_granted: 500, extra_used: 0 });
    const usage = await t.db.query<Record<string, unknown>>(`SELECT model, requests, prompt_tokens, completion_tokens, billed FROM "${rm}".usage_daily`);
    assert.equal(
      usage.map((r) => ({ ...r })),
      [{ model: 'cx/gen-6-terra', requests: 1, prompt_tokens: 40, completion_tokens: 13, billed: 67 }],
    );
    const [k] = await t.db.query<Record<string, unknown>>(`SELECT status, hash, last4, last_used_at FROM "${rm}".keys WHERE key_id = $1`, [key.keyId]);
    assert.is(k.status, 'active');
    assert.is(k.hash, hashKey(key.secret));
    assert.ok(k.last_used_at, 'last use recorded');
    const holds = await t.db.query<{ hold_id: string }>(`SELECT hold_id FROM "${rm}".holds`);
    assert.equal(
      holds.map((h) => h.hold_id),
      ['h3'],
    );
    const models = await t.db.query<{ model_id: string; multiplier_milli: number }>(`SELECT model_id, multiplier_milli FROM "${rm}".models ORDER BY model_id`);
    assert.is(models.length, 11);
    assert.equal(models.find((m) => m.model_id === 'cx/gen-6-terra')?.multiplier_milli, 1250);
    const charges = await t.db.query<{ billed: number; request_id: string }>(`SELECT billed, request_id FROM "${rm}".charges`);
    assert.equal(
      charges.map((c) => ({ ...c })),
      [{ billed: 67, request_id: 'req-h1' }],
    );
    await revokeKey(ledger, key.keyId, 'leaked', 'admin:test');
    await ledger.caughtUp();
    const [k2] = await t.db.query<{ status: string; revoke_reason: string }>(`SELECT status, revoke_reason FROM "${rm}".keys WHERE key_id = $1`, [key.keyId]);
    assert.equal({ ...k2 }, { status: 'revoked', revoke_reason: 'leaked' });
  });

  s('a rebuild from position zero yields identical rows', async ({ ledger, t }) => {
    // More traffic over several accounts so batches span many rows.
    for (let i = 0; i < 20; i++) {
      const id = await openAccount(ledger, { accountId: `bulk${i}`, name: `Bulk ${i}` }, 'admin:test');
      await subscribe(ledger, id, 'pro', 'admin:test');
      const md = metadataFor('key:bulk');
      for (let j = 0; j < 5; j++) {
        const holdId = randomUUID();
        await accountCommand(
          ledger,
          id,
          {
            type: 'Reserve',
            holdId,
            requestId: holdId,
            keyId: 'bulk',
            model: j % 2 ? 'alpha-opus-5' : 'cx/gen-6-luna',
            kind: j === 4 ? 'image' : 'chat',
            amount: j === 4 ? 5_000 : 500,
            now: new Date(),
            ttlMs: 60_000,
          },
          md,
        );
        if (j === 4) await accountCommand(ledger, id, { type: 'Release', holdId, reason: 'client_aborted' }, md);
        else
          await accountCommand(
            ledger,
            id,
            {
              type: 'SettleChat',
              holdId,
              multiplierMilli: j % 2 ? 1750 : 1000,
              promptTokens: 10 + j,
              completionTokens: 7 * j,
              reasoningEffort: null,
              api: 'chat.completions',
              streamed: false,
              aborted: false,
            },
            md,
          );
      }
    }
    await ledger.caughtUp();
    const before = await dumpReadModels(t.db, ledger.rmSchema);
    const result = await rebuildReadModels(t.db, ledger.events, ledger.rmSchema);
    const after = await dumpReadModels(t.db, ledger.rmSchema);
    assert.ok(result.events > 200);
    assert.equal(after, before);
    // The live runner keeps working on the swapped tables.
    await grantExtra(ledger, 'bulk0', 7, 'after rebuild', 'admin:test');
    await ledger.caughtUp();
    await new Promise((r) => setTimeout(r, 50));
    const [row] = await t.db.query<{ extra_granted: number }>(`SELECT extra_granted FROM "${ledger.rmSchema}".accounts WHERE account_id = 'bulk0'`);
    assert.is(row.extra_granted, 7);
  });

  s(
    "read models found behind the runner (a failover lost their last commits) get every event after their checkpoint again, not just the next page's",
    async ({ ledger, t }) => {
      await grantExtra(ledger, 'bulk1', 3, 'kept', 'admin:test');
      await ledger.caughtUp();
      const kept = await checkpoint.read(t.db, ledger.rmSchema);
      await grantExtra(ledger, 'bulk1', 4, 'lost with the commit', 'admin:test');
      await grantExtra(ledger, 'bulk2', 5, 'lost with the commit', 'admin:test');
      await ledger.caughtUp();
      assert.ok((await checkpoint.read(t.db, ledger.rmSchema)) > kept);

      // The database comes back with the read models as they were at `kept` (a standby promoted
      // before the runner's last commits reached it), while the runner remembers having applied more.
      const upToKept: typeof ledger.events = {
        ...ledger.events,
        workerSource: undefined,
        readAll: async (after, limit) => (await ledger.events.readAll(after, limit)).filter((e) => e.position <= kept),
        readAllProjected: undefined,
        headPosition: async () => kept,
      };
      const older = `${ledger.rmSchema}_older`;
      assert.is(await replayInto(t.db, upToKept, older, { threads: 1 }), kept);
      await t.db.transaction(async (tx) => {
        await tx.query(`DROP SCHEMA "${ledger.rmSchema}" CASCADE`);
        await tx.query(`ALTER SCHEMA "${older}" RENAME TO "${ledger.rmSchema}"`);
      });

      await grantExtra(ledger, 'bulk3', 6, 'after the failover', 'admin:test');
      await ledger.caughtUp();
      const extra = async (id: string) =>
        Number(
          (await t.db.query<{ extra_granted: number }>(`SELECT extra_granted FROM "${ledger.rmSchema}".accounts WHERE account_id = $1`, [id]))[0].extra_granted,
        );
      assert.is(await extra('bulk1'), 3 + 4, 'the grant whose commit was lost is applied again');
      assert.is(await extra('bulk2'), 5, 'the grant whose commit was lost is applied again');
      assert.is(await extra('bulk3'), 6);
      // Every table as a replay of the whole log has it.
      const rebuilt = `${ledger.rmSchema}_check`;
      await replayInto(t.db, ledger.events, rebuilt, { threads: 1 });
      try {
        assert.equal(await dumpReadModels(t.db, ledger.rmSchema), await dumpReadModels(t.db, rebuilt));
      } finally {
        await dropReadModels(t.db, rebuilt);
      }
    },
  );

  s('a replay in small pages with rows held back across pages yields the same rows', async ({ ledger, t }) => {
    // Pages of a few events make rows stay staged over many pages, holds open in one page and
    // close in another, and a tiny bound forces everything staged out now and then.
    const live = await dumpReadModels(t.db, ledger.rmSchema);
    const cases = [
      { batchSize: 7, memory: {} },
      { batchSize: 13, memory: { maxStaged: 5 } },
      { batchSize: 50, memory: { maxKeys: 3 } },
    ];
    for (const [i, c] of cases.entries()) {
      const target = `${t.schema}_replay${i}`;
      try {
        const position = await replayInto(t.db, ledger.events, target, c);
        assert.is(position, await ledger.events.headPosition());
        assert.equal(await dumpReadModels(t.db, target), live, `pages of ${c.batchSize}, ${JSON.stringify(c.memory)}`);
      } finally {
        await t.db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
      }
    }
  });

  s("a replay leaves every read-model table with planner statistics; a correction gathers the live charge log's if it has none", async ({ ledger, t }) => {
    const reltuples = async (schema: string) =>
      t.db.query<{ relname: string; reltuples: number }>(
        `SELECT c.relname, c.reltuples::float8 AS reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
        [schema],
      );
    const target = `${t.schema}_stats`;
    try {
      await replayInto(t.db, ledger.events, target);
      const tables = await reltuples(target);
      assert.ok(tables.length >= ALL_PROJECTIONS.length);
      // -1: never analysed (the planner then guesses, and guessed a scan of the whole charge log).
      const unanalysed = tables.filter((r) => ALL_PROJECTIONS.some((p) => p.table === r.relname) && Number(r.reltuples) < 0);
      assert.equal(unanalysed, []);
    } finally {
      await t.db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
    }
    // The live log of a test database was never analysed (autovacuum has not come by, or is off).
    const before = (await reltuples(ledger.rmSchema)).find((r) => r.relname === 'charges')!;
    await ensureChargeStatistics(t.db, ledger.rmSchema);
    const after = (await reltuples(ledger.rmSchema)).find((r) => r.relname === 'charges')!;
    assert.ok(Number(after.reltuples) >= 0, `charges analysed (was ${before.reltuples})`);
  });

  s('a replay on worker threads yields the rows of one on this thread; what follows its settled position is applied after', async ({ ledger, t }) => {
    await ledger.caughtUp();
    const live = await dumpReadModels(t.db, ledger.rmSchema);
    const head = await ledger.events.headPosition();
    const [{ mid }] = await t.db.query<{ mid: number }>(
      `SELECT position AS mid FROM "${t.schema}".events ORDER BY position OFFSET (SELECT count(*) / 2 FROM "${t.schema}".events) LIMIT 1`,
    );
    // The threads stop at the settled position the store gives: here the middle of the log, so
    // the second half goes through the catch-up after the tables are finished.
    const halfSettled = { ...ledger.events, readableHead: async () => Number(mid) };
    const cases = [
      { label: 'two threads, pages of 40', store: ledger.events, opts: { threads: 2, batchSize: 40 } },
      { label: 'two threads, half the log settled', store: halfSettled, opts: { threads: 2, batchSize: 40 } },
      { label: 'one thread', store: ledger.events, opts: { threads: 1 } },
    ];
    for (const [i, c] of cases.entries()) {
      const target = `${t.schema}_threads${i}`;
      const pages: number[] = [];
      try {
        const position = await replayInto(t.db, c.store, target, { ...c.opts, onProgress: (p) => pages.push(p.events) });
        assert.is(position, head, c.label);
        assert.equal(await dumpReadModels(t.db, target), live, c.label);
        // Progress counts every event once, ending at all of them.
        const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${t.schema}".events`);
        assert.is(pages.at(-1), n, c.label);
      } finally {
        await t.db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
      }
    }
  });

  if (target.label !== 'pglite')
    s('a replay whose worker thread fails rejects, and the next one succeeds', async ({ ledger, t }) => {
      const source = ledger.events.workerSource;
      assert.ok(source, 'a PostgreSQL store can be read from another thread');
      // A worker that cannot reach the log (nothing listens on port 1) fails on its first read.
      const unreachable = { ...ledger.events, workerSource: { ...source, url: 'postgres://postgres@127.0.0.1:1/test' } };
      const target = `${t.schema}_failing`;
      try {
        let failure: unknown = null;
        await replayInto(t.db, unreachable, target, { threads: 2 }).catch((e) => (failure = e));
        assert.instance(failure, Error);
        assert.match((failure as Error).message, /ECONNREFUSED|connect/);
        await replayInto(t.db, ledger.events, target, { threads: 2 });
        assert.equal(await dumpReadModels(t.db, target), await dumpReadModels(t.db, ledger.rmSchema));
      } finally {
        await t.db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
      }
    });

  if (target.label !== 'pglite')
    s("a replay finishes its target beyond the serving pool's statement bound", async ({ ledger, t }) => {
      // Making a target durable and indexing it over millions of rows outlasts a serving pool's
      // bound (a rebuild at 3M events failed on it). A lock held on the target for longer than
      // the bound stands in for that length here.
      const bounded = openPostgres(t.db.url!, 4, { ...DEFAULT_PG_TIMEOUTS, statementMs: 500 });
      const holder = openPostgres(t.db.url!, 1);
      const target = `${t.schema}_finishing`;
      let holding: Promise<unknown> | null = null;
      try {
        const tooLong = await bounded.query('SELECT pg_sleep(1)').then(
          () => null,
          (e: { code?: string }) => e.code,
        );
        assert.is(tooLong, '57014', 'the bound cancels a longer statement on the serving pool');
        // The first page is read once the target's tables exist: the lock is taken then, and
        // making the checkpoint table durable (ACCESS EXCLUSIVE) waits 1.5 s for it.
        const locked = async () => {
          let taken: () => void = () => undefined;
          const once = new Promise<void>((r) => (taken = r));
          holding = holder.transaction(async (tx) => {
            await tx.query(`LOCK TABLE "${target}".checkpoint IN ACCESS SHARE MODE`);
            taken();
            await new Promise((r) => setTimeout(r, 1_500));
          });
          await once;
        };
        let lock: Promise<void> | null = null;
        const store: typeof ledger.events = {
          ...ledger.events,
          workerSource: undefined,
          readAllProjected: undefined,
          readAll: async (after, limit) => {
            await (lock ??= locked());
            return ledger.events.readAll(after, limit);
          },
        };
        const started = Date.now();
        assert.is(await replayInto(bounded, store, target, { threads: 1 }), await ledger.events.headPosition());
        assert.ok(Date.now() - started >= 1_400, 'the finishing statement waited out the lock');
        assert.equal(await dumpReadModels(t.db, target), await dumpReadModels(t.db, ledger.rmSchema));
      } finally {
        await holding;
        await holder.close();
        await bounded.close();
        await t.db.exec(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
      }
    });

  s('a rebuild that rests between its pages reaches a log that keeps growing', async ({ ledger, t }) => {
    // Live calls append while a rebuild kept to a small share rests after each step. It rested after
    // its last short page too, so each read found the events appended meanwhile and the catch-up
    // chased them as long as they came (563 s at share 0.25 where ~130 s was due, at 100,000 charges).
    const id = await openAccount(ledger, { accountId: 'chased', name: 'Chased' }, 'admin:test');
    await subscribe(ledger, id, 'pro', 'admin:test');
    const APPENDING_MS = 20_000;
    let appending = true;
    let granted = 0;
    const appender = (async () => {
      const until = Date.now() + APPENDING_MS;
      while (appending && Date.now() < until) {
        await grantExtra(ledger, id, 1, 'live traffic', 'admin:test');
        granted++;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const started = Date.now();
    try {
      await rebuildReadModels(t.db, ledger.events, ledger.rmSchema, {
        // A pacer's rest of 100 ms after each page but the one at the head (src/audit/pacing.ts).
        serving: { share: 0.25, pace: (o) => (o?.atHead ? Promise.resolve() : new Promise((r) => setTimeout(r, 100))) },
      });
    } finally {
      appending = false;
      await appender;
    }
    const tookMs = Date.now() - started;
    assert.ok(granted >= 2, `live traffic ran beside the rebuild (${granted} grants)`);
    assert.ok(tookMs < APPENDING_MS * 0.75, `the rebuild ended while the log still grew (${tookMs} ms)`);
    await ledger.caughtUp();
    const [row] = await t.db.query<{ extra_granted: number }>(`SELECT extra_granted FROM "${ledger.rmSchema}".accounts WHERE account_id = 'chased'`);
    assert.is(Number(row.extra_granted), granted);
    const fresh = `${t.schema}_fresh`;
    try {
      await replayInto(t.db, ledger.events, fresh);
      assert.equal(await dumpReadModels(t.db, ledger.rmSchema), await dumpReadModels(t.db, fresh));
    } finally {
      await dropReadModels(t.db, fresh);
    }
  });

  if (target.label !== 'pglite')
    s('a rebuild swaps in its tables once a reader holding the live ones lets go', async ({ ledger, t }) => {
      // Dropping the live tables waits for their readers, and readers after it queue behind the
      // drop; a reader held past the serving pool's statement bound failed the rebuild. The swap
      // now gives up its wait and tries again after a pause.
      const bounded = openPostgres(t.db.url!, 4, { ...DEFAULT_PG_TIMEOUTS, statementMs: 500 });
      const holder = openPostgres(t.db.url!, 1);
      let holding: Promise<unknown> | null = null;
      let heldFrom = 0;
      const readerOfTheLiveTables = async () => {
        let taken: () => void = () => undefined;
        const once = new Promise<void>((r) => (taken = r));
        holding = holder.transaction(async (tx) => {
          await tx.query(`SELECT count(*) FROM "${ledger.rmSchema}".accounts`);
          heldFrom = Date.now();
          taken();
          await new Promise((r) => setTimeout(r, 2_000));
        });
        await once;
      };
      // The reader starts when the rebuild has caught up with the log: right before its swap.
      const store: typeof ledger.events = {
        ...ledger.events,
        workerSource: undefined,
        readAllProjected: undefined,
        readAll: async (after, limit) => {
          const page = await ledger.events.readAll(after, limit);
          if (page.length === 0 && holding === null) await readerOfTheLiveTables();
          return page;
        },
      };
      try {
        const expected = await dumpReadModels(t.db, ledger.rmSchema);
        const result = await rebuildReadModels(bounded, store, ledger.rmSchema);
        assert.ok(heldFrom > 0, 'the reader held the live tables during the swap');
        assert.ok(Date.now() - heldFrom >= 1_900, 'the swap waited for the reader');
        assert.is(result.position, await ledger.events.headPosition());
        assert.equal(await dumpReadModels(t.db, ledger.rmSchema), expected);
      } finally {
        await holding;
        await holder.close();
        await bounded.close();
      }
    });

  s.run();
}
