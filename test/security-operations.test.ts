// Security, issue #30 item 4: the operational endpoints are not public by default.
// - a TOLLGATE_ADMIN_TOKEN under 32 characters stops the start, naming the variable;
// - wrong admin tokens are counted per source address: past the limit a minute the source gets
//   429s (with Retry-After), even with the right token, while a request without any token is no guess;
// - /metrics is not on the public port unless a metrics token is set, and then only with it
//   (its own port, TOLLGATE_METRICS_PORT, is covered by operations.test.ts).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { spawnGateway, startTestGateway } from './support/gateway.ts';
import { call } from './support/http.ts';
import { ADMIN_GUESSES_PER_MINUTE, MIN_ADMIN_TOKEN_LENGTH } from '../src/admin/admin-token.ts';

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

test('repeated wrong admin tokens from one source are refused with 429 past the limit', async () => {
  const gw = await startTestGateway({ adminToken: ADMIN, bootstrap: false });
  try {
    const plans = (token?: string) => call(gw, '/admin/v1/plans', token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
    // No token at all is not a guess.
    for (let i = 0; i < ADMIN_GUESSES_PER_MINUTE + 5; i++) assert.is((await plans()).status, 401);
    assert.is((await plans(ADMIN)).status, 200);
    for (let i = 0; i < ADMIN_GUESSES_PER_MINUTE; i++) {
      const r = await plans(`tg_admin_${randomBytes(24).toString('base64url')}`);
      assert.is(r.status, 401, `guess ${i + 1}`);
    }
    const over = await plans('tg_admin_one_more_guess_after_the_limit_0123');
    assert.is(over.status, 429, over.text);
    assert.is(over.json.error.code, 'too_many_failures');
    const retry = Number(over.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `retry-after ${retry}`);
    // The right token does not get through from that source until the minute has passed: guessing cannot go on.
    assert.is((await plans(ADMIN)).status, 429);
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
