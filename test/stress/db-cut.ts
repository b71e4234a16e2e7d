// The crash rate of issue 29, measured again: one gateway process behind a TCP proxy to
// PostgreSQL, 10 closed-loop clients (half streaming); the proxy passes traffic for 5 s, cuts
// every connection for 4 s, passes for 6 s, stalls every byte for 8 s, then passes again. Each
// run records whether the process survived, what the clients saw and what the ledger holds.
//
//   node --import tsx test/stress/db-cut.ts                    # 12 runs of this checkout
//   node --import tsx test/stress/db-cut.ts --runs 3 --source /tmp/tollgate-old
//
// --source runs another checkout's gateway (e.g. the code before the fix: `git archive <commit> |
// tar -x -C /tmp/tollgate-old` and a node_modules link). DATABASE_URL defaults to the local server.
import { setTimeout as sleep } from 'node:timers/promises';
import { auditFaults, eventsOnceHoldsClosed, recoveryMs, startFaultRig, startReadyProbe, startTraffic } from '../support/db-faults.ts';

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const runs = Number(arg('runs') ?? 12);
const source = arg('source');
const pg = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test');
/** How long after the traffic stops open holds are waited for (the old code leaves them for 15 min). */
const HOLD_WAIT_MS = Number(process.env.DB_CUT_HOLD_WAIT_MS ?? 20_000);

interface Run {
  run: number;
  survived: boolean;
  death: string;
  calls: number;
  ok: number;
  failed: number;
  cutFailedPerS: number;
  stallFailedPerS: number;
  silentStreams: number;
  errorEvents: number;
  status500: number;
  refusalsWithRetryAfter: number;
  recoveryCutMs: number | null;
  recoveryStallMs: number | null;
  longestStallCallMs: number;
  /** The longest call that was running at some moment of the stall (started before it or in it). */
  longestCallInStallMs: number;
  /** Charges voided because their call failed after they committed. */
  voids: number;
  readyUnanswered: number;
  readyProbes: number;
  holdsReleased: number;
  openHoldsAfterWait: number;
  holdsClosedAfterMs: number | null;
  successNotChargedOnce: number;
  failedCharged: number;
}

async function oneRun(run: number): Promise<Run> {
  const rig = await startFaultRig({ pg, cwd: source, tokenDelayMs: 25 });
  try {
    const traffic = startTraffic(rig, 10);
    const probe = startReadyProbe(rig.origin, 500, 3000);
    await sleep(5000);
    const cutAt = Date.now();
    rig.proxy.mode({ kind: 'cut' });
    await sleep(4000);
    rig.proxy.mode({ kind: 'pass' });
    const cutEnd = Date.now();
    await sleep(6000);
    const stallAt = Date.now();
    rig.proxy.mode({ kind: 'stall' });
    await sleep(8000);
    rig.proxy.mode({ kind: 'pass' });
    const stallEnd = Date.now();
    await sleep(6000);
    await traffic.stop();
    await probe.stop();
    const survived = rig.exited() === null;
    const death = survived
      ? ''
      : (/(Unhandled 'error' event|Connection terminated unexpectedly|read ECONNRESET)/.exec(rig.output())?.[1] ?? rig.exited() ?? '');
    const o = traffic.outcomes;
    const failedIn = (from: number, to: number) => o.filter((c) => !c.complete && c.startedAt >= from && c.startedAt < to).length;
    const { events, closedAfterMs } = survived ? await eventsOnceHoldsClosed(rig.admin, HOLD_WAIT_MS) : { events: [], closedAfterMs: null };
    const a = auditFaults(o, events);
    return {
      run,
      survived,
      death,
      calls: a.calls,
      ok: a.succeeded,
      failed: a.failed,
      cutFailedPerS: failedIn(cutAt, cutEnd) / ((cutEnd - cutAt) / 1000),
      stallFailedPerS: failedIn(stallAt, stallEnd) / ((stallEnd - stallAt) / 1000),
      silentStreams: a.silentStreams,
      errorEvents: a.errorEvents,
      status500: a.status500,
      refusalsWithRetryAfter: o.filter((c) => c.status >= 500 && c.retryAfter !== null).length,
      recoveryCutMs: recoveryMs(
        o.filter((c) => c.startedAt < stallAt),
        cutEnd,
      ),
      recoveryStallMs: recoveryMs(o, stallEnd),
      longestStallCallMs: Math.max(0, ...o.filter((c) => c.startedAt >= stallAt && c.startedAt < stallEnd).map((c) => c.endedAt - c.startedAt)),
      longestCallInStallMs: Math.max(0, ...o.filter((c) => c.endedAt >= stallAt && c.startedAt < stallEnd).map((c) => c.endedAt - c.startedAt)),
      voids: survived ? a.voids : -1,
      readyUnanswered: probe.probes.filter((p) => p.status === 0).length,
      readyProbes: probe.probes.length,
      holdsReleased: a.holdsReleased,
      openHoldsAfterWait: survived ? a.openHolds : -1,
      holdsClosedAfterMs: closedAfterMs,
      successNotChargedOnce: survived ? a.successNotChargedOnce.length : -1,
      failedCharged: survived ? a.failedCharged.length : -1,
    };
  } finally {
    await rig.stop();
  }
}

const results: Run[] = [];
for (let i = 1; i <= runs; i++) {
  const r = await oneRun(i);
  results.push(r);
  console.log(JSON.stringify(r));
}
const survived = results.filter((r) => r.survived);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const fin = (xs: Array<number | null>) => xs.filter((x): x is number => x !== null);
console.log(
  `\n${source ?? 'this checkout'}: ${results.length - survived.length} of ${results.length} runs crashed; ` +
    `survivors: recovery after cut ${mean(fin(survived.map((r) => r.recoveryCutMs))).toFixed(0)} ms, after stall ${mean(fin(survived.map((r) => r.recoveryStallMs))).toFixed(0)} ms (mean); ` +
    `failed calls per second of cut ${mean(survived.map((r) => r.cutFailedPerS)).toFixed(1)}, of stall ${mean(survived.map((r) => r.stallFailedPerS)).toFixed(1)}; ` +
    `longest call started in the stall ${Math.max(0, ...survived.map((r) => r.longestStallCallMs))} ms, running during it ${Math.max(0, ...survived.map((r) => r.longestCallInStallMs ?? 0))} ms; ` +
    `silent streams ${survived.reduce((n, r) => n + r.silentStreams, 0)}, 500s ${survived.reduce((n, r) => n + r.status500, 0)}, ` +
    `readyz unanswered ${survived.reduce((n, r) => n + r.readyUnanswered, 0)} of ${survived.reduce((n, r) => n + r.readyProbes, 0)}; ` +
    `holds open ${HOLD_WAIT_MS / 1000} s after: ${survived.reduce((n, r) => n + Math.max(0, r.openHoldsAfterWait), 0)}; ` +
    `all closed after (mean) ${mean(fin(survived.map((r) => r.holdsClosedAfterMs))).toFixed(0)} ms; ` +
    `200s not charged once ${survived.reduce((n, r) => n + r.successNotChargedOnce, 0)}, failed calls left charged (net) ${survived.reduce((n, r) => n + r.failedCharged, 0)}, charges voided ${survived.reduce((n, r) => n + Math.max(0, r.voids ?? 0), 0)}`,
);
process.exit(0);
