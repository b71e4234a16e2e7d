// Verify's comparison of the live read models with a rebuild (projections/compare.ts): ranges of
// keys whose digests match are passed over, and every row edited, lost or added on the live side
// is listed with both sides, on PGlite and (with DATABASE_URL) PostgreSQL.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { testDatabases, type TestDatabase } from './support/db.ts';
import { openLedger, type Ledger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/read-side.ts';
import { dropReadModels, replayInto } from '../projections/rebuild.ts';
import { differingRows } from '../projections/compare.ts';

/** Small ranges, so that the eleven seeded models span several digests and row-by-row statements. */
const SMALL = { digested: 4, compared: 2 };

for (const target of testDatabases()) {
  const s = suite<{ t: TestDatabase; ledger: Ledger }>(`read-model comparison on ${target.label}`, {} as never);
  s.before(async (ctx) => {
    ctx.t = await target.open();
    ctx.ledger = await openLedger({ db: ctx.t.db, schema: ctx.t.schema, readSide: readSide({ db: ctx.t.db, eventSchema: ctx.t.schema, projectHere: true }) });
    await ctx.ledger.seedModels();
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

  s.run();
}
