// Metering through the HTTP API, checked against the ledger: concurrent calls never spend the
// same tokens twice or go below zero, output is capped at what the hold covers, streams are
// charged what was generated (also when the client leaves), Idempotency-Key replays without a
// second charge, every response states its cost, and the plan's call rate holds per account.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestGateway } from './support/gateway.ts';
import { assertNeverBelowZero } from './support/ledger-checks.ts';
import { doublePromptTokens, doubleReplyChunks, startUpstreamDouble, type UpstreamDouble } from './support/upstream-double.ts';
import { call, chat, eventually, ledgerView, openAccount, readSse, userMessage, startGatewayWithRoutes, type TestAccount } from './support/http.ts';
import { countMessageTokens, countTextTokens } from '../src/upstream/tokenizer.ts';
import { issueKey } from '../src/keys/index.ts';
import { definePlan, grantExtra, openAccount as openLedgerAccount, subscribe } from '../src/accounts/index.ts';

const DOUBLE_MODEL = 'test/double-chat';
const SLOW_DOUBLE_MODEL = 'test/slow-double-chat';
const SLOW_MODEL = 'test/slow-sim';
const FAST_TWIN = 'test/fast-sim';
const TOKEN_DELAY_MS = 60;
const DOUBLE_REPLY = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty';

let gw: TestGateway;
let double: UpstreamDouble;
let slowDouble: UpstreamDouble;

test.before(async () => {
  double = await startUpstreamDouble({ reply: DOUBLE_REPLY });
  slowDouble = await startUpstreamDouble({ reply: DOUBLE_REPLY, chunkDelayMs: 80 });
  gw = await startGatewayWithRoutes(
    {
      double: { type: 'openai-compatible', baseURL: double.url, timeoutMs: 5000 },
      slowDouble: { type: 'openai-compatible', baseURL: slowDouble.url, timeoutMs: 5000 },
      slow: { type: 'simulated', tokenDelayMs: TOKEN_DELAY_MS },
    },
    {
      [DOUBLE_MODEL]: { provider: 'double', upstreamModel: 'double-model', multiplierMilli: 1000 },
      [SLOW_DOUBLE_MODEL]: { provider: 'slowDouble', upstreamModel: 'double-model', multiplierMilli: 1500 },
      // Two routes to one simulated upstream model: the same reply, one slow and one at once.
      [SLOW_MODEL]: { provider: 'slow', upstreamModel: 'gen-6-luna', multiplierMilli: 1250 },
      [FAST_TWIN]: { provider: 'simulated', upstreamModel: 'gen-6-luna', multiplierMilli: 1250 },
    },
  );
});

test.after(async () => {
  await gw?.stop();
  await double?.close();
  await slowDouble?.close();
});

const charge = (tokens: number, milli: number) => Math.ceil((tokens * milli) / 1000);
const billedHeader = (r: { headers: Headers }) => Number(r.headers.get('x-tollgate-billed-tokens'));
const remainingHeader = (r: { headers: Headers }) => Number(r.headers.get('x-tollgate-remaining-tokens'));

async function remainingTokens(acct: TestAccount): Promise<number> {
  const r = await call(gw, '/v1/subscription', { key: acct.key });
  assert.is(r.status, 200);
  return r.json.remaining_tokens;
}

