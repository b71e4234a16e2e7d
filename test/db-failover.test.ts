// A database failover under traffic (issue 29): a primary and a synchronous streaming standby,
// two PostgreSQL clusters on this machine made with Debian's tools. A gateway process and a
// `tollgate projector` process reach the primary through a TCP proxy. Under chat and stream
// traffic the primary goes down, the standby is promoted and the proxy moves to it, as a managed
// database moves its address. Asserted: both processes stay up and reconnect on their own; every
// call a client received whole is charged once on the new primary (what was acknowledged before
// the failover survived it); no failed call is charged; no hold stays open; verify passes.
// PostgreSQL only (DATABASE_URL set) and only where Debian's cluster tools are installed.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { auditFaults, eventsOnceHoldsClosed, recoveryMs, startFaultRig, startTraffic, type FaultRig } from './support/db-faults.ts';
import { clusterToolsVersion, createCluster, createStandby, dropAll, promote, stopCluster, type Cluster } from './support/pg-cluster.ts';
import { verify } from './stress/support/admin.ts';

const url = process.env.DATABASE_URL;
const tools = clusterToolsVersion();
// Ports of their own, away from the shared server's 5432.
const base = 54_300 + (process.pid % 40) * 2;

if (url && tools) {
  let rig: FaultRig | null = null;
  const suffix = `${process.pid}`;
  process.once('exit', dropAll);

  test('primary down, synchronous standby promoted, proxy moved: nothing acknowledged is lost, both processes reconnect', async () => {
    let primary: Cluster | undefined;
    let standby: Cluster | undefined;
    try {
      primary = createCluster(`tgfo_primary_${suffix}`, base, { synchronous_standby_names: 'tgfo_standby', synchronous_commit: 'on' });
      standby = createStandby(primary, `tgfo_standby_${suffix}`, base + 1, 'tgfo_standby');
      rig = await startFaultRig({
        pg: new URL(primary.url),
        projector: true,
        env: { PG_CONNECT_TIMEOUT_MS: '2000', PG_STATEMENT_TIMEOUT_MS: '3000', TOLLGATE_STALE_HOLD_MS: '5000' },
      });
      const traffic = startTraffic(rig, 8);
      await sleep(3000);
      const before = traffic.outcomes.filter((o) => o.complete).length;

      // The failover: the primary dies, the standby is promoted, the address moves.
      rig.proxy.mode({ kind: 'cut' });
      stopCluster(primary, 'immediate');
      promote(standby);
      rig.proxy.target(standby.port);
      rig.proxy.mode({ kind: 'pass' });
      const movedAt = Date.now();

      const backBy = Date.now() + 60_000;
      while (recoveryMs(traffic.outcomes, movedAt) === null && Date.now() < backBy) await sleep(200);
      await sleep(2000);
      await traffic.stop();
      assert.is(rig.exited(), null, `a process died:\n${rig.output().slice(-3000)}`);

      const { events, closedAfterMs } = await eventsOnceHoldsClosed(rig.admin, 30_000);
      const a = auditFaults(traffic.outcomes, events);
      const recovery = recoveryMs(traffic.outcomes, movedAt);
      console.log(
        `failover: ${before} calls succeeded before it; ${a.calls} calls, ${a.succeeded} ok, ${a.failed} failed, ${a.errorEvents} stream error events; ` +
          `recovery ${recovery} ms after the address moved; holds closed ${closedAfterMs} ms after traffic stopped, ${a.holdsReleased} released`,
      );
      assert.ok(before > 0, 'no call succeeded before the failover');
      assert.ok(recovery !== null, 'no call succeeded after the failover');
      assert.equal(a.successNotChargedOnce, [], 'a call received whole is not charged once on the new primary');
      const logged = a.failedCharged.filter((id) => rig!.output().includes(id) && rig!.output().includes('charge committed although its call failed'));
      assert.equal(a.failedCharged, logged, 'a failed call was charged');
      assert.is(a.silentStreams, 0, 'a stream ended in silence');
      assert.is(a.status500, 0, 'a 500 instead of a 503');
      assert.is(a.openHolds, 0, `holds still open after the bound: ${a.openHoldDetails.join('; ')}`);

      // The projector took its lease again on the new primary: the read models follow the log.
      const report = await verify(rig.admin);
      assert.ok(report.ok, `verify failed: ${JSON.stringify(report).slice(0, 1000)}`);
      // Its log line may still be in the pipe when verify answers: read the output until it arrives.
      const leaseTwice = /\[projector\][^\n]*projector lease acquired; projecting[\s\S]*\[projector\][^\n]*projector lease acquired; projecting/;
      for (const until = Date.now() + 20_000; !leaseTwice.test(rig.output()) && Date.now() < until;) await sleep(250);
      const projectorLines = rig
        .output()
        .split('\n')
        .filter((l) => l.startsWith('[projector]'));
      assert.match(rig.output(), leaseTwice, `the projector did not take its lease again:\n${projectorLines.slice(-30).join('\n')}`);
    } finally {
      await rig?.stop().catch(() => undefined);
      dropAll();
    }
  });
} else {
  // Needs PostgreSQL (DATABASE_URL) and Debian's cluster tools (pg_createcluster).
  test.skip('database failover (PostgreSQL with Debian cluster tools only)', () => undefined);
}

test.run();
