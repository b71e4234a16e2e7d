// Security, issue #30 item 4: the operational endpoints are not public by default.
// - a TOLLGATE_ADMIN_TOKEN under 32 characters stops the start, naming the variable;
// - wrong admin tokens are counted per source address and in all: past a limit a minute, wrong
//   tokens get 429s (with Retry-After), while the right token always goes through (issue #39: it
//   was refused too, so anyone could lock the operator out); a request without any token is no guess;
// - /metrics is not on the public port unless a metrics token is set, and then only with it
//   (its own port, TOLLGATE_METRICS_PORT, is covered by operations.test.ts).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { spawnGateway, startTestGateway } from './support/gateway.ts';
import { call } from './support/http.ts';
import { ADMIN_GUESSES_IN_ALL_FACTOR, ADMIN_GUESSES_PER_MINUTE, MIN_ADMIN_TOKEN_LENGTH } from '../src/http/admin-token.ts';

const ADMIN = `tg_admin_${randomBytes(24).toString('base64url')}`;

test('an admin token under 32 characters stops the start', async () => {
  const short = 'tg_admin_' + 'x'.repeat(MIN_ADMIN_TOKEN_LENGTH - 10);
  const err = await spawnGateway({ TOLLGATE_ADMIN_TOKEN: short, TOLLGATE_BOOTSTRAP: 'off' }).then(
    async (gp) => {
      await gp.stop();
      return null;
    },
    (e: Error) => e,
  );
  assert.ok(err, 'the gateway started with a short admin token');
  assert.match(err!.message, /TOLLGATE_ADMIN_TOKEN is 31 characters: it must be at least 32/);
  assert.not.match(err!.message, short, 'the token itself is not printed');
  const fine = await startTestGateway({ adminToken: 'tg_admin_' + 'x'.repeat(MIN_ADMIN_TOKEN_LENGTH - 9), bootstrap: false });
  await fine.stop();
});

const guess = () => `tg_admin_${randomBytes(24).toString('base64url')}`;

test('wrong admin tokens from one source get 429 past the limit; 100 of them, then the right token: 200', async () => {
  const gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  try {
    const plans = (token?: string) => call(gw, '/admin/v1/plans', token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
    // No token at all is not a guess.
    for (let i = 0; i < ADMIN_GUESSES_PER_MINUTE + 5; i++) assert.is((await plans()).status, 401);
    assert.is((await plans(ADMIN)).status, 200);
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      const r = await plans(guess());
      statuses.push(r.status);
      if (r.status === 429) {
        assert.is(r.json.error.code, 'too_many_failures');
        const retry = Number(r.headers.get('retry-after'));
        assert.ok(retry >= 1 && retry <= 60, `retry-after ${retry}`);
      }
    }
    // The first ADMIN_GUESSES_PER_MINUTE wrong tokens are 401s, every one after them a 429.
    assert.equal(statuses, [...Array(ADMIN_GUESSES_PER_MINUTE).fill(401), ...Array(100 - ADMIN_GUESSES_PER_MINUTE).fill(429)]);
    // The right token from the same address is never refused, and does not open the way for more guesses.
    const right = await plans(ADMIN);
    assert.is(right.status, 200, right.text);
    assert.is((await call(gw, '/admin/v1/accounts', { key: ADMIN })).status, 200);
    assert.is((await plans(guess())).status, 429);
    assert.is((await plans(ADMIN)).status, 200);
  } finally {
    await gw.stop();
  }
});

test('wrong admin tokens from many addresses are bounded in all; the right token still goes through from any', async () => {
  // Behind a proxy (trusted), each guess comes from another address: only the bound in all stops them.
  const perMinute = 3;
  const gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false, adminFailuresPerMinute: perMinute, trustProxy: true });
  try {
    const from = (n: number, token: string) =>
      call(gw, '/admin/v1/plans', { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': `198.51.100.${n}` } });
    const inAll = perMinute * ADMIN_GUESSES_IN_ALL_FACTOR;
    const statuses: number[] = [];
    for (let i = 0; i < inAll + 10; i++) statuses.push((await from(i, guess())).status);
    assert.equal(statuses, [...Array(inAll).fill(401), ...Array(10).fill(429)]);
    for (const n of [1, 200]) assert.is((await from(n, ADMIN)).status, 200, `the right token from 198.51.100.${n}`);
  } finally {
    await gw.stop();
  }
});

test('/metrics is not on the public port by default; with a metrics token, only for that token', async () => {
  const closed = await startTestGateway({ bootstrap: false });
  try {
    assert.is((await call(closed, '/metrics')).status, 404);
  } finally {
    await closed.stop();
  }
  const token = randomBytes(24).toString('base64url');
  const gw = await startTestGateway({ bootstrap: false, metricsToken: token });
  try {
    const none = await call(gw, '/metrics');
    assert.is(none.status, 401);
    assert.is((await call(gw, '/metrics', { headers: { authorization: `Bearer ${token}x` } })).status, 401);
    const ok = await call(gw, '/metrics', { headers: { authorization: `Bearer ${token}` } });
    assert.is(ok.status, 200);
    assert.match(ok.text, /tollgate_http_requests_total/);
  } finally {
    await gw.stop();
  }
});

test.run();
