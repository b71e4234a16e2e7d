// Clients that leave before their reply is complete (docs/billing.md, "Billing rules"): a non-streamed chat or
// an image the client leaves is not charged (the upstream call is stopped and the hold released
// as client_aborted), also when the client leaves while the gateway is still preparing the call;
// a stream the client leaves pays the prompt and what was streamed, marked aborted.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import http from 'node:http';
import { streams } from '../src/ledger/events.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import { eventually, openAccount, startGatewayWithRoutes, type TestAccount } from './support/http.ts';
import type { TestGateway } from './support/gateway.ts';
import Koa from 'koa';
import { abortWhenClientGone, watchClient } from '../src/http/client-gone.ts';

const SLOW = 'test/slow-luna';
const SLOW_IMAGE = 'test/slow-image';
let gw: TestGateway;
let acct: TestAccount;

test.before(async () => {
  gw = await startGatewayWithRoutes(
    { slow: { type: 'simulated', tokenDelayMs: 40, imageDelayMs: 1500 } },
    {
      [SLOW]: { provider: 'slow', upstreamModel: 'gen-6-luna', multiplierMilli: 1000 },
      [SLOW_IMAGE]: { provider: 'slow', upstreamModel: 'gen-image-1', multiplierMilli: 1000 },
    },
  );
  acct = await openAccount(gw, { quota: 100_000_000 });
});
test.after(async () => {
  await gw?.stop();
});

/** Sends a request and destroys the connection after `leaveAfterMs`, or after `chunks` data chunks. */
function leave(path: string, body: unknown, requestId: string, how: { afterMs?: number; chunks?: number }): Promise<number> {
  return new Promise((resolve) => {
    const u = new URL(gw.url + path);
    const req = http.request({
      hostname: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: {
        authorization: `Bearer ${acct.key}`,
        'content-type': 'application/json',
        'x-request-id': requestId,
      },
    });
    let seen = 0;
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        seen += (chunk.toString().match(/^data: \{/gm) ?? []).length;
        if (how.chunks !== undefined && seen >= how.chunks) {
          req.destroy();
          resolve(seen);
        }
      });
      res.on('end', () => resolve(seen));
    });
    req.on('error', () => resolve(seen));
    if (how.afterMs !== undefined)
      setTimeout(() => {
        req.destroy();
        resolve(seen);
      }, how.afterMs);
    req.end(JSON.stringify(body));
  });
}

/** The event that closed the call's hold: its charge or its release. */
async function closing(requestId: string): Promise<StoredEvent> {
  const events = await eventually(
    async () => (await gw.ledger.events.readStream(streams.account(acct.accountId), 0)).filter((e) => e.data.requestId === requestId),
    (es) => es.some((e) => e.type !== 'QuotaReserved'),
    20_000,
  );
  assert.is(events.filter((e) => e.type === 'QuotaReserved').length, 1, 'one hold');
  const closed = events.filter((e) => e.type !== 'QuotaReserved');
  assert.is(closed.length, 1, 'closed once');
  return closed[0];
}

/**
 * For a client gone while the gateway prepares the call: the gateway may see the departure before
 * it takes a hold (then nothing at all is written for the request: not charged, nothing to close),
 * or after (then its hold is closed once). Null for the first.
 */
async function closingIfHeld(requestId: string): Promise<StoredEvent | null> {
  const mine = async () => (await gw.ledger.events.readStream(streams.account(acct.accountId), 0)).filter((e) => e.data.requestId === requestId);
  await new Promise((r) => setTimeout(r, 1500));
  if ((await mine()).length === 0) return null;
  return closing(requestId);
}

// ~40k tokens: counting them keeps the gateway busy before it reaches the upstream call.
const LONG = Array.from({ length: 40_000 }, (_, i) => `word${i % 997}`).join(' ');
const chatBody = (content: string, stream = false) => ({ model: SLOW, messages: [{ role: 'user', content }], max_tokens: 50, stream });

test('chat: the client leaves while the upstream generates: not charged, released as client_aborted', async () => {
  await leave('/v1/chat/completions', chatBody('Tell me about bridges.'), 'leave-chat-upstream', { afterMs: 300 });
  const e = await closing('leave-chat-upstream');
  assert.is(e.type, 'ReservationReleased');
  assert.is(e.data.reason, 'client_aborted');
});

