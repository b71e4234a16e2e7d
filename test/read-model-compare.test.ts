// Verify's comparison of the live read models with a rebuild (projections/runner/compare.ts): ranges of
// keys whose digests match are passed over, and every row edited, lost or added on the live side
// is listed with both sides, on PGlite and (with DATABASE_URL) PostgreSQL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { testDatabases, type TestDatabase } from './support/db.ts';
import { openLedger, type Ledger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import { dropReadModels, replayInto } from '../projections/runner/rebuild.ts';
import { differingRows } from '../projections/runner/compare.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them
import { seedModels } from '../src/catalogue/index.ts';

/** Small ranges, so that the eleven seeded models span several digests and row-by-row statements. */
const SMALL = { digested: 4, compared: 2 };

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase; ledger: Ledger }>(`read-model comparison on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
    ctx.ledger = await openLedger({ db: ctx.t.db, schema: ctx.t.schema, readSide: readSide({ db: ctx.t.db, eventSchema: ctx.t.schema, projectHere: true }) });
    await seedModels(ctx.ledger);
    await ctx.ledger.caughtUp();
  });
  s.after(async (ctx) => {
    await ctx.ledger.close();
    await ctx.t.cleanup();
  });

  s('a rebuild matches; an edited, a lost and an added live row are each listed', async ({ ledger, t }) => {
    const db = t.db;
    const live = ledger.rmSchema;
    const scratch = `${live}_cmp`;
    await replayInto(db, ledger.events, scratch, { scratch: true });
    try {
      const models = await db.query<{ key: string }>(`SELECT key FROM "${live}".models ORDER BY key`);
      assert.ok(models.length >= 9, `${models.length} models seeded`);
      assert.equal(await differingRows(db, live, scratch, 100, SMALL), [], 'an honest rebuild');
      assert.equal(await differingRows(db, live, scratch, 100), [], 'in one range');

      const [edited, lost] = [models[1].key, models[6].key];
      await db.query(`UPDATE "${live}".models SET multiplier_milli = multiplier_milli + 1 WHERE key = $1`, [edited]);
      await db.query(`DELETE FROM "${live}".models WHERE key = $1`, [lost]);
      await db.query(
        `INSERT INTO "${live}".models SELECT 'zz-added', model_id, alias, multiplier_milli, status, updated_at FROM "${live}".models WHERE key = $1`,
        [models[0].key],
      );
      for (const sizes of [SMALL, undefined]) {
        const found = await differingRows(db, live, scratch, 100, sizes);
        assert.equal(
          found.map((d) => [d.table, d.key, d.live === null, d.rebuilt === null]),
          [
            ['models', edited, false, false],
            ['models', lost, true, false],
            ['models', 'zz-added', false, true],
          ].sort((a, b) => (a[1] < b[1] ? -1 : 1)),
        );
        const e = found.find((d) => d.key === edited)!;
        assert.is((e.live as { multiplier_milli: number }).multiplier_milli, (e.rebuilt as { multiplier_milli: number }).multiplier_milli + 1);
      }
      assert.is((await differingRows(db, live, scratch, 1, SMALL)).length, 1, 'at most the limit per table');
    } finally {
      await dropReadModels(db, scratch);
    }
  });

  s('rows that events after the settled position wrote to an event-keyed log are left out; rows before it are still compared', async ({ ledger, t }) => {
    const db = t.db;
    const live = ledger.rmSchema;
    const scratch = `${live}_settled`;
    const settled = await replayInto(db, ledger.events, scratch, { scratch: true });
    const charge = (key: string, position: number) =>
      db.query(
        `INSERT INTO "${live}".charges (key, event_id, position, account_id, key_id, request_id, model, kind, at, day, prompt_tokens, completion_tokens,
          images, tokens_per_image, multiplier_milli, billed, from_quota, from_extra, correction_id, charge_event_id)
        VALUES ($1, $1, $2, 'acct', NULL, 'req', 'cx/gen-6-terra', 'chat', now(), '2026-11-26', 10, 5, 0, 0, 1000, 15, 15, 0, NULL, NULL)`,
        [key, position],
      );
    // The charges only (the test above left its edits to the models in place).
    const chargesDiffering = async (settledAt?: number) =>
      (await differingRows(db, live, scratch, 100, SMALL, settledAt)).filter((d) => d.table === 'charges').map((d) => [d.key, d.rebuilt]);
    try {
      assert.equal(await chargesDiffering(settled), [], 'an honest rebuild');
      // A live call charged after the rebuild's position: not a difference (the events tell it).
      await charge('later-charge', settled + 1);
      assert.equal(await chargesDiffering(settled), [], 'a later charge is left out');
      assert.equal(await chargesDiffering(), [['later-charge', null]], 'without the settled position it is listed');
      // A row at or before the position that the rebuild lacks is drift, and is listed.
      await charge('forged-charge', settled);
      assert.equal(await chargesDiffering(settled), [['forged-charge', null]]);
    } finally {
      await db.query(`DELETE FROM "${live}".charges WHERE key IN ('later-charge', 'forged-charge')`);
      await dropReadModels(db, scratch);
    }
  });

  s.run();
}
