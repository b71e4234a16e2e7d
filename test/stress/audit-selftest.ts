// The audit's own test: a consistent little ledger passes, and each kind of damage the stress
// suites look for (a lost charge, a double charge, a charged failure, a hold left open, a phantom
// charge, a read model that drifted, ...) is reported. Without this, a stress run that "passes"
// could be an audit that cannot fail.
//
//   node --import tsx test/stress/audit-selftest.ts
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { auditRun, auditAccountRows } from './support/audit.ts';
import type { CallRecord } from './support/load.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';
import { chatCharge, imageCharge } from '../../src/money/pricing.ts';

const ACCOUNTS = new Set(['a1']);
let position = 0;

function ev(type: string, data: Record<string, unknown>): StoredEvent {
  position++;
  return {
    id: `e${position}`,
    type,
    stream: `account-${String(data.accountId ?? 'x')}`,
    revision: position,
    position,
    timestamp: new Date(0).toISOString(),
    data,
    metadata: { correlationId: 'c', causationId: null, actor: 't' },
    prevHash: '',
    hash: `h${position}`,
  };
}

const rec = (requestId: string, kind: CallRecord['kind'], outcome: CallRecord['outcome'], extra: Partial<CallRecord> = {}): CallRecord => ({
  requestId,
  kind,
  accountId: 'a1',
  model: 'cx/gen-6-luna',
  startedAt: 0,
  endedAt: 1,
  outcome,
  epoch: 0,
  ...extra,
});

const reserve = (requestId: string, holdId: string, amount = 10_000) =>
  ev('QuotaReserved', { accountId: 'a1', holdId, requestId, keyId: 'k', model: 'cx/gen-6-luna', kind: 'chat', amount, expiresAt: '2100-01-01T00:00:00Z' });
const chatCharged = (requestId: string, holdId: string, prompt: number, completion: number, streamed = false, milli = 1000) =>
  ev('ChatCharged', {
    accountId: 'a1',
    holdId,
    requestId,
    keyId: 'k',
    model: 'cx/gen-6-luna',
    multiplierMilli: milli,
    reserved: 10_000,
    billed: chatCharge(prompt, completion, milli),
    fromQuota: chatCharge(prompt, completion, milli),
    fromExtra: 0,
    promptTokens: prompt,
    completionTokens: completion,
    reasoningEffort: null,
    api: 'chat.completions',
    streamed,
    aborted: false,
  });
const imageCharged = (requestId: string, holdId: string) =>
  ev('ImageCharged', {
    accountId: 'a1',
    holdId,
    requestId,
    keyId: 'k',
    model: 'alpha-haiku-4.5',
    multiplierMilli: 1000,
    reserved: 45_000,
    billed: imageCharge(1000),
    fromQuota: imageCharge(1000),
    fromExtra: 0,
    images: 1,
    tokensPerImage: 45_000,
    size: '1024x1024',
    edit: false,
  });
const released = (requestId: string, holdId: string, reason: string, amount = 10_000) =>
  ev('ReservationReleased', { accountId: 'a1', holdId, requestId, amount, reason });

/** A run that did everything right: delivered calls charged once, failures not, cut calls either way. */
function consistentRun() {
  position = 0;
  const records: CallRecord[] = [
    rec('ok-chat', 'chat', 'ok', { usage: { prompt: 10, completion: 20 }, billedHeader: 30 }),
    rec('ok-stream', 'stream', 'ok', { usage: { prompt: 5, completion: 7 } }),
    rec('ok-image', 'image', 'ok', { model: 'alpha-haiku-4.5', billedHeader: 45_000 }),
    rec('bad-502', 'chat', 'http_error', { status: 502, errorCode: 'upstream_error' }),
    rec('bad-402', 'chat', 'http_error', { status: 402, errorCode: 'insufficient_quota' }),
    rec('cut-charged', 'chat', 'conn_error'),
    rec('cut-open', 'stream', 'cut', { chunks: 4 }),
  ];
  const events: StoredEvent[] = [
    ev('ModelPriced', { modelId: 'cx/gen-6-luna', multiplierMilli: 1000, status: 'ACTIVE', alias: 'gen-6-luna' }),
    reserve('ok-chat', 'h1'),
    chatCharged('ok-chat', 'h1', 10, 20),
    reserve('ok-stream', 'h2'),
    chatCharged('ok-stream', 'h2', 5, 7, true),
    reserve('ok-image', 'h3', 45_000),
    imageCharged('ok-image', 'h3'),
    reserve('bad-502', 'h4'),
    released('bad-502', 'h4', 'upstream_error'),
    reserve('cut-charged', 'h5'),
    chatCharged('cut-charged', 'h5', 3, 3),
    reserve('cut-open', 'h6'),
  ];
  return { records, events };
}

test('a consistent run has no violations; cut calls are counted, not blamed', () => {
  const { records, events } = consistentRun();
  const r = auditRun(records, events, { accounts: ACCOUNTS, final: false });
  assert.equal(r.violations, []);
  assert.is(r.figures.succeeded, 3);
  assert.is(r.figures.failed, 4);
  assert.is(r.figures.chargedButUndelivered, 1);
  assert.is(r.figures.uncharged_stream_chunks, 4);
  assert.is(r.figures.openHolds, 1);
  assert.is(r.figures.tokensLost, 0);
  assert.is(r.figures.tokensDoubleCharged, 0);
});