test('30 concurrent calls on a small quota never spend the same tokens twice nor go below zero', async () => {
  const quota = 1200;
  const acct = await openAccount(gw, { quota });
  const bodies = Array.from({ length: 30 }, (_, i) => ({
    model: i % 3 === 0 ? 'cx/gen-6-astra' : 'alpha-haiku-4.5',
    messages: userMessage(`Concurrent question number ${i} about toll roads and bridges.`),
    ...(i % 5 === 4 ? {} : { max_tokens: 40 }),
  }));
  const replies = await Promise.all(bodies.map((body) => chat(gw, acct.key, body)));
  const ok = replies.filter((r) => r.status === 200);
  const refused = replies.filter((r) => r.status === 402);
  assert.is(
    ok.length + refused.length,
    30,
    replies
      .filter((r) => r.status !== 200 && r.status !== 402)
      .map((r) => r.text)
      .join('\n'),
  );
  // A call without max_tokens holds all that is left, so how many fit depends on arrival order.
  assert.ok(ok.length >= 1, `${ok.length} succeeded`);
  assert.ok(refused.length >= 1, 'the quota ran out');
  replies.forEach((r, i) => {
    if (r.status !== 402) return;
    assert.is(r.json.error.code, 'insufficient_quota');
    // Refused only when the balance left beside the other calls' holds cannot pay for even one
    // completion token: a call is never turned away because a concurrent call raced it.
    const [, needed, available] = /needs at least (\d+) tokens; (\d+) are available/.exec(r.json.error.message) ?? [];
    const milli = bodies[i].model === 'cx/gen-6-astra' ? 2000 : 1000;
    const minimum = charge(countMessageTokens(bodies[i].messages as never) + 1, milli);
    // When not even one completion token without the prompt fits, the call is refused before its
    // prompt is counted, and says so: it needs the smallest hold of all.
    const beforeCounting = charge(1, milli);
    assert.ok(Number(needed) === minimum || (Number(needed) === beforeCounting && Number(available) < beforeCounting), r.json.error.message);
    assert.ok(Number(available) < minimum, r.json.error.message);
  });

  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, ok.length, 'one charge per successful call');
  assert.ok(view.billed <= quota, `charged ${view.billed} > quota ${quota}`);
  assert.is(
    view.billed,
    ok.reduce((sum, r) => sum + billedHeader(r), 0),
    'headers add up to the ledger',
  );
  assert.is(view.row.quota_used, view.billed);
  assert.is(view.row.reserved, 0);
  assert.is(view.row.open_holds, 0);
  assert.is(view.openHoldRows, 0);
  assert.is(view.reservations.length, view.chatCharges.length + view.releases.length, 'every hold settled or released');
  for (const c of view.chatCharges) {
    const d = c.data as { billed: number; reserved: number; promptTokens: number; completionTokens: number; multiplierMilli: number };
    assert.is(d.billed, charge(d.promptTokens + d.completionTokens, d.multiplierMilli));
    assert.ok(d.billed <= d.reserved, 'no charge beyond its hold');
  }
  // Each hold was granted against what was left at the time: replay and check every step.
  assertNeverBelowZero(view.events);
  assert.is(await remainingTokens(acct), quota - view.billed);
});

test('concurrent calls spending the main plan and then extra tokens stay within both', async () => {
  const acct = await openAccount(gw, { quota: 300, extra: 400 });
  const replies = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      chat(gw, acct.key, {
        model: 'alpha-haiku-4.5',
        messages: userMessage(`Extra tokens question ${i}`),
        max_tokens: 30,
      }),
    ),
  );
  assert.ok(replies.every((r) => r.status === 200 || r.status === 402));
  const view = await ledgerView(gw, acct.accountId);
  assert.ok(view.billed <= 700);
  assert.ok(view.row.quota_used <= 300 && view.row.extra_used <= 400);
  assert.is(view.row.quota_used + view.row.extra_used, view.billed);
  // The main plan is spent before any extra token.
  if (view.row.extra_used > 0) assert.ok(view.row.quota_used > 300 - 60, `main plan left unused: ${view.row.quota_used}`);
  assert.is(view.row.reserved, 0);
  assertNeverBelowZero(view.events);
});

