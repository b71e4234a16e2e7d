// Guessing redemption codes is limited per account across gateways: wrong and used codes count
// alike, get the same answer, and past TOLLGATE_CODE_ATTEMPTS_PER_HOUR every gateway answers 429.
// On PostgreSQL two gateways (each with its own state, as two processes have) share one log and one count.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { settingsFromEnv } from '../src/config.ts';
import { call, type Reply } from './support/http.ts';
import { issueKey } from '../src/keys/index.ts';
import { openAccount } from '../src/accounts/index.ts';

const ADMIN = 'tg_admin_code_guessing_test_token_0123456789';
const LIMIT = 5;
const gateways: TestGateway[] = [];
let key: string;

test.before(async () => {
  const payments = { ...settingsFromEnv({}).payments, codeAttemptsPerHour: LIMIT };
  gateways.push(await startTestGateway({ adminToken: ADMIN, payments }));
  // A second gateway on the same log (PGlite is one process's database: there, one gateway).
  if (process.env.DATABASE_URL) gateways.push(await startTestGateway({ adminToken: ADMIN, bootstrap: false, payments, schema: gateways[0].ledger.schema }));
  await openAccount(gateways[0].ledger, { accountId: 'acct_guess', name: 'Guesser' }, 'admin:test');
  key = (await issueKey(gateways[0].ledger, 'acct_guess', 'k', 'admin:test')).secret;
});
test.after(async () => {
  for (const g of gateways.slice(1)) await g.close();
  await gateways[0].stop();
});

const redeem = (g: TestGateway, code: string): Promise<Reply> => call(g, '/v1/redemptions', { key, body: { code } });

test('wrong and used codes get one answer; past the limit every gateway says 429, and the count is exact', async () => {
  const [first] = gateways;
  const batch = await call(first, '/admin/v1/code-batches', { key: ADMIN, body: { count: 2, pack_id: 'pack-1m', amount: 500 } });
  assert.is(batch.status, 201, batch.text);
  const [code, other] = batch.json.codes as string[];
  assert.is((await redeem(first, code)).status, 201);
  // The used code and a wrong one: the same 400, each counted.
  const used = await redeem(gateways.at(-1)!, code);
  const wrong = await redeem(first, other.slice(0, -1) + (other.endsWith('a') ? 'b' : 'a'));
  assert.equal([used.status, used.json], [400, wrong.json]);
  assert.is(used.json.error.code, 'invalid_code');
  // 30 guesses at once, alternately to each gateway: exactly the LIMIT - 2 attempts left are answered 400.
  const guesses = await Promise.all(
    Array.from({ length: 30 }, (_, i) => redeem(gateways[i % gateways.length], `tgc_${'a'.repeat(10)}_${String(i).padStart(20, 'x')}`)),
  );
  assert.equal(
    [guesses.filter((r) => r.status === 400).length, guesses.filter((r) => r.status === 429).length],
    [LIMIT - 2, 30 - (LIMIT - 2)],
    guesses.map((r) => r.status).join(),
  );
  const limited = guesses.find((r) => r.status === 429)!;
  assert.is(limited.json.error.code, 'rate_limit_exceeded');
  assert.ok(Number(limited.headers.get('retry-after')) >= 1 && Number(limited.headers.get('retry-after')) <= 3600);
  // A real, unused code is refused too while the account is over its limit, on either gateway.
  for (const g of gateways) assert.is((await redeem(g, other)).status, 429);
});

test.run();
