// The database's faults under traffic (issue 29): a real gateway process reaches PostgreSQL
// through a TCP proxy that cuts every connection, stalls every byte, or slows the link, while
// clients send chat calls and streams. Each case asserts: the process is alive; every call a
// client received whole was charged once and no failed call is left charged (a charge that
// committed while its reply was lost is voided); no stream ended in silence; refusals are 503s
// with Retry-After in the error shape; no hold is open after the bound; /readyz answered every
// probe, said not ready during the outage and ready after; calls succeed again soon after the
// restore. PostgreSQL only (embedded PGlite has no connection to lose).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { auditFaults, eventsOnceHoldsClosed, oneCall, recoveryMs, startFaultRig, startReadyProbe, startTraffic, type FaultRig } from './support/db-faults.ts';
import { exportEvents, verify } from './stress/support/admin.ts';
import type { StoredEvent } from '../src/eventstore/port.ts';
import type { ProxyMode } from './support/tcp-proxy.ts';

const url = process.env.DATABASE_URL;
const STALE_HOLD_MS = 5000;

/** Small bounds, so the cases stay short; the defaults are documented in docs/deployment.md ("When the database fails"). The ledger
 * deadline is shorter than every fault: with the default (5 s) a call in flight can wait out a 4 s
 * cut and succeed, and when all clients were mid-call at the cut no call failed (seen in CI). */
const FAST_BOUNDS = {
  PG_CONNECT_TIMEOUT_MS: '2000',
  PG_STATEMENT_TIMEOUT_MS: '2000',
  TOLLGATE_LEDGER_DEADLINE_MS: '2000',
  TOLLGATE_READY_TIMEOUT_MS: '2000',
  TOLLGATE_STALE_HOLD_MS: String(STALE_HOLD_MS),
};

let rig: FaultRig | null = null;

async function underFault(name: string, fault: ProxyMode, faultMs: number, expect: { failures: boolean }) {
  const r = rig!;
  const traffic = startTraffic(r, 8);
  const probe = startReadyProbe(r.origin);
  await sleep(2500);
  const faultAt = Date.now();
  r.proxy.mode(fault);
  await sleep(faultMs);
  r.proxy.mode({ kind: 'pass' });
  const restoredAt = Date.now();
  // Service is back once a call started after the restore succeeds.
  const backBy = Date.now() + 30_000;
  while (recoveryMs(traffic.outcomes, restoredAt) === null && Date.now() < backBy) await sleep(200);
  await sleep(1500);
  await traffic.stop();
  await probe.stop();
  assert.is(r.exited(), null, `${name}: the gateway died:\n${r.output().slice(-3000)}`);

  const { events, closedAfterMs } = await eventsOnceHoldsClosed(r.admin, STALE_HOLD_MS + 25_000);
  const a = auditFaults(traffic.outcomes, events);
  const recovery = recoveryMs(traffic.outcomes, restoredAt);
  const outageCalls = traffic.outcomes.filter((o) => o.startedAt >= faultAt && o.startedAt < restoredAt);
  if (process.env.FAULTS_VERBOSE)
    console.log(
      JSON.stringify(
        traffic.outcomes
          .filter((o) => o.endedAt >= faultAt && o.startedAt < restoredAt)
          .map((o) => [o.stream, o.status, o.startedAt - faultAt, o.endedAt - o.startedAt, o.complete]),
      ),
    );
  console.log(
    `${name}: ${a.calls} calls, ${a.succeeded} ok, ${a.failed} failed (${outageCalls.filter((o) => !o.complete).length} started in the ${faultMs} ms fault), ` +
      `${a.errorEvents} stream error events, ${a.holdsReleased} holds released, ${a.voids} charges voided, all holds closed ${closedAfterMs} ms after traffic stopped, ` +
      `recovery ${recovery} ms, longest call started in the fault ${Math.max(0, ...outageCalls.map((o) => o.endedAt - o.startedAt))} ms, ` +
      `readyz ${probe.probes.map((p) => (p.status === 200 ? '+' : p.status === 503 ? '-' : '?')).join('')}`,
  );

  assert.equal(a.successNotChargedOnce, [], `${name}: calls received whole must be charged exactly once`);
  assert.equal(a.failedCharged, [], `${name}: a failed call was left charged`);
  assert.is(a.silentStreams, 0, `${name}: a stream ended with neither its end nor an error event`);
  assert.is(a.status500, 0, `${name}: a 500 instead of a 503`);
  assert.is(a.badRefusals, 0, `${name}: a 5xx without Retry-After or the error shape`);
  assert.is(a.openHolds, 0, `${name}: holds still open after the bound: ${a.openHoldDetails.join('; ')}`);
  assert.ok(recovery !== null, `${name}: no call succeeded after the restore`);
  if (expect.failures) assert.ok(a.failed > 0, `${name}: the fault had no effect on the calls`);

  // /readyz answered every probe (a probe waits up to 10 s), said so during the outage, and is ready again.
  assert.ok(
    probe.probes.every((p) => p.status !== 0),
    `${name}: /readyz left a probe unanswered`,
  );
  assert.ok(
    probe.probes.every((p) => !/ECONN|127\.0\.0\.1|error/i.test(p.body)),
    `${name}: /readyz told the public the database's error`,
  );
  if (expect.failures)
    assert.ok(
      probe.probes.some((p) => p.at >= faultAt && p.at < restoredAt && p.status === 503),
      `${name}: /readyz never said not ready during the outage`,
    );
  const ready = await fetch(`${r.origin}/readyz`);
  assert.is(ready.status, 200, `${name}: not ready after the restore`);
  return { a, events, outageCalls, faultAt, restoredAt };
}

