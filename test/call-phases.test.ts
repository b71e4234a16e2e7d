// Where a call's time goes (TOLLGATE_CALL_PHASES=on, src/tracing/call-phases.ts): a timeline's
// phases add up to the time between its first and last mark; a real `tollgate serve` process
// reports every phase of a chat call once per call on /metrics, and the phases of the calls add
// up to no more than the time their callers waited. Off, nothing is recorded or listed.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { addPhase, CHAT_CALL_PHASES, phaseTotals, recordCallPhases, startTimeline, NO_TIMELINE } from '../src/tracing/call-phases.ts';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { eventually } from './support/http.ts';

const engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';

const unit = suite('call phases: the recorder');

unit('off: a timeline is the no-op one and nothing is added', () => {
  recordCallPhases(false);
  assert.is(startTimeline(), NO_TIMELINE);
  addPhase('auth', 5);
  assert.equal(phaseTotals(), []);
});

unit("on: consecutive marks split the time between the first and the last, and a phase's marks add up", async () => {
  recordCallPhases(true);
  try {
    const started = performance.now();
    const timeline = startTimeline();
    await sleep(5);
    timeline.mark('auth');
    await sleep(10);
    timeline.mark('body');
    await sleep(5);
    timeline.mark('auth');
    const elapsed = performance.now() - started;
    const totals = new Map(phaseTotals().map((t) => [t.phase, t]));
    assert.is(totals.get('auth')?.count, 2);
    assert.is(totals.get('body')?.count, 1);
    const sum = (totals.get('auth')!.seconds + totals.get('body')!.seconds) * 1000;
    assert.ok(sum <= elapsed, `phases (${sum} ms) within the elapsed time (${elapsed} ms)`);
    // A timer may fire up to a millisecond early by performance.now()'s clock (libuv counts whole milliseconds).
    assert.ok(sum >= 17, `phases (${sum} ms) hold the three waits`);
    assert.ok(totals.get('body')!.seconds * 1000 >= 9, 'the middle wait is the second phase');
  } finally {
    recordCallPhases(false);
  }
});

unit.run();

/** Prometheus samples of one metric family: label value of `phase` → value. */
function phaseSamples(text: string, name: string): Map<string, number> {
  return new Map([...text.matchAll(new RegExp(`^${name}\\{phase="([a-z_]+)"\\} (\\S+)$`, 'gm'))].map((m) => [m[1], Number(m[2])]));
}

const served = suite(`call phases on a real gateway (${engine})`);
let gw: GatewayProcess;
let metricsUrl: string;
served.before(async () => {
  gw = await spawnGateway({ TOLLGATE_CALL_PHASES: 'on', TOLLGATE_METRICS_PORT: '0' });
  // The metrics port is logged once it listens, which may come just after the gateway is ready.
  const port = await eventually(
    async () => /"port":(\d+)[^\n]*"msg":"metrics listening"/.exec(gw.output())?.[1],
    (p) => p !== undefined,
    10_000,
  );
  metricsUrl = `http://127.0.0.1:${port}/metrics`;
});
served.after(async () => {
  await gw?.stop();
});

served('each phase of a chat call is marked once per call, and the phases add up to no more than the callers waited', async () => {
  const scrape = async () => {
    const text = await (await fetch(metricsUrl)).text();
    return { seconds: phaseSamples(text, 'tollgate_call_phase_seconds_total'), marks: phaseSamples(text, 'tollgate_call_phase_marks_total') };
  };
  const before = await scrape();
  const calls = 3;
  let waited = 0;
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    const res = await fetch(`${gw.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gen-6-terra', messages: [{ role: 'user', content: `time me ${i}` }], max_tokens: 8 }),
    });
    assert.is(res.status, 200);
    await res.arrayBuffer();
    waited += performance.now() - started;
  }
  const after = await scrape();
  let phasesMs = 0;
  for (const phase of CHAT_CALL_PHASES) {
    assert.is((after.marks.get(phase) ?? 0) - (before.marks.get(phase) ?? 0), calls, `${phase} marked once per call`);
    phasesMs += ((after.seconds.get(phase) ?? 0) - (before.seconds.get(phase) ?? 0)) * 1000;
  }
  assert.ok(phasesMs > 0 && phasesMs <= waited, `the phases (${phasesMs.toFixed(2)} ms) within what the callers waited (${waited.toFixed(2)} ms)`);
  // The ledger's steps: every call appended its hold and charge (one append or two).
  const appends = (after.marks.get('ledger_append') ?? 0) - (before.marks.get('ledger_append') ?? 0);
  assert.ok(appends >= calls && appends <= 2 * calls, `${appends} appends for ${calls} calls`);
  assert.ok((after.marks.get('store_sql') ?? 0) - (before.marks.get('store_sql') ?? 0) >= calls, 'the SQL statements timed');
  assert.ok((after.marks.get('access_log') ?? 0) - (before.marks.get('access_log') ?? 0) >= calls, 'the log lines timed');
});

served.run();
