// The shared (PostgreSQL) call-rate limiter: concurrent calls are decided in batches, and a batch
// must decide exactly as the same calls one after another would (GCRA, gcra() in rate-limit.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresRateLimiter } from '../src/http/rate-limit-postgres.ts';
import { gcra, type RateDecision } from '../src/http/rate-limit.ts';
import { testDatabases, type TestDatabase } from './support/db.ts';

for (const engine of testDatabases()) {
  const t = suite(`rate limiter on ${engine.label}`);
  let tdb: TestDatabase;
  t.before(async () => {
    tdb = await engine.open();
    await tdb.db.exec(`CREATE SCHEMA IF NOT EXISTS "${tdb.schema}"`);
  });
  t.after(() => tdb.cleanup());

  t('sequential calls: the plan rate as a burst, then refusals with a retry time', async () => {
    const limiter = await createPostgresRateLimiter(tdb.db, tdb.schema);
    const out: RateDecision[] = [];
    for (let i = 0; i < 7; i++) out.push(await limiter.take('acct_seq', 5));
    assert.equal(out.map((d) => d.allowed), [true, true, true, true, true, false, false]);
    assert.equal(out.slice(0, 5).map((d) => d.remaining), [4, 3, 2, 1, 0]);
    for (const d of out.slice(5)) {
      assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 12_000, `retry after ${d.retryAfterMs}`);
      assert.ok(d.resetMs > 0 && d.resetMs <= 60_000);
    }
  });

  t('concurrent calls on several accounts: batched, and the same decisions as one at a time', async () => {
    const limiter = await createPostgresRateLimiter(tdb.db, tdb.schema);
    const accounts = ['acct_a', 'acct_b', 'acct_c'];
    const limits: Record<string, number> = { acct_a: 3, acct_b: 10, acct_c: 1 };
    // 40 calls issued together: the first goes alone, the rest wait and share statements.
    const calls = Array.from({ length: 40 }, (_, i) => accounts[i % 3]);
    const decisions = await Promise.all(calls.map((a) => limiter.take(a, limits[a])));
    for (const a of accounts) {
      const mine = decisions.filter((_, i) => calls[i] === a);
      const allowed = mine.filter((d) => d.allowed).length;
      assert.is(allowed, limits[a], `${a}: ${allowed} allowed`);
      // Arrival order is kept: every allowed call came before every refused one.
      assert.ok(mine.findIndex((d) => !d.allowed) === -1 || mine.slice(mine.findIndex((d) => !d.allowed)).every((d) => !d.allowed), a);
      // Remaining counts down exactly as gcra() does for calls at one instant.
      let tat: number | undefined;
      const expected = mine.filter((d) => d.allowed).map(() => { const s = gcra(tat, limits[a], 1_000_000); tat = s.tat; return s.decision.remaining; });
      assert.equal(mine.filter((d) => d.allowed).map((d) => d.remaining), expected, a);
    }
    // The next call on a full account is refused; a fresh account is not.
    assert.is((await limiter.take('acct_a', 3)).allowed, false);
    assert.is((await limiter.take('acct_fresh', 3)).allowed, true);
  });

  t('two limiters over one table share one budget', async () => {
    const one = await createPostgresRateLimiter(tdb.db, tdb.schema);
    const two = await createPostgresRateLimiter(tdb.db, tdb.schema);
    const decisions = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? one : two).take('acct_shared', 4)));
    assert.is(decisions.filter((d) => d.allowed).length, 4);
  });

  t.run();
}