/** The charges voided because their reply was lost that were prepared after the fault began (+50 ms). */
function lateVoids(events: StoredEvent[], faultAt: number): StoredEvent[] {
  const chargeByHold = new Map(events.filter((e) => e.type === 'ChatCharged').map((e) => [(e.data as { holdId: string }).holdId, e]));
  return events
    .filter((e) => e.type === 'ChargeAdjusted' && String((e.data as { correctionId?: string }).correctionId).startsWith('reply_lost:'))
    .map((e) => chargeByHold.get(String((e.data as { correctionId: string }).correctionId).slice('reply_lost:'.length)))
    .filter((c): c is StoredEvent => !!c && Date.parse(c.timestamp) > faultAt + 50);
}

const describeLate = (charges: StoredEvent[], faultAt: number, fault: string) =>
  charges.map((c) => `${c.id} prepared ${Date.parse(c.timestamp) - faultAt} ms into the ${fault}`);

if (url) {
  test.before(async () => {
    rig = await startFaultRig({ pg: new URL(url), env: FAST_BOUNDS });
  });
  test.after(async () => {
    await rig?.stop();
  });

  test('every connection cut for 4 s: the gateway lives, refuses with 503 + Retry-After, recovers', async () => {
    await underFault('cut', { kind: 'cut' }, 4000, { failures: true });
  });

  test('every byte stalled for 8 s: calls end within their bound with a 503 instead of waiting out the stall, and no charge prepared after it began is appended (then voided)', async () => {
    const { a, events, faultAt, outageCalls, restoredAt } = await underFault('stall', { kind: 'stall' }, 8000, { failures: true });
    assert.ok(
      outageCalls.some((o) => o.status === 503 && o.endedAt < restoredAt),
      'no call was refused before the stall ended: calls waited it out',
    );
    // A charge queued behind the stalled append is withdrawn once its caller has its 503, and one
    // prepared after the stall began reaches the server only after its deadline, which refuses it
    // (notAfter): none of those is appended only to be voided. A charge whose statement reached the
    // server just before the stall may commit with its answer held: voided, the last resort.
    assert.equal(
      describeLate(lateVoids(events, faultAt), faultAt, 'stall'),
      [],
      `stall: charges appended after their calls' 503 (then voided), of ${a.voids} voids`,
    );
  });

  test('the server frozen for 8 s, then reading what it was sent (even by clients that gave up): no charge sent after the freeze began commits once its call was answered 503', async () => {
    const { a, events, faultAt } = await underFault('freeze', { kind: 'freeze' }, 8000, { failures: true });
    // A charge whose statement reached the server before the freeze may commit with its answer
    // frozen: voided, the last resort. One prepared after the freeze began reaches the server
    // only after its call's deadline: withdrawn, or refused by the deadline it carries.
    assert.equal(
      describeLate(lateVoids(events, faultAt), faultAt, 'freeze'),
      [],
      `freeze: charges appended after their calls' 503 (then voided), of ${a.voids} voids`,
    );
  });

  test('a slow link (200 ms per packet for 4 s): calls slow down, nothing is lost', async () => {
    await underFault('slow', { kind: 'slow', delayMs: 200 }, 4000, { failures: false });
  });

  test('a charge that commits while its reply is lost is voided: the caller got an error, the account ends uncharged', async () => {
    const r = rig!;
    // A stream's hold is committed before its first chunk. From then on the server hears every
    // statement but its answers are held back: the charge commits, the gateway never learns it.
    const o = await oneCall(r.baseUrl, r.account.key, true, () => r.proxy.mode({ kind: 'deaf' }));
    r.proxy.mode({ kind: 'pass' });
    assert.ok(o.errorEvent, `the stream did not end with an error event: ${JSON.stringify(o)}`);
    const charged = (events: StoredEvent[]) => events.some((e) => e.type === 'ChatCharged' && (e.data as { requestId: string }).requestId === o.requestId);
    const voided = (events: StoredEvent[]) => events.some((e) => e.type === 'ChargeAdjusted' && (e.data as { requestId: string }).requestId === o.requestId);
    let events: StoredEvent[] = [];
    for (const until = Date.now() + 30_000; Date.now() < until; await sleep(250)) {
      events = await exportEvents(r.admin).catch(() => events);
      if (charged(events) && voided(events)) break;
    }
    // The charge did commit (else this case tested nothing), and it is voided, once.
    assert.ok(charged(events), 'the charge never committed: the fault missed its moment');
    const a = auditFaults([o], events);
    assert.equal(a.failedCharged, [], 'the failed call was left charged');
    assert.is(
      events.filter((e) => e.type === 'ChargeAdjusted' && (e.data as { requestId: string }).requestId === o.requestId).length,
      1,
      'the charge was voided more or less than once',
    );
    const report = await verify(r.admin);
    assert.ok(report.ok, `verify failed: ${JSON.stringify(report).slice(0, 1000)}`);
  });
} else {
  // Embedded PGlite has no connection to cut.
  test.skip('database faults (PostgreSQL only: set DATABASE_URL)', () => undefined);
}

test.run();
