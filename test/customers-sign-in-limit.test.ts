// The sign-in request limit holds across gateways: requests for one address alternate between two
// gateways on one log (PostgreSQL; on PGlite both are the same gateway), and past the limit each
// gateway answers the same 429, for a known and an unknown address alike, although neither
// process saw the limit's worth of requests itself. Each counted request is a SignInRequested
// holding only the address's hash.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount } from './support/http.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { customerSettingsFromEnv } from '../src/config.ts';
import { streams } from '../src/ledger/events.ts';
import { hashKey } from '../src/keys/secrets.ts';
import { utcMinute } from '../src/customers/sign-in-decider.ts';

const ADMIN = 'sign-in-limit-admin-token-0123456789abcdef';
const LIMIT = 4;
let a: TestGateway;
let b: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;

test.before(async () => {
  smtp = await startSmtpServer();
  const customers = { ...customerSettingsFromEnv({}), smtpUrl: smtp.url, signInAttemptsPerMinute: LIMIT };
  a = await startTestGateway({ adminToken: ADMIN, customers });
  b = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: a.ledger.schema, customers }) : a;
  const acct = await openAccount(a, { quota: 1000 });
  const inv = await call(a, `/admin/v1/accounts/${acct.accountId}/members`, {
    body: { email: 'known@acme.test', role: 'owner' },
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.is(inv.status, 201, inv.text);
});
test.after(async () => {
  if (b && b !== a) await b.close();
  await a?.stop();
  await smtp?.close();
});

/** Starts in the first 45 seconds of a UTC minute, so the requests below share one window. */
async function freshMinute() {
  const s = new Date().getUTCSeconds();
  if (s > 45) await new Promise((r) => setTimeout(r, (61 - s) * 1000));
}

test('past the limit, both gateways refuse with one 429 for a known and an unknown address', async () => {
  await freshMinute();
  const answers: Record<string, Array<{ status: number; body: string }>> = {};
  for (const email of ['known@acme.test', 'nobody@acme.test']) {
    answers[email] = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      const r = await call(i % 2 === 0 ? a : b, '/app/api/sign-in/email', { body: { email } });
      answers[email].push({ status: r.status, body: r.status === 429 ? r.json.error.code : r.json.message });
    }
  }
  const expected = [...Array(LIMIT).fill(202), 429, 429];
  for (const email of Object.keys(answers))
    assert.equal(
      answers[email].map((x) => x.status),
      expected,
      email,
    );
  assert.equal(answers['known@acme.test'], answers['nobody@acme.test'], 'the same answers whether the address is known or not');
  const counted = await a.ledger.events.readStream(streams.signInAttempts(hashKey('nobody@acme.test'), utcMinute(new Date())));
  assert.is(counted.length, LIMIT, 'none recorded past the limit');
  assert.not.ok(JSON.stringify(counted.map((e) => e.data)).includes('nobody'), 'only the hash of the address is kept');
});

test.run();