test('max_tokens is capped at what the hold covers: a small balance still answers, with finish_reason length', async () => {
  const messages = userMessage('Tell me everything about the history of toll roads.');
  const prompt = countMessageTokens(messages as never);
  // At multiplier 2 the balance covers the prompt and exactly 5 completion tokens.
  const quota = 2 * (prompt + 5) + 1;
  const acct = await openAccount(gw, { quota });
  const r = await chat(gw, acct.key, { model: 'cx/gen-6-astra', messages, max_tokens: 1000 });
  assert.is(r.status, 200, r.text);
  assert.is(r.json.choices[0].finish_reason, 'length');
  assert.is(r.json.usage.prompt_tokens, prompt);
  assert.ok(r.json.usage.completion_tokens >= 1 && r.json.usage.completion_tokens <= 5, `completion ${r.json.usage.completion_tokens}`);
  const billed = billedHeader(r);
  assert.is(billed, charge(prompt + r.json.usage.completion_tokens, 2000));
  assert.ok(billed <= quota);
  assert.is(remainingHeader(r), quota - billed);
  const view = await ledgerView(gw, acct.accountId);
  assert.ok(Number(view.reservations[0].data.amount) <= quota, 'the hold fitted the balance');
  assert.is(view.billed, billed);
  assert.is(view.row.quota_used, billed);

  // The upstream itself is told the cap (seen on the wire).
  const small = await openAccount(gw, { quota: prompt + 3 });
  const before = double.requests.length;
  const d = await chat(gw, small.key, { model: DOUBLE_MODEL, messages });
  assert.is(d.status, 200, d.text);
  assert.is(double.requests.length, before + 1);
  const sent = double.requests[double.requests.length - 1].body;
  assert.is(sent.max_tokens ?? sent.max_completion_tokens, 3);
  assert.is(d.json.choices[0].finish_reason, 'length');
  assert.ok(billedHeader(d) <= prompt + 3);
  assert.ok(remainingHeader(d) >= 0);

  // With nothing left for even one completion token the call is refused, not run.
  const empty = await openAccount(gw, { quota: prompt });
  const calls = double.requests.length;
  const refused = await chat(gw, empty.key, { model: DOUBLE_MODEL, messages });
  assert.is(refused.status, 402);
  assert.is(double.requests.length, calls, 'the upstream was not called');
});

test('a streamed call is charged exactly what was generated', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const messages = userMessage('Stream a few words about bridges.');
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'cx/gen-6-terra', messages, stream: true, stream_options: { include_usage: true } }),
  });
  assert.is(res.status, 200);
  // The headers leave before the charge: what is left, not what it cost (that is in the usage chunk).
  assert.ok(res.headers.has('x-tollgate-remaining-tokens'), 'the remaining tokens on a stream too');
  assert.not.ok(res.headers.has('x-tollgate-billed-tokens'), 'no billed header on a stream');
  const events = (await readSse(res)) as { choices: { delta: { content?: string } }[]; usage?: { prompt_tokens: number; completion_tokens: number } }[];
  assert.is(events[events.length - 1], '[DONE]' as never);
  const text = events
    .slice(0, -1)
    .map((e) => e.choices[0]?.delta?.content ?? '')
    .join('');
  const usage = events.find((e) => e.usage)!.usage!;
  assert.is(usage.prompt_tokens, countMessageTokens(messages as never));
  assert.is(usage.completion_tokens, countTextTokens(text), 'usage counts the text that was sent');
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  const d = view.chatCharges[0].data;
  assert.equal([d.streamed, d.aborted, d.promptTokens, d.completionTokens], [true, false, usage.prompt_tokens, usage.completion_tokens]);
  assert.is(d.billed, charge(usage.prompt_tokens + usage.completion_tokens, 1250));
  assert.is(view.row.quota_used, d.billed);
  assert.is(view.row.reserved, 0);

  // The same question without streaming costs the same: streaming is neither free nor dearer.
  const plain = await chat(gw, acct.key, { model: 'cx/gen-6-terra', messages });
  assert.is(plain.json.choices[0].message.content, text);
  assert.is(billedHeader(plain), d.billed);

  // Through an OpenAI-compatible upstream, without include_usage: the upstream's own counts.
  const before = (await ledgerView(gw, acct.accountId)).chatCharges.length;
  const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: DOUBLE_MODEL, messages, stream: true }),
  });
  const chunks = (await readSse(streamed)) as { choices: { delta: { content?: string } }[] }[];
  const got = chunks
    .slice(0, -1)
    .map((e) => e.choices[0]?.delta?.content ?? '')
    .join('');
  assert.is(got, DOUBLE_REPLY);
  const after = await ledgerView(gw, acct.accountId);
  assert.is(after.chatCharges.length, before + 1);
  const dd = after.chatCharges[after.chatCharges.length - 1].data;
  assert.is(dd.completionTokens, doubleReplyChunks(DOUBLE_REPLY).length);
  assert.is(dd.promptTokens, doublePromptTokens(messages));
  assert.is(dd.billed, Number(dd.promptTokens) + Number(dd.completionTokens));
});

