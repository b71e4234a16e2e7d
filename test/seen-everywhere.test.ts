// A change the gateways keep in memory is answered once every other live gateway has read it
// (src/eventstore/seen-everywhere.ts): the wait ends when each live lease's process has announced
// a position at or past the change, names the ones that had not when its bound passes, and leaves
// out processes whose lease has lapsed. PostgreSQL only: embedded PGlite has one process.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { openPostgres, type Database } from '../src/eventstore/db.ts';
import { createSeenEverywhere, type SeenEverywhere } from '../src/eventstore/seen-everywhere.ts';
import { startProcessLease, type ProcessLease } from '../src/eventstore/process-lease.ts';
import { uniqueSchema } from './support/db.ts';
import { dropSchemas } from './support/gateway.ts';

const url = process.env.DATABASE_URL;
const schema = uniqueSchema('seen');
const log = { warn: () => undefined, info: () => undefined };

if (!url) {
  test.skip('seen everywhere (PostgreSQL only: set DATABASE_URL)', () => undefined);
} else {
  const dbs: Database[] = [];
  const leases: ProcessLease[] = [];
  const gateways: SeenEverywhere[] = [];
  async function gateway(id: string, ttlMs = 60_000): Promise<SeenEverywhere> {
    const db = openPostgres(url!, 2);
    dbs.push(db);
    leases.push(await startProcessLease(db, schema, id, { ttlMs, log }));
    const g = await createSeenEverywhere(db, schema, id);
    gateways.push(g);
    return g;
  }

  test.after(async () => {
    for (const g of gateways) await g.close();
    for (const l of leases) await l.end().catch(() => undefined);
    for (const db of dbs) await db.close();
    await dropSchemas(url, schema);
  });

  test('the wait ends once every other live gateway has announced the position; one that never does is named when the bound passes', async () => {
    const a = await gateway('gw-a');
    const b = await gateway('gw-b');
    const c = await gateway('gw-c');
    const waiting = a.wait(100, 5000);
    let settled = false;
    void waiting.then(() => (settled = true));
    b.announce(100);
    await new Promise((r) => setTimeout(r, 300));
    assert.is(settled, false, 'gw-c has not read the change yet');
    c.announce(150);
    assert.equal(await waiting, [], 'everyone has read it');
    // An earlier announcement counts for a later wait at or below it.
    assert.equal(await a.wait(90, 5000), []);
    const started = Date.now();
    b.announce(200);
    assert.equal(await a.wait(200, 400), ['gw-c'], 'gw-c stays behind: named once the bound passes');
    assert.ok(Date.now() - started >= 380, 'it waited out the bound');
  });

  test('a process whose lease has lapsed is not waited for', async () => {
    const d = await gateway('gw-d');
    await gateway('gw-e', 60);
    // gw-e stops renewing (its lease ends with it): wait until the lease has lapsed.
    await leases[leases.length - 1].end();
    await new Promise((r) => setTimeout(r, 150));
    for (const g of gateways.slice(0, 3)) g.announce(300);
    assert.equal(await d.wait(300, 2000), []);
  });
}

test.run();
