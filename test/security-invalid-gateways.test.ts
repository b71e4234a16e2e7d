// Security, issue #30 item 2: the per-key limit on invalid requests holds across gateways. On
// PostgreSQL two gateways (each with its own memory, as two processes have) share one database:
// a key spreading its invalid requests over both gets the limit once between them, not once per
// gateway. On PGlite (one process's database) one gateway shows the same count.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount } from './support/http.ts';

const LIMIT = 12;
const gateways: TestGateway[] = [];

test.before(async () => {
  gateways.push(await startTestGateway({ bootstrap: false, invalidRequestsPerMinute: LIMIT }));
  if (process.env.DATABASE_URL) gateways.push(await startTestGateway({ bootstrap: false, invalidRequestsPerMinute: LIMIT, schema: gateways[0].ledger.schema }));
});
test.after(async () => {
  for (const g of gateways.slice(1)) await g.close();
  await gateways[0]?.stop();
});

const invalid = (g: TestGateway, key: string) => call(g, '/v1/chat/completions', { key, body: { model: 'cx/gen-6-luna', messages: [] } });

test('invalid requests spread over the gateways get the limit once between them, then 429 on every gateway', async () => {
  const acct = await openAccount(gateways[0], { quota: 0 });
  const statuses: number[] = [];
  // Six at a time, alternately to each gateway: the count is exact under concurrency too.
  for (let round = 0; round < 6; round++) {
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => invalid(gateways[i % gateways.length], acct.key)));
    statuses.push(...replies.map((r) => r.status));
  }
  const count = (s: number) => statuses.filter((x) => x === s).length;
  assert.equal([count(400), count(429)], [LIMIT, statuses.length - LIMIT], statuses.join());
  for (const g of gateways) {
    const refused = await invalid(g, acct.key);
    assert.is(refused.status, 429);
    assert.is(refused.json.error.code, 'too_many_failures');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1 && Number(refused.headers.get('retry-after')) <= 60);
  }
  // One row for the key, holding no more than the limit's worth of refusals.
  const rows = await gateways[0].db.query<{ n: number }>(
    `SELECT array_length(failures, 1) AS n FROM "${gateways[0].ledger.schema}".invalid_requests WHERE key_id = $1`,
    [acct.keyId],
  );
  assert.is(rows.length, 1);
  assert.ok(rows[0].n <= LIMIT + 1, `${rows[0].n} refusals kept`);
  // Another key of another account still gets its own answer.
  const other = await openAccount(gateways[0], { quota: 0 });
  assert.is((await invalid(gateways.at(-1)!, other.key)).status, 400);
});

test.run();
