// B. Soak: a steady open-loop mix (chat, streamed chat, images; several accounts) against one
// gateway on PostgreSQL for 10 minutes. Fails on any error, on memory or latency that is not
// flat (numbers below), or on a ledger that does not add up at the end.
//
//   node --import tsx test/stress/soak.ts
//   STRESS_SOAK_SECONDS (600) STRESS_SOAK_RATE (50 calls/s) STRESS_SOAK_IMAGE_PERCENT (4)
//   STRESS_SEED STRESS_KEEP=1
//
// Flat means, comparing the last window with the second (the first is warm-up; a window is
// 60 s, or a fifth of a run shorter than 5 minutes):
//   RSS (sampled every 10 s, mean per window)  last <= 1.2 x second
//   p99 latency of the calls started in it     last <= 2 x second
import { loadavg, tmpdir } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { runScenario, envNumber, databaseUrl, atInterrupt } from './support/scenario.ts';
import { freePort, startGatewayProcess, kill9, stopGracefully, rssBytes, cpuSeconds, type ManagedProcess, type GatewaySpec } from './support/processes.ts';
import { adminClient, openLoadAccount, exportEvents, verify, accountRow, waitForQuiet } from './support/admin.ts';
import { callOnce, newRequestId, pickKind, seededRng, type CallRecord, type Target } from './support/load.ts';
import { auditRun, auditAccountRows } from './support/audit.ts';
import { dropSchemas } from './support/storage.ts';
import { writeSlowSimulatedConfig } from './support/models.ts';
import { byWindow, mb, mean, ms, percentile } from './support/stats.ts';

export const RSS_GROWTH_LIMIT = 1.2;
export const P99_GROWTH_LIMIT = 2;

/** The window the flatness rules compare: 60 s, or a fifth of a short run (at least 10 s). */
export function windowSeconds(totalSeconds: number): number {
  return totalSeconds >= 300 ? 60 : Math.max(10, Math.floor(totalSeconds / 5));
}