test('chat: the client leaves while the gateway prepares the call: not charged, released as client_aborted', async () => {
  for (let i = 0; i < 3; i++) {
    const id = `leave-chat-prepare-${i}`;
    await leave('/v1/chat/completions', chatBody(LONG), id, { afterMs: 30 });
    const e = await closingIfHeld(id);
    if (!e) continue;
    assert.is(e.type, 'ReservationReleased', `${id}: ${e.type}`);
    assert.is(e.data.reason, 'client_aborted');
  }
});

test('stream: the client leaves while the gateway prepares the call: released, or charged only the prompt, aborted', async () => {
  const id = 'leave-stream-prepare';
  await leave('/v1/chat/completions', chatBody(LONG, true), id, { afterMs: 30 });
  const e = await closingIfHeld(id);
  if (!e) return;
  if (e.type === 'ChatCharged') {
    assert.is(e.data.aborted, true);
    // The prompt, and at most the one token the upstream may have produced in the turn the
    // departure was noticed (this process hosts the client, the gateway and the upstream).
    assert.ok((e.data.completionTokens as number) <= 1, `completion ${e.data.completionTokens}`);
  } else {
    assert.is(e.type, 'ReservationReleased');
    assert.is(e.data.reason, 'client_aborted');
  }
});

test('stream: the client leaves after 3 chunks: charged the prompt and what was streamed, marked aborted', async () => {
  const id = 'leave-stream-chunks';
  const seen = await leave('/v1/chat/completions', chatBody('Tell me a long story about toll roads.', true), id, { chunks: 3 });
  const e = await closing(id);
  assert.is(e.type, 'ChatCharged');
  assert.is(e.data.aborted, true);
  assert.ok(
    (e.data.completionTokens as number) >= seen - 1 && (e.data.completionTokens as number) < 50,
    `completion ${e.data.completionTokens}, chunks seen ${seen}`,
  );
});

test('image: the client leaves while the gateway prepares or the upstream draws: not charged', async () => {
  for (const [id, afterMs] of [
    ['leave-image-prepare', 5],
    ['leave-image-draw', 400],
  ] as const) {
    await leave('/v1/images/generations', { model: SLOW_IMAGE, prompt: 'A toll booth at dawn. '.repeat(350) }, id, { afterMs });
    if (afterMs < 50) {
      // Gone after 5 ms: on a busy machine the request may not even have reached its hold. Then
      // nothing may be written for it at all; otherwise its hold is released, never charged.
      const mine = async () => (await gw.ledger.events.readStream(streams.account(acct.accountId), 0)).filter((e) => e.data.requestId === id);
      await new Promise((r) => setTimeout(r, 1500));
      if ((await mine()).length === 0) continue;
    }
    const e = await closing(id);
    assert.is(e.type, 'ReservationReleased', `${id}: ${e.type}`);
    assert.is(e.data.reason, 'client_aborted');
  }
});

test('a call prepared after the client already left starts aborted (the departure is seen from the first middleware)', async () => {
  const app = new Koa();
  let signals: { before: boolean; after: boolean } | null = null;
  let entered: () => void = () => undefined;
  const reached = new Promise<void>((r) => (entered = r));
  app.use(watchClient);
  app.use(async (ctx) => {
    entered();
    // The client leaves while this request is being "prepared"; the call's controller is made after.
    await new Promise((r) => setTimeout(r, 200));
    const abort = abortWhenClientGone(ctx);
    signals = { before: abort.signal.aborted, after: false };
    ctx.body = 'late';
  });
  const server = app.listen(0);
  try {
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => {
      const req = http.request({ port, method: 'POST', path: '/' });
      req.on('error', () => undefined);
      req.end('x');
      // Leave once the request is inside the app (on a busy machine that may take a while).
      void reached.then(() => {
        req.destroy();
        resolve();
      });
    });
    await eventually(
      async () => signals,
      (s) => s !== null,
      2000,
    );
    assert.is(signals!.before, true);
  } finally {
    server.close();
  }
});

test.run();
