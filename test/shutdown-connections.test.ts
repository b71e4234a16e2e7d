// A graceful stop waits for calls in flight, not for connections that never sent a request (a
// browser's preconnect, an HTTP client's spare socket after a caller left a stream): those are
// closed at once, so the stop ends when the last call does instead of at the end of its grace.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connect } from 'node:net';
import { once } from 'node:events';
import { openAccount } from './support/http.ts';
import { startLoggedGateway, type LoggedGateway } from './support/upstream-gateway.ts';

const GRACE_MS = 20_000;
let g: LoggedGateway;

test.before(async () => {
  g = await startLoggedGateway({ slow: { type: 'simulated', tokenDelayMs: 15 } }, { 'test/slow': { provider: 'slow', upstreamModel: 'slow' } }, {}, 1000);
});

test.after(async () => {
  await g?.stop();
});

test('a stop closes the connections that sent nothing at once, lets the stream in flight finish, and does not wait out its grace', async () => {
  const acct = await openAccount(g.gw, { quota: 10_000_000 });
  const { port } = new URL(g.gw.url);
  const silent = connect(Number(port), '127.0.0.1');
  await once(silent, 'connect');
  const silentClosed = once(silent, 'close');

  const stream = await fetch(`${g.gw.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test/slow', stream: true, max_tokens: 40, messages: [{ role: 'user', content: 'Tell me a story' }] }),
  });
  assert.is(stream.status, 200);
  const text = stream.text();

  const started = Date.now();
  const stopped = g.stop(GRACE_MS).then(() => Date.now() - started);
  await silentClosed;
  const body = await text;
  assert.ok(body.trimEnd().endsWith('data: [DONE]'), 'the stream in flight ran to its end');
  const tookMs = await stopped;
  assert.ok(tookMs < GRACE_MS / 2, `the stop took ${tookMs} ms of its ${GRACE_MS} ms grace`);
});

test.run();