test('final: an open hold is a violation; expired after the sweep it is not', () => {
  const { records, events } = consistentRun();
  assert.match(auditRun(records, events, { accounts: ACCOUNTS, final: true }).violations.join('\n'), /h6 .* still open after the final sweep/);
  events.push(released('cut-open', 'h6', 'expired'));
  const r = auditRun(records, events, { accounts: ACCOUNTS, final: true });
  assert.equal(r.violations, []);
  assert.is(r.figures.holdsExpired, 1);
});

test('a delivered call without a charge is lost tokens', () => {
  const { records, events } = consistentRun();
  const r = auditRun(
    records,
    events.filter((e) => !(e.type === 'ChatCharged' && e.data.requestId === 'ok-chat')),
    { accounts: ACCOUNTS, final: false },
  );
  assert.is(r.figures.tokensLost, 30);
  assert.match(r.violations.join('\n'), /ok-chat chat delivered .* not charged/);
});

test('a delivered image without a charge is lost tokens (priced from the ledger)', () => {
  const { records, events } = consistentRun();
  const r = auditRun(
    records,
    events.filter((e) => e.type !== 'ImageCharged'),
    { accounts: ACCOUNTS, final: false },
  );
  assert.is(r.figures.tokensLost, 45_000);
});

test('a charge below what the client was told it used is lost tokens', () => {
  const { records, events } = consistentRun();
  const i = events.findIndex((e) => e.type === 'ChatCharged' && e.data.requestId === 'ok-stream');
  events[i] = { ...events[i], data: { ...events[i].data, completionTokens: 5, billed: 10, fromQuota: 10 } };
  const r = auditRun(records, events, { accounts: ACCOUNTS, final: false });
  assert.is(r.figures.tokensLost, 2);
  assert.match(r.violations.join('\n'), /client saw 5\+7 tokens, charged 5\+5/);
});

test('a second charge for one call is double-charged tokens', () => {
  const { records, events } = consistentRun();
  events.push(reserve('ok-chat', 'h1b'), chatCharged('ok-chat', 'h1b', 10, 20));
  const r = auditRun(records, events, { accounts: ACCOUNTS, final: false });
  assert.is(r.figures.tokensDoubleCharged, 30);
  assert.match(r.violations.join('\n'), /ok-chat .* charged 2 times/);
});

test('a failed call that was charged is a violation', () => {
  const { records, events } = consistentRun();
  events.push(reserve('bad-402', 'h7'), chatCharged('bad-402', 'h7', 1, 1));
  assert.match(
    auditRun(records, events, { accounts: ACCOUNTS, final: false }).violations.join('\n'),
    /bad-402 failed with http 402 insufficient_quota and was charged/,
  );
});

test('a hold left open by a call the gateway answered is a violation', () => {
  const { records, events } = consistentRun();
  const r = auditRun(
    records,
    events.filter((e) => !(e.type === 'ReservationReleased' && e.data.holdId === 'h4')),
    { accounts: ACCOUNTS, final: false },
  );
  assert.match(r.violations.join('\n'), /hold h4 open although its call ended with http_error 502/);
});

test('a hold closed twice, a charge nobody asked for and a settle of an unknown hold are violations', () => {
  const { records, events } = consistentRun();
  events.push(released('ok-chat', 'h1', 'expired'), reserve('ghost', 'h9'), chatCharged('ghost', 'h9', 1, 1), released('x', 'h10', 'expired'));
  const v = auditRun(records, events, { accounts: ACCOUNTS, final: false }).violations.join('\n');
  assert.match(v, /hold h1 \(ok-chat\) settled\/released 2 times/);
  assert.match(v, /charge for request ghost that no client sent/);
  assert.match(v, /settle\/release of hold h10 that was never reserved/);
});

test('one logical call (same Idempotency-Key) charged on two attempts is double-charged', () => {
  const { records, events } = consistentRun();
  records.find((r) => r.requestId === 'cut-charged')!.idempotencyKey = 'k1';
  records.push(rec('retry-1', 'chat', 'ok', { idempotencyKey: 'k1', usage: { prompt: 3, completion: 3 } }));
  events.push(reserve('retry-1', 'h11'), chatCharged('retry-1', 'h11', 3, 3));
  const r = auditRun(records, events, { accounts: ACCOUNTS, final: false });
  assert.match(r.violations.join('\n'), /Idempotency-Key k1: 2 of its 2 attempts were charged/);
  assert.is(r.figures.tokensDoubleCharged, 6);
});

test('a replay stands for its charged first attempt; a charged replay is a violation', () => {
  const { records, events } = consistentRun();
  records.find((r) => r.requestId === 'cut-charged')!.idempotencyKey = 'k2';
  records.push(rec('retry-2', 'chat', 'ok', { idempotencyKey: 'k2', replayed: true, usage: { prompt: 3, completion: 3 } }));
  assert.equal(auditRun(records, events, { accounts: ACCOUNTS, final: false }).violations, []);
  events.push(reserve('retry-2', 'h12'), chatCharged('retry-2', 'h12', 3, 3));
  assert.match(auditRun(records, events, { accounts: ACCOUNTS, final: false }).violations.join('\n'), /retry-2 was a replay and was charged/);
});

test('the account read model must equal the fold of its events', () => {
  const { events } = consistentRun();
  const billed = 30 + 12 + 45_000 + 6;
  const good = { account_id: 'a1', quota_used: billed, extra_used: 0, reserved: 10_000, open_holds: 1 };
  assert.equal(auditAccountRows([good], events), []);
  assert.match(auditAccountRows([{ ...good, reserved: 0, open_holds: 0 }], events).join('\n'), /read model .* but events say/);
  assert.match(auditAccountRows([{ ...good, quota_used: billed - 1 }], events).join('\n'), /account a1/);
});

test.run();
