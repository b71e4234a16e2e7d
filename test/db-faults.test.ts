// The database's faults under traffic (issue 29): a real gateway process reaches PostgreSQL
// through a TCP proxy that cuts every connection, stalls every byte, or slows the link, while
// clients send chat calls and streams. Each case asserts: the process is alive; every call a
// client received whole was charged once and no failed call was charged (except one the gateway
// logged as committed while its connection died); no stream ended in silence; refusals are 503s
// with Retry-After in the error shape; no hold is open after the bound; /readyz answered every
// probe, said not ready during the outage and ready after; calls succeed again soon after the
// restore. PostgreSQL only (embedded PGlite has no connection to lose).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { auditFaults, eventsOnceHoldsClosed, recoveryMs, startFaultRig, startReadyProbe, startTraffic, type FaultRig } from './support/db-faults.ts';
import type { ProxyMode } from './support/tcp-proxy.ts';

const url = process.env.DATABASE_URL;
const STALE_HOLD_MS = 5000;

/** Small bounds, so the cases stay short; the defaults are documented in the README. */
const FAST_BOUNDS = {
  PG_CONNECT_TIMEOUT_MS: '2000',
  PG_STATEMENT_TIMEOUT_MS: '2000',
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
      `${a.errorEvents} stream error events, ${a.holdsReleased} holds released, all holds closed ${closedAfterMs} ms after traffic stopped, ` +
      `recovery ${recovery} ms, longest call started in the fault ${Math.max(0, ...outageCalls.map((o) => o.endedAt - o.startedAt))} ms, ` +
      `readyz ${probe.probes.map((p) => (p.status === 200 ? '+' : p.status === 503 ? '-' : '?')).join('')}`,
  );

  assert.equal(a.successNotChargedOnce, [], `${name}: calls received whole must be charged exactly once`);
  const loggedCommitted = a.failedCharged.filter((id) => r.output().includes(id) && r.output().includes('charge committed although its call failed'));
  assert.equal(a.failedCharged, loggedCommitted, `${name}: a failed call was charged`);
  assert.is(a.silentStreams, 0, `${name}: a stream ended with neither its end nor an error event`);
  assert.is(a.status500, 0, `${name}: a 500 instead of a 503`);
  assert.is(a.badRefusals, 0, `${name}: a 5xx without Retry-After or the error shape`);
  assert.is(a.openHolds, 0, `${name}: holds still open after the bound`);
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
  return { a, outageCalls, faultAt, restoredAt };
}

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

  test('every byte stalled for 8 s: calls end within their bound with a 503 instead of waiting out the stall', async () => {
    const { outageCalls, restoredAt } = await underFault('stall', { kind: 'stall' }, 8000, { failures: true });
    assert.ok(
      outageCalls.some((o) => o.status === 503 && o.endedAt < restoredAt),
      'no call was refused before the stall ended: calls waited it out',
    );
  });

  test('a slow link (200 ms per packet for 4 s): calls slow down, nothing is lost', async () => {
    await underFault('slow', { kind: 'slow', delayMs: 200 }, 4000, { failures: false });
  });
} else {
  // Embedded PGlite has no connection to cut.
  test.skip('database faults (PostgreSQL only: set DATABASE_URL)', () => undefined);
}

test.run();
