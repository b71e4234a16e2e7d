// Holds of a gateway that dies mid-call: real `tollgate serve` processes with calls in flight,
// killed with SIGKILL. The holds of the dead process are released by another process (PostgreSQL:
// a second gateway beside it; embedded PGlite: the same gateway restarted on its data directory)
// within 30 seconds with the shipped lease and sweep settings, and only those: the charges that
// committed before the kill stand, no hold is both charged and released, and the account ends
// with nothing reserved. Runs on embedded PGlite and, with DATABASE_URL, on PostgreSQL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnGateway, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';
import { writeModelsConfig } from './support/http.ts';
import { openPglite, openPostgres, type Database } from '../src/eventstore/db.ts';

const url = process.env.DATABASE_URL;
const engine = url ? 'postgres' : 'pglite';
const MODEL = 'gen-6-terra';
const IN_FLIGHT = 6;

/** The default models on the simulated upstream at 1.5 s a token: a 30-token call is in flight for 45 s. */
function slowModelsConfig(): string {
  const config = JSON.parse(readFileSync(new URL('../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  config.providers.simulated = { type: 'simulated', tokenDelayMs: 1500, imageDelayMs: 8000 };
  return writeModelsConfig(config);
}

const chat = (g: GatewayProcess, key: string, maxTokens: number, stream = false) =>
  fetch(`${g.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hold me' }], max_tokens: maxTokens, stream }),
  });

async function reservedOf(g: GatewayProcess, key: string): Promise<{ reserved: number; used: number }> {
  const res = await fetch(`${g.baseUrl}/subscription`, { headers: { authorization: `Bearer ${key}` } });
  assert.is(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { quota: { reserved: number; used: number } };
  return body.quota;
}

/** /metrics is on the public port only behind a token (docs/operating.md, "Metrics"). */
const METRICS_TOKEN = 'orphaned-holds-test-metrics-token-0123456789';

async function openHolds(g: GatewayProcess): Promise<number> {
  const text = await (await fetch(`${g.baseUrl.replace(/\/v1$/, '')}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return Number(/^tollgate_open_holds (\d+)/m.exec(text)?.[1] ?? -1);
}

test(`holds of a gateway killed mid-call are released by another process within 30 s, charges kept (${engine})`, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-orphans-'));
  const schema = uniqueSchema('orph');
  const models = slowModelsConfig();
  const env = { TOLLGATE_DATA_DIR: dataDir, TOLLGATE_SCHEMA: schema, TOLLGATE_MODELS_CONFIG: models, TOLLGATE_METRICS_TOKEN: METRICS_TOKEN };
  const dying = await spawnGateway(env);
  const key = dying.key;
  let survivor: GatewayProcess | null = null;
  let db: Database | null = null;
  try {
    // PostgreSQL: a second gateway serves beside the one that will die.
    if (url) survivor = await spawnGateway({ ...env, TOLLGATE_BOOTSTRAP: 'off' });

    // Two calls that finish (their charges must stand), then calls left in flight.
    for (const res of await Promise.all([chat(dying, key, 1), chat(dying, key, 1, true)])) assert.is(res.status, 200, await res.text());
    const inFlight = Array.from({ length: IN_FLIGHT }, (_, i) =>
      chat(dying, key, 30, i % 2 === 1)
        .then((r) => r.text())
        .catch(() => 'cut'),
    );
    const deadline = Date.now() + 60_000;
    while ((await openHolds(dying)) !== IN_FLIGHT) {
      assert.ok(Date.now() < deadline, 'the calls never all held quota');
      await sleep(50);
    }
    // One more call finishes while the others are held. (A hold's commit does not wait for the
    // disk; a charge's does, and takes every commit before it along: the holds are stored now.)
    const last = await chat(dying, key, 1);
    assert.is(last.status, 200, await last.text());
    const before = survivor ? await reservedOf(survivor, key) : null;
    if (before) assert.ok(before.reserved > 0, 'the survivor sees the dead process’s holds');

    const exited = new Promise((r) => dying.child.once('exit', r));
    dying.child.kill('SIGKILL');
    const killedAt = Date.now();
    await exited;
    await Promise.all(inFlight);
    // PGlite: the same gateway started again on its data directory.
    if (!url) survivor = await spawnGateway({ ...env, TOLLGATE_BOOTSTRAP: 'off' });

    let quota = await reservedOf(survivor!, key);
    while (quota.reserved !== 0) {
      assert.ok(Date.now() - killedAt < 30_000, `holds still reserved ${Date.now() - killedAt} ms after the kill: ${quota.reserved} tokens`);
      await sleep(250);
      quota = await reservedOf(survivor!, key);
    }
    const releasedAfterMs = Date.now() - killedAt;
    console.log(
      `  ${engine}: ${IN_FLIGHT} holds of the killed gateway released ${(releasedAfterMs / 1000).toFixed(1)} s after SIGKILL (lease 10 s, sweep every 5 s)`,
    );

    // The ledger: each hold charged or released, never both; the released ones are the calls cut
    // off, for the dead process; what was charged is what the account used (the first start's
    // demo-books calls aside).
    await survivor!.stop();
    db = url ? openPostgres(url, 2) : await openPglite(join(dataDir, 'pglite'));
    const events = await db.query<{ type: string; hold: string; reason: string | null; billed: string | null; process: string | null }>(
      `SELECT type, data->>'holdId' AS hold, data->>'reason' AS reason, data->>'billed' AS billed, data->>'process' AS process
         FROM "${schema}".events WHERE type IN ('QuotaReserved', 'ChatCharged', 'ReservationReleased') AND data->>'accountId' <> 'demo-books' ORDER BY position`,
    );
    const reserved = events.filter((e) => e.type === 'QuotaReserved');
    const charged = events.filter((e) => e.type === 'ChatCharged');
    const released = events.filter((e) => e.type === 'ReservationReleased');
    assert.is(reserved.length, 3 + IN_FLIGHT);
    assert.is(charged.length, 3, 'the three finished calls');
    assert.is(released.length, IN_FLIGHT, 'every call cut off by the kill');
    assert.ok(
      released.every((e) => e.reason === 'process_lost'),
      released.map((e) => e.reason).join(),
    );
    assert.equal(new Set([...charged, ...released].map((e) => e.hold)), new Set(reserved.map((e) => e.hold)), 'each hold settled once');
    assert.is(new Set(reserved.map((e) => e.process)).size, 1, 'every hold names the process that took it');
    assert.match(reserved[0].process ?? '', /^gw-/);
    assert.is(
      quota.used,
      charged.reduce((s, e) => s + Number(e.billed), 0),
      'used = the charges',
    );
  } finally {
    if (dying.child.exitCode === null) dying.child.kill('SIGKILL');
    if (survivor && survivor.child.exitCode === null) survivor.child.kill('SIGKILL');
    await db?.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(models, { force: true });
    if (url) await dropSchemas(url, schema);
  }
});

test.run();