/** Starts a stream, reads until `atLeast` content chunks arrived, then hangs up. */
async function streamThenHangUp(key: string, body: Record<string, unknown>, atLeast: number): Promise<{ received: string; abortedAt: number }> {
  const controller = new AbortController();
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal: controller.signal,
  });
  assert.is(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let received = '';
  let pieces = 0;
  while (pieces < atLeast) {
    const { value, done } = await reader.read();
    if (done) throw new Error('stream ended before the client hung up');
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const content = JSON.parse(line.slice(6)).choices?.[0]?.delta?.content;
      if (content) {
        received += content;
        pieces++;
      }
    }
  }
  controller.abort();
  return { received, abortedAt: Date.now() };
}

test('a client that leaves mid-stream stops the upstream and pays the prompt plus what was streamed', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const messages = userMessage('Describe a long mountain toll road in detail, please.');
  const prompt = countMessageTokens(messages as never);
  // The full reply, from the same simulated upstream model without the delay.
  const full = await chat(gw, acct.key, { model: FAST_TWIN, messages });
  const fullTokens = full.json.usage.completion_tokens as number;
  assert.ok(fullTokens >= 20);
  const base = await ledgerView(gw, acct.accountId);

  const { received, abortedAt } = await streamThenHangUp(acct.key, { model: SLOW_MODEL, messages }, 4);
  const view = await eventually(
    () => ledgerView(gw, acct.accountId),
    (v) => v.chatCharges.length > base.chatCharges.length,
  );
  const settledIn = Date.now() - abortedAt;
  assert.is(view.chatCharges.length, base.chatCharges.length + 1);
  const d = view.chatCharges[view.chatCharges.length - 1].data;
  assert.is(d.aborted, true);
  assert.is(d.streamed, true);
  assert.is(d.promptTokens, prompt);
  assert.ok(Number(d.completionTokens) >= countTextTokens(received), `charged ${d.completionTokens} < received ${countTextTokens(received)}`);
  assert.ok(Number(d.completionTokens) <= countTextTokens(received) + 2, `charged ${d.completionTokens}, received ${countTextTokens(received)}`);
  assert.ok(Number(d.completionTokens) < fullTokens, 'not charged for the part never generated');
  assert.is(d.billed, charge(prompt + Number(d.completionTokens), 1250));
  // The upstream stopped: the charge landed well before the rest of the reply could have been generated.
  assert.ok(settledIn < (fullTokens - Number(d.completionTokens)) * TOKEN_DELAY_MS, `settled after ${settledIn} ms`);
  assert.is(view.row.quota_used - base.row.quota_used, d.billed);
  assert.is(view.row.reserved, 0);
  assert.is(view.openHoldRows, 0);
  // And nothing further is charged later for that call.
  await new Promise((r) => setTimeout(r, (fullTokens - Number(d.completionTokens)) * TOKEN_DELAY_MS + 200));
  assert.is((await ledgerView(gw, acct.accountId)).chatCharges.length, view.chatCharges.length);
});