await runScenario('soak', async (ctx) => {
  const seconds = envNumber('STRESS_SOAK_SECONDS', 600);
  const rate = envNumber('STRESS_SOAK_RATE', 50);
  const imagePercent = envNumber('STRESS_SOAK_IMAGE_PERCENT', 4);
  const seed = envNumber('STRESS_SEED', Date.now() % 1_000_000_007);
  const rng = seededRng(seed);
  const windowS = windowSeconds(seconds);
  const windows = Math.floor(seconds / windowS);
  if (windows < 3) throw new Error(`STRESS_SOAK_SECONDS=${seconds} is too short: at least 3 windows of ${windowS} s are needed`);
  const mix = { chat: (100 - imagePercent) / 2, stream: (100 - imagePercent) / 2, image: imagePercent };
  ctx.log(`${seconds} s at ${rate} calls/s (chat ${mix.chat} %, streamed ${mix.stream} %, images ${mix.image} %), windows of ${windowS} s, seed ${seed}`);

  const models = writeSlowSimulatedConfig({ tokenDelayMs: 5, imageDelayMs: 500 });
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-soak-'));
  const spec: GatewaySpec = {
    port: await freePort(),
    schema: `sk_${randomBytes(5).toString('hex')}`,
    dataDir,
    databaseUrl: databaseUrl(),
    adminToken: `tg_admin_soak_${randomBytes(12).toString('hex')}`,
    modelsConfig: models.path,
  };
  const origin = `http://127.0.0.1:${spec.port}`;
  const admin = adminClient(origin, spec.adminToken);
  atInterrupt(async () => {
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (spec.databaseUrl) await dropSchemas(spec.databaseUrl, spec.schema);
  });
  let gw: ManagedProcess | null = null;
  let stopping = false;
  try {
    gw = await startGatewayProcess(spec);
    void gw.exited.then((how) => {
      if (!stopping) ctx.violation(`the gateway exited (${how}):\n${gw!.output().slice(-3000)}`);
    });
    const accounts = [];
    for (let i = 0; i < 8; i++) accounts.push(await openLoadAccount(admin, `soak-${i}`, 1_000_000_000_000));
    const targets: Target[] = accounts.map((a) => ({ origin, key: a.key, accountId: a.accountId }));
    const accountIds = new Set(accounts.map((a) => a.accountId));

    const records: CallRecord[] = [];
    const rss: Array<{ at: number; bytes: number; load: number }> = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const start = Date.now();
    const cpuAtStart = cpuSeconds(gw.pid) ?? 0;
    const sample = () => {
      const b = gw && rssBytes(gw.pid);
      if (b) rss.push({ at: Date.now(), bytes: b, load: loadavg()[0] });
    };
    sample();
    const sampler = setInterval(sample, 10_000);
    const progress = setInterval(() => {
      const done = records.length;
      const errors = records.filter((r) => r.outcome !== 'ok').length;
      ctx.log(`${done} calls done, ${inFlight} in flight, ${errors} errors, RSS ${mb(rss[rss.length - 1]?.bytes ?? 0)}, load ${loadavg()[0].toFixed(1)}`);
    }, 60_000);

    // Open loop: call i is due at start + i/rate whatever the replies do, so a slow gateway
    // shows as latency and in-flight growth, not as a lower rate.
    const pending: Promise<void>[] = [];
    let sent = 0;
    const total = Math.floor(seconds * rate);
    let lateMax = 0;
    while (sent < total) {
      const now = Date.now();
      const due = Math.min(total, Math.floor(((now - start) * rate) / 1000) + 1);
      for (; sent < due; sent++) {
        lateMax = Math.max(lateMax, now - (start + (sent * 1000) / rate));
        const target = targets[Math.floor(rng() * targets.length)];
        const kind = pickKind(rng, mix);
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const p = callOnce(target, kind, { requestId: newRequestId('soak'), epoch: 0, rng, timeoutMs: 60_000 }).then((r) => {
          records.push(r);
          inFlight--;
        });
        pending.push(p);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    const sendSeconds = (Date.now() - start) / 1000;
    await Promise.all(pending);
    const gatewayCpu = (cpuSeconds(gw.pid) ?? 0) - cpuAtStart;
    clearInterval(sampler);
    clearInterval(progress);

    // Per window: latency of the calls started in it, RSS sampled in it.
    const lat = byWindow(records, (r) => r.startedAt, start, windowS * 1000, windows);
    const mem = byWindow(rss, (s) => s.at, start, windowS * 1000, windows);
    console.log(`\n  window   calls  errors   p50      p99      RSS mean  load`);
    lat.forEach((w, i) => {
      const d = w.map((r) => r.endedAt - r.startedAt);
      console.log(
        `  ${String(i + 1).padStart(3)}  ${String(w.length).padStart(8)}  ${String(w.filter((r) => r.outcome !== 'ok').length).padStart(6)}  ${ms(percentile(d, 50)).padStart(7)}  ${ms(percentile(d, 99)).padStart(7)}  ${mb(mean(mem[i].map((s) => s.bytes))).padStart(8)}  ${mean(mem[i].map((s) => s.load)).toFixed(1)}`,
      );
    });
    const p99 = (w: CallRecord[]) =>
      percentile(
        w.map((r) => r.endedAt - r.startedAt),
        99,
      );
    const rssMean = (i: number) => mean(mem[i].map((s) => s.bytes));
    const second = 1;
    const last = windows - 1;
    const rssRatio = rssMean(last) / rssMean(second);
    const p99Ratio = p99(lat[last]) / p99(lat[second]);

    const errors = records.filter((r) => r.outcome !== 'ok');
    if (errors.length)
      ctx.violation(
        `${errors.length} of ${records.length} calls failed, e.g. ${JSON.stringify(errors.slice(0, 3).map((r) => ({ kind: r.kind, outcome: r.outcome, status: r.status, code: r.errorCode, error: r.error })))}`,
      );
    if (!(rssRatio <= RSS_GROWTH_LIMIT))
      ctx.violation(`memory not flat: RSS in the last window is ${rssRatio.toFixed(2)} x the second (limit ${RSS_GROWTH_LIMIT})`);
    if (!(p99Ratio <= P99_GROWTH_LIMIT))
      ctx.violation(`latency not flat: p99 in the last window is ${p99Ratio.toFixed(2)} x the second (limit ${P99_GROWTH_LIMIT})`);
    const achieved = records.length / sendSeconds;
    if (achieved < rate * 0.97) ctx.violation(`the load generator sent ${achieved.toFixed(1)} calls/s, below the target ${rate}`);

    // The ledger at rest: every delivered call charged once, no hold left, read models = events = rebuild.
    if (!(await waitForQuiet(admin))) ctx.violation('the gateway was still appending events 3 minutes after the last reply');
    const events = await exportEvents(admin);
    const audit = auditRun(records, events, { accounts: accountIds, final: true });
    for (const v of audit.violations) ctx.violation(v);
    const rows = await Promise.all([...accountIds].map((id) => accountRow(admin, id)));
    for (const v of auditAccountRows(rows, events)) ctx.violation(v);
    const ver = await verify(admin);
    if (!ver.ok) ctx.violation(`verify failed: ${JSON.stringify({ chains: ver.chainProblems.slice(0, 5), readModels: ver.readModelDifferences.slice(0, 5) })}`);

    const all = records.map((r) => r.endedAt - r.startedAt);
    const byKind = (k: string) => records.filter((r) => r.kind === k).length;
    ctx.figure('duration / target rate', `${seconds} s / ${rate} calls/s (achieved ${achieved.toFixed(1)}/s, scheduler late by at most ${lateMax} ms)`);
    ctx.figure('calls', `${records.length} (chat ${byKind('chat')}, streamed ${byKind('stream')}, images ${byKind('image')}); max in flight ${maxInFlight}`);
    ctx.figure('errors', errors.length);
    ctx.figure('latency p50 / p99 overall', `${ms(percentile(all, 50))} / ${ms(percentile(all, 99))}`);
    ctx.figure(`p99 window 2 -> last (limit ${P99_GROWTH_LIMIT}x)`, `${ms(p99(lat[second]))} -> ${ms(p99(lat[last]))} (${p99Ratio.toFixed(2)}x)`);
    ctx.figure(
      `RSS window 2 -> last (limit ${RSS_GROWTH_LIMIT}x)`,
      `${mb(rssMean(second))} -> ${mb(rssMean(last))} (${rssRatio.toFixed(2)}x); max ${mb(Math.max(...rss.map((s) => s.bytes)))}`,
    );
    ctx.figure(
      'gateway CPU',
      `${gatewayCpu.toFixed(0)} s over the run (${((gatewayCpu / ((Date.now() - start) / 1000)) * 100).toFixed(0)} % of one core), ${((gatewayCpu * 1000) / records.length).toFixed(1)} ms per call`,
    );
    ctx.figure('load average (1 min) min / max', `${Math.min(...rss.map((s) => s.load)).toFixed(1)} / ${Math.max(...rss.map((s) => s.load)).toFixed(1)}`);
    ctx.figure('charges checked', audit.figures.chargesChecked);
    ctx.figure('tokens lost / double-charged', `${audit.figures.tokensLost} / ${audit.figures.tokensDoubleCharged}`);
    ctx.figure('verify (chains + rebuild)', ver.ok ? `ok, ${ver.events} events, ${ver.streams} streams` : 'FAILED');
  } finally {
    stopping = true;
    if (gw) {
      if ((await stopGracefully(gw, 30_000)) === 'SIGKILL') ctx.note('the gateway did not stop within 30 s of SIGTERM');
    }
    if (gw) await kill9(gw);
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (process.env.STRESS_KEEP !== '1') await dropSchemas(spec.databaseUrl!, spec.schema);
  }
});
