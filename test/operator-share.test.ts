// Operator work keeps to its share of the time (TOLLGATE_OPERATOR_SHARE, src/audit/pacing.ts):
// after a step that took t it rests t × (1 − share) / share, it tells /metrics what it worked and
// rested, and a share outside (0, 1] stops the gateway at its start with the setting named.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Pacer, operatorWorkTotals, setOperatorShare } from '../src/audit/pacing.ts';
import { restFor } from '../src/next-turn.ts';
import { settingsFromEnv } from '../src/config.ts';
import { createMetrics } from '../src/wiring/metrics.ts';
import { writeEventLog } from '../src/audit/event-export.ts';
import type { Ledger } from '../src/ledger/ledger.ts';

const test = suite('operator share');

/** Holds the thread for `ms` (a step of operator work that never gives the loop back). */
const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

test('a pacer with a share of 0.25 rests three times as long as it worked; the totals count both', async () => {
  const before = operatorWorkTotals();
  const pacer = new Pacer(undefined, 0.25);
  const started = performance.now();
  let worked = 0;
  try {
    for (let i = 0; i < 6; i++) {
      const t = performance.now();
      busy(5);
      worked += performance.now() - t;
      await pacer.step();
    }
  } finally {
    pacer.stop();
  }
  const wall = performance.now() - started;
  assert.ok(pacer.sleptMs >= 3 * worked - 2, `rested ${pacer.sleptMs.toFixed(1)} ms after ${worked.toFixed(1)} ms of work`);
  assert.ok(wall >= 4 * worked - 2, `the work took ${wall.toFixed(1)} ms of wall time for ${worked.toFixed(1)} ms of work`);
  const after = operatorWorkTotals();
  assert.ok(after.workingMs - before.workingMs >= worked, 'the working total has the steps');
  assert.ok(Math.abs(after.restingMs - before.restingMs - pacer.sleptMs) < 1e-6, 'the resting total has the rests');
});

test('at the head of the log a pacer does not rest; the rest owed waits for the next full page', async () => {
  const pacer = new Pacer(undefined, 0.25);
  try {
    busy(5);
    await pacer.step({ atHead: true });
    assert.is(pacer.sleptMs, 0, 'no rest after the page that reached the head');
    busy(5);
    await pacer.step();
    assert.ok(pacer.sleptMs >= 3 * 10 - 2, `both steps' rest taken after the full page (${pacer.sleptMs.toFixed(1)} ms)`);
  } finally {
    pacer.stop();
  }
});

test('the rest owed: none at a share of 1, as long as the work at 0.5, three times at 0.25', () => {
  assert.equal(
    [1, 0.5, 0.25, 0.1].map((share) => restFor(12, share)),
    [0, 12, 36, 108],
  );
});

test('TOLLGATE_OPERATOR_SHARE: 1 when unset, a fraction as given, refused outside (0, 1] with the setting named', () => {
  assert.is(settingsFromEnv({}).operatorShare, 1);
  assert.is(settingsFromEnv({ TOLLGATE_OPERATOR_SHARE: '0.25' }).operatorShare, 0.25);
  for (const bad of ['0', '-0.5', '1.5', 'half', 'NaN'])
    assert.throws(() => settingsFromEnv({ TOLLGATE_OPERATOR_SHARE: bad }), /TOLLGATE_OPERATOR_SHARE must be a number above 0 and at most 1/);
  assert.throws(() => setOperatorShare(0), /above 0/);
});

test('/metrics gives the share and the work and rest seconds', async () => {
  setOperatorShare(0.5);
  try {
    const text = await createMetrics().registry.metrics();
    assert.match(text, /^tollgate_operator_share 0\.5$/m);
    assert.match(text, /^tollgate_operator_work_seconds_total\{part="working"\} [0-9.e-]+$/m);
    assert.match(text, /^tollgate_operator_work_seconds_total\{part="resting"\} [0-9.e-]+$/m);
  } finally {
    setOperatorShare(1);
  }
});

test("the log's export at a share of 0.25 ends at the head while live calls keep appending", async () => {
  // After a short page (the head reached) it rested three times its step, so each next read found
  // what was appended meanwhile and it ran for as long as the log grew.
  const GROWING_MS = 3_000;
  const started = Date.now();
  const head = () => 100 + Math.floor(Math.min(Date.now() - started, GROWING_MS) / 30);
  const readAll = async (after: number, limit: number) => {
    const last = Math.min(head(), after + limit);
    return Array.from({ length: Math.max(0, last - after) }, (_, i) => ({ position: after + i + 1, type: 'Appended' }));
  };
  const ledger = { events: { readAll } } as unknown as Ledger;
  let written = 0;
  setOperatorShare(0.25);
  try {
    await writeEventLog(ledger, 0, async (text) => {
      written += text.trim().split('\n').length;
      await new Promise((r) => setTimeout(r, 10));
    });
  } finally {
    setOperatorShare(1);
  }
  const tookMs = Date.now() - started;
  assert.ok(tookMs < GROWING_MS * 0.75, `the export ended while the log still grew (${tookMs} ms)`);
  assert.ok(written >= 100, `every event up to the head it reached was written (${written})`);
});

test.run();