test('a client that leaves mid-stream closes the upstream connection (OpenAI-compatible upstream)', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const messages = userMessage('Count slowly.');
  const abandoned = slowDouble.abandoned;
  const { received } = await streamThenHangUp(acct.key, { model: SLOW_DOUBLE_MODEL, messages }, 3);
  const view = await eventually(
    () => ledgerView(gw, acct.accountId),
    (v) => v.chatCharges.length === 1,
  );
  assert.is(view.chatCharges.length, 1);
  await eventually(
    async () => slowDouble.abandoned,
    (n) => n > abandoned,
  );
  assert.is(slowDouble.abandoned, abandoned + 1, 'the upstream response was abandoned, not read to the end');
  const d = view.chatCharges[0].data;
  assert.is(d.aborted, true);
  const total = doubleReplyChunks(DOUBLE_REPLY).length;
  assert.ok(Number(d.completionTokens) >= countTextTokens(received) && Number(d.completionTokens) < total, `charged ${d.completionTokens} of ${total}`);
  assert.is(d.promptTokens, countMessageTokens(messages as never));
  assert.is(d.billed, charge(Number(d.promptTokens) + Number(d.completionTokens), 1500));
  assert.is(view.row.reserved, 0);
});

test('Idempotency-Key: a repeat returns the first response without a second upstream call or charge', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: DOUBLE_MODEL, messages: userMessage('Idempotent hello') };
  const calls = double.requests.length;
  const first = await chat(gw, acct.key, body, { 'idempotency-key': 'order-1' });
  assert.is(first.status, 200);
  assert.is(first.headers.get('idempotent-replayed'), null);
  const again = await chat(gw, acct.key, body, { 'idempotency-key': 'order-1' });
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.is(again.text, first.text);
  assert.is(again.headers.get('x-tollgate-billed-tokens'), first.headers.get('x-tollgate-billed-tokens'));
  assert.is(double.requests.length, calls + 1, 'one upstream call');
  let view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  assert.is(view.billed, billedHeader(first));

  // The same key with another body is a conflict, and costs nothing.
  const other = await chat(gw, acct.key, { ...body, messages: userMessage('Something else') }, { 'idempotency-key': 'order-1' });
  assert.is(other.status, 409);
  assert.is(other.json.error.code, 'idempotency_key_reused');
  assert.is(other.json.error.param, 'Idempotency-Key');
  // Keys belong to an account: another account's order-1 is its own request.
  const stranger = await openAccount(gw, { quota: 1_000_000 });
  const theirs = await chat(gw, stranger.key, body, { 'idempotency-key': 'order-1' });
  assert.is(theirs.status, 200);
  assert.is(theirs.headers.get('idempotent-replayed'), null);
  assert.is(double.requests.length, calls + 2);
  view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  assert.is(view.row.reserved, 0);
});

test('Idempotency-Key: 10 concurrent requests with one key yield one charge and identical bodies', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: DOUBLE_MODEL, messages: userMessage('Ten at once') };
  const calls = double.requests.length;
  const replies = await Promise.all(Array.from({ length: 10 }, () => chat(gw, acct.key, body, { 'idempotency-key': 'burst-7' })));
  assert.equal(
    replies.map((r) => r.status),
    Array(10).fill(200),
    replies.map((r) => r.text).join('\n'),
  );
  assert.is(new Set(replies.map((r) => r.text)).size, 1, 'identical bodies');
  assert.is(replies.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 9);
  assert.is(double.requests.length, calls + 1, 'one upstream call');
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  assert.is(view.reservations.length, 1);
  assert.is(view.billed, billedHeader(replies[0]));
  assert.is(view.row.quota_used, view.billed);
});

test('Idempotency-Key: a failed first attempt (5xx) is not recorded, so the retry runs and is charged once', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: DOUBLE_MODEL, messages: userMessage('Retry me') };
  double.failNext(500);
  const failed = await chat(gw, acct.key, body, { 'idempotency-key': 'retry-1' });
  assert.is(failed.status, 502);
  const retried = await chat(gw, acct.key, body, { 'idempotency-key': 'retry-1' });
  assert.is(retried.status, 200);
  assert.is(retried.headers.get('idempotent-replayed'), null);
  const replay = await chat(gw, acct.key, body, { 'idempotency-key': 'retry-1' });
  assert.is(replay.headers.get('idempotent-replayed'), 'true');
  assert.is(replay.text, retried.text);
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  assert.equal(
    view.releases.map((r) => r.data.reason),
    ['upstream_error'],
  );
});

test('Idempotency-Key: a 429 (over the call rate) or a 402 (no quota) is not recorded; after a top-up the same key runs', async () => {
  const limited = await openAccount(gw, { quota: 1_000_000, requestsPerMinute: 1 });
  const body = { model: 'alpha-haiku-4.5', messages: userMessage('once a minute'), max_tokens: 5 };
  assert.is((await chat(gw, limited.key, body)).status, 200);
  const refused = await chat(gw, limited.key, body, { 'idempotency-key': 'later-1' });
  assert.is(refused.status, 429);
  const [row] = await gw.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${gw.ledger.schema}".idempotency WHERE key = 'later-1'`);
  assert.is(row.n, 0, 'the 429 left no record behind');

  const broke = await openAccount(gw, { quota: 10 });
  const poor = await chat(gw, broke.key, body, { 'idempotency-key': 'later-2' });
  assert.is(poor.status, 402);
  await grantExtra(gw.ledger, broke.accountId, 100_000, 'top-up', 'admin:test');
  const paid = await chat(gw, broke.key, body, { 'idempotency-key': 'later-2' });
  assert.is(paid.status, 200);
  assert.is(paid.headers.get('idempotent-replayed'), null);
  const view = await ledgerView(gw, broke.accountId);
  assert.is(view.chatCharges.length, 1);
});

/** A retry whose first attempt is still being wound down may be told to retry once more. */
async function retryStream(key: string, body: Record<string, unknown>, idempotencyKey: string): Promise<{ status: number; headers: Headers; text: string }> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    if (res.status === 409 && attempt < 3 && JSON.parse(text).error.code === 'idempotency_retry') continue;
    return { status: res.status, headers: res.headers, text };
  }
}

test('Idempotency-Key on a stream the client abandons: the retry runs again, not stuck in progress nor a cut replay', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: SLOW_MODEL, messages: userMessage('An idempotent stream about ferries.'), stream: true };
  const controller = new AbortController();
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json', 'idempotency-key': 'stream-1' },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const reader = res.body!.getReader();
  let seen = '';
  while ((seen.match(/"content":"[^"]/g) ?? []).length < 3) seen += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  await eventually(
    () => ledgerView(gw, acct.accountId),
    (v) => v.chatCharges.length === 1,
  );

  const started = Date.now();
  const retry = await retryStream(acct.key, body, 'stream-1');
  assert.is(retry.status, 200, retry.text.slice(0, 300));
  assert.is(retry.headers.get('idempotent-replayed'), null, 'the cut stream was not replayed');
  assert.ok(retry.text.trimEnd().endsWith('data: [DONE]'), 'a complete stream');
  assert.ok(Date.now() - started < 15_000, 'the retry did not wait on the abandoned attempt');
  const replay = await retryStream(acct.key, body, 'stream-1');
  assert.is(replay.headers.get('idempotent-replayed'), 'true');
  assert.is(replay.text, retry.text);
  const view = await ledgerView(gw, acct.accountId);
  assert.equal(
    view.chatCharges.map((c) => c.data.aborted),
    [true, false],
    'the abandoned part and the full retry, nothing for the replay',
  );
  assert.is(view.row.reserved, 0);
});

test('Idempotency-Key on a stream ended by an upstream failure: not recorded, the retry runs and is charged once', async () => {
  const acct = await openAccount(gw, { quota: 1_000_000 });
  const body = { model: DOUBLE_MODEL, messages: userMessage('Stream, fail, retry.'), stream: true };
  double.failNext(500);
  const failed = await retryStream(acct.key, body, 'stream-2');
  assert.ok(failed.text.includes('"upstream_error"'), failed.text.slice(0, 300));
  const retry = await retryStream(acct.key, body, 'stream-2');
  assert.is(retry.status, 200);
  assert.is(retry.headers.get('idempotent-replayed'), null, 'the failure was not replayed');
  assert.ok(retry.text.includes(DOUBLE_REPLY.split(' ')[0]) && retry.text.trimEnd().endsWith('data: [DONE]'));
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.chatCharges.length, 1);
  assert.equal(
    view.releases.map((r) => r.data.reason),
    ['upstream_error'],
  );
});

test('every metered response carries x-tollgate-billed-tokens and x-tollgate-remaining-tokens', async () => {
  const quota = 5_000_000;
  const acct = await openAccount(gw, { quota });
  let spent = 0;
  const c = await chat(gw, acct.key, { model: 'cx/gen-6-sol', messages: userMessage('Price check') });
  assert.is(c.status, 200);
  const usage = c.json.usage;
  assert.is(billedHeader(c), charge(usage.prompt_tokens + usage.completion_tokens, 1500));
  spent += billedHeader(c);
  assert.is(remainingHeader(c), quota - spent);
  assert.is(await remainingTokens(acct), quota - spent);

  const img = await call(gw, '/v1/images/generations', { key: acct.key, body: { model: 'cx/gen-6-terra', prompt: 'a toll gate at night' } });
  assert.is(img.status, 200);
  assert.is(billedHeader(img), 56_250);
  spent += 56_250;
  assert.is(remainingHeader(img), quota - spent);
  assert.is(await remainingTokens(acct), quota - spent);

  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.billed, spent);
  assert.equal([view.chatCharges.length, view.imageCharges.length], [1, 1]);
  assert.is(view.imageCharges[0].data.billed, 56_250);
});

test("the plan's call rate is enforced per account, across its keys, and refused calls are free", async () => {
  const planId = `rpm3_${Date.now()}`;
  await definePlan(gw.ledger, { planId, name: 'Three a minute', quota: 1_000_000, validityDays: 30, requestsPerMinute: 3, models: ['*'] }, 'admin:test');
  const open = async (name: string) => {
    const accountId = await openLedgerAccount(gw.ledger, { name }, 'admin:test');
    await subscribe(gw.ledger, accountId, planId, 'admin:test');
    return accountId;
  };
  const one = await open('rate one');
  const two = await open('rate two');
  const keyA = await issueKey(gw.ledger, one, 'app A', 'admin:test');
  const keyB = await issueKey(gw.ledger, one, 'app B', 'admin:test');
  const keyOther = await issueKey(gw.ledger, two, 'other', 'admin:test');
  await gw.ledger.caughtUp();
  const body = { model: 'alpha-haiku-4.5', messages: userMessage('rate'), max_tokens: 5 };

  const statuses = [];
  for (const key of [keyA, keyB, keyA, keyB]) statuses.push((await chat(gw, key.secret, body)).status);
  assert.equal(statuses, [200, 200, 200, 429], 'the fourth call in a minute is refused, whichever key');
  const other = await chat(gw, keyOther.secret, body);
  assert.is(other.status, 200, 'another account on the same plan has its own allowance');
  assert.is(other.headers.get('x-ratelimit-remaining-requests'), '2');

  const view = await ledgerView(gw, one);
  assert.is(view.chatCharges.length, 3);
  assert.is(view.reservations.length, 3, 'the refused call took no hold');
  assert.is(view.row.reserved, 0);
});

test('a call its account refuses anyway is refused before its prompt is counted (a large prompt costs a zero-quota key nothing)', async () => {
  const acct = await openAccount(gw, { quota: 0 });
  // Counting 400,000 words would take the event loop for a good while; the refusal names the
  // smallest hold of all (one completion token, no prompt), so nothing was counted.
  const body = { model: 'alpha-haiku-4.5', messages: userMessage('toll '.repeat(400_000)), max_tokens: 10 };
  const r = await chat(gw, acct.key, body);
  assert.is(r.status, 402, r.text);
  assert.is(r.json.error.code, 'insufficient_quota');
  assert.match(r.json.error.message, /needs at least 1 tokens; 0 are available/);
  assert.is((await ledgerView(gw, acct.accountId)).chatCharges.length, 0);
});

test.run();
