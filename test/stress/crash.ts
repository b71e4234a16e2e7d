// A. Crashes: kill -9 the gateway at random moments under mixed load (chat, streamed chat,
// images; several accounts; ~16 concurrent clients), restart it on the same storage, and after
// every restart audit what the clients saw against the ledger. The holds of cut calls are
// released once the killed process's lease lapses; at the end, let the rest expire (the real
// sweeper, with a clock past their lifetime) and audit once more.
//
//   node --import tsx test/stress/crash.ts [postgres|pglite]
//   STRESS_CRASHES (20) STRESS_CONCURRENCY (16) STRESS_KILL_MIN_MS (500) STRESS_KILL_MAX_MS (3000):
//   each kill comes that long after the restarted gateway has served a round of calls
//   STRESS_SEED STRESS_KEEP=1 (keep the schema / data directory)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { runScenario, envNumber, databaseUrl, atInterrupt } from './support/scenario.ts';
import { freePort, startGatewayProcess, kill9, stopGracefully, type ManagedProcess, type GatewaySpec } from './support/processes.ts';
import { adminClient, openLoadAccount, exportEvents, verify, accountRow, type LoadAccount } from './support/admin.ts';
import { callOnce, newRequestId, pickKind, seededRng, type CallRecord, type Target } from './support/load.ts';
import { auditRun, auditAccountRows, type AuditFigures } from './support/audit.ts';
import { finalState, dropSchemas } from './support/storage.ts';
import { writeSlowSimulatedConfig } from './support/models.ts';
import { percentile } from './support/stats.ts';

const engine = (process.argv[2] ?? process.env.STRESS_ENGINE ?? 'postgres') as 'postgres' | 'pglite';
if (engine !== 'postgres' && engine !== 'pglite') throw new Error(`engine must be postgres or pglite, got ${engine}`);

/** Longer than any hold lives (chat 15 min, image 5 min), so the final sweep releases every orphan. */
const PAST_EVERY_HOLD_MS = 16 * 60_000;

/** Closed while the gateway is down: no call starts against a dead port. */
class Gate {
  private opened: Promise<void> = Promise.resolve();
  private release: () => void = () => undefined;
  close(): void {
    this.opened = new Promise((r) => {
      this.release = r;
    });
  }
  open(): void {
    this.release();
  }
  wait(): Promise<void> {
    return this.opened;
  }
}

await runScenario(`crash-${engine}`, async (ctx) => {
  const kills = envNumber('STRESS_CRASHES', 20);
  const concurrency = envNumber('STRESS_CONCURRENCY', 16);
  const minUp = envNumber('STRESS_KILL_MIN_MS', 500);
  const maxUp = Math.max(minUp, envNumber('STRESS_KILL_MAX_MS', 3000));
  const seed = envNumber('STRESS_SEED', Date.now() % 1_000_000_007);
  const rng = seededRng(seed);
  ctx.log(`engine ${engine}, ${kills} kills, ${concurrency} clients, kill ${minUp}-${maxUp} ms after warm-up, seed ${seed}`);

  const models = writeSlowSimulatedConfig({ tokenDelayMs: 5, imageDelayMs: 400 });
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-stress-'));
  const spec: GatewaySpec = {
    port: await freePort(),
    schema: `st_${randomBytes(5).toString('hex')}`,
    dataDir,
    databaseUrl: engine === 'postgres' ? databaseUrl() : undefined,
    adminToken: `tg_admin_stress_${randomBytes(8).toString('hex')}`,
    modelsConfig: models.path,
    env: { TOLLGATE_SWEEP_INTERVAL_MS: '1000' },
  };
  const origin = `http://127.0.0.1:${spec.port}`;
  const admin = adminClient(origin, spec.adminToken);
  let keep = process.env.STRESS_KEEP === '1';
  atInterrupt(async () => {
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (spec.databaseUrl) await dropSchemas(spec.databaseUrl, spec.schema);
  });
  let gw: ManagedProcess | null = null;
  let killing = false;
  const watch = (p: ManagedProcess) => {
    void p.exited.then((how) => {
      if (!killing) ctx.violation(`the gateway exited by itself (${how}):\n${p.output().slice(-3000)}`);
    });
  };

  try {
    const restarts: number[] = [];
    let t0 = Date.now();
    gw = await startGatewayProcess(spec);
    ctx.log(`gateway up in ${Date.now() - t0} ms on ${origin} (${engine}${engine === 'pglite' ? ` in ${dataDir}` : `, schema ${spec.schema}`})`);
    watch(gw);

    // Several accounts; one with a small plan plus extra tokens, so it runs dry (402s) mid-run
    // and its charges are split between the plan and the extra tokens.
    const accounts: LoadAccount[] = [];
    for (let i = 0; i < 3; i++) accounts.push(await openLoadAccount(admin, `big-${i}`, 1_000_000_000_000));
    const tight = await openLoadAccount(admin, 'tight', 500_000);
    await admin.request('POST', '/accounts/tight/extra-tokens', { amount: 300_000, reason: 'stress' });
    accounts.push(tight);
    const accountIds = new Set(accounts.map((a) => a.accountId));
    const targets: Target[] = accounts.map((a) => ({ origin, key: a.key, accountId: a.accountId }));

    const records: CallRecord[] = [];
    const gate = new Gate();
    let epoch = 0;
    let running = true;
    let inFlight = 0;
    const killAt: number[] = [];

    const worker = async () => {
      while (running) {
        await gate.wait();
        if (!running) break;
        const target = targets[Math.floor(rng() * targets.length)];
        const kind = pickKind(rng, { chat: 45, stream: 45, image: 10 });
        const idem = rng() < 0.25 ? `idem-${randomBytes(8).toString('hex')}` : undefined;
        inFlight++;
        const rec = await callOnce(target, kind, { requestId: newRequestId('crash'), epoch, rng, idempotencyKey: idem, timeoutMs: 60_000 });
        inFlight--;
        records.push(rec);
      }
    };
    const workers = Array.from({ length: concurrency }, worker);

    const drained = async () => {
      const until = Date.now() + 120_000;
      while (inFlight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      if (inFlight > 0) ctx.violation(`${inFlight} calls still running 120 s after the gateway was stopped`);
    };

    // What a check saw before: committed events must still be there, unchanged, after a crash.
    const known = new Map<number, string>();
    let lastAudit: AuditFigures | null = null;
    const check = async (label: string) => {
      const started = Date.now();
      const events = await exportEvents(admin);
      let missing = 0;
      const byPosition = new Map(events.map((e) => [e.position, e.hash]));
      for (const [position, hash] of known) if (byPosition.get(position) !== hash) missing++;
      if (missing) ctx.violation(`${label}: ${missing} events committed before the crash are missing or changed`);
      for (const e of events) known.set(e.position, e.hash);
      const audit = auditRun(records, events, { accounts: accountIds, final: false });
      for (const v of audit.violations) ctx.violation(`${label}: ${v}`);
      lastAudit = audit.figures;
      const rows = await Promise.all([...accountIds].map((id) => accountRow(admin, id)));
      for (const v of auditAccountRows(rows, events)) ctx.violation(`${label}: ${v}`);
      const ver = await verify(admin);
      if (!ver.ok)
        ctx.violation(
          `${label}: verify failed: ${JSON.stringify({ chains: ver.chainProblems.slice(0, 5), readModels: ver.readModelDifferences.slice(0, 5) })}`,
        );
      ctx.log(
        `${label}: ${events.length} events, ${audit.figures.succeeded} ok / ${audit.figures.failed} failed calls, ${audit.figures.openHolds} open holds, ${audit.figures.chargedButUndelivered} charged-undelivered, verify ${ver.ok ? 'ok' : 'FAILED'} (${Date.now() - started} ms)`,
      );
    };

    // Kill in steady state, not during the warm-up of a fresh process: once this generation has
    // served a round of calls, then after a random extra delay.
    const warmedUp = async () => {
      const until = Date.now() + 60_000;
      while (Date.now() < until && records.filter((r) => r.epoch === epoch && r.outcome === 'ok').length < concurrency)
        await new Promise((r) => setTimeout(r, 50));
    };
    for (let k = 1; k <= kills; k++) {
      await warmedUp();
      await new Promise((r) => setTimeout(r, minUp + rng() * (maxUp - minUp)));
      gate.close();
      killing = true;
      killAt[epoch] = Date.now();
      const busy = inFlight;
      await kill9(gw);
      await drained();
      const cut = records.filter((r) => r.epoch === epoch && r.outcome !== 'ok' && r.outcome !== 'http_error').length;
      t0 = Date.now();
      try {
        gw = await startGatewayProcess(spec);
      } catch (err) {
        keep = true;
        throw new Error(`restart after kill ${k} failed (storage kept at ${engine === 'pglite' ? dataDir : spec.schema}): ${(err as Error).message}`, {
          cause: err,
        });
      }
      restarts.push(Date.now() - t0);
      killing = false;
      watch(gw);
      epoch++;
      await check(`kill ${k}/${kills} (${busy} in flight, ${cut} cut; restart ${restarts[restarts.length - 1]} ms)`);
      gate.open();
    }

    await new Promise((r) => setTimeout(r, minUp));
    running = false;
    await Promise.all(workers);
    // A careful client sends a call cut by the crash again with the same Idempotency-Key and
    // body. The gateway waits up to 120 s on a key claimed by a call still running, so these run
    // together, once, with the gateway up and idle.
    const retried = await retryCutIdempotentCalls(records, targets, epoch, envNumber('STRESS_IDEMPOTENT_RETRIES', 12));
    await check('after the last kill');

    // The cut calls' holds are still open: stop the gateway cleanly, let their lifetime pass for
    // the real sweeper, and audit the whole ledger with no hold left.
    killing = true;
    await stopGracefully(gw);
    const final = await finalState({ schema: spec.schema, databaseUrl: spec.databaseUrl, dataDir }, PAST_EVERY_HOLD_MS);
    const audit = auditRun(records, final.events, { accounts: accountIds, final: true });
    for (const v of audit.violations) ctx.violation(`final: ${v}`);
    for (const v of auditAccountRows(
      final.accounts.filter((a) => accountIds.has(a.account_id)),
      final.events,
    ))
      ctx.violation(`final: ${v}`);
    if (!final.verification.ok) ctx.violation(`final verify failed: ${JSON.stringify(final.verification).slice(0, 2000)}`);
    for (const r of records) {
      if ((r.outcome === 'conn_error' || r.outcome === 'cut') && !(killAt[r.epoch] && r.endedAt >= killAt[r.epoch])) {
        ctx.violation(`${r.requestId} lost its connection (${r.error}) while no kill was under way`);
      }
    }
    // Image holds live 5 minutes: on a long run the gateway's own sweeper releases some first.
    const sweptByGateway = lastAudit!.holdsExpired;
    if (audit.figures.holdsExpired !== sweptByGateway + final.swept)
      ctx.violation(`the sweepers released ${sweptByGateway} + ${final.swept} holds, the audit counts ${audit.figures.holdsExpired} expired`);

    const f = audit.figures;
    ctx.figure('engine', engine);
    ctx.figure('requests sent', f.calls);
    ctx.figure('succeeded', f.succeeded);
    ctx.figure(
      'failed',
      `${f.failed} (${Object.entries(f.failures)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ')})`,
    );
    ctx.figure('kills', kills);
    ctx.figure('charges checked', f.chargesChecked);
    ctx.figure('tokens lost', f.tokensLost);
    ctx.figure('tokens double-charged', f.tokensDoubleCharged);
    ctx.figure('cut calls charged (committed before the reply was lost)', f.chargedButUndelivered);
    ctx.figure('cut streams not charged: chunks delivered', f.uncharged_stream_chunks);
    ctx.figure(
      'holds of cut calls released on expiry',
      `${audit.figures.holdsExpired} (by the running gateway's sweeper: ${sweptByGateway}; by the sweeper run 16 min ahead at the end: ${final.swept})`,
    );
    ctx.figure("holds of cut calls released once the killed process's lease lapsed", audit.figures.holdsOfLostProcesses);
    ctx.figure('events in the ledger', final.events.length);
    ctx.figure('restart time p50 / max', `${percentile(restarts, 50)} / ${Math.max(...restarts)} ms`);
    const stuckRetries = retried.filter((r) => r.errorCode === 'idempotency_in_progress' || r.outcome === 'timeout');
    const stuck = stuckRetries.length;
    const chargedIds = new Set(final.events.filter((e) => e.type === 'ChatCharged' || e.type === 'ImageCharged').map((e) => e.data.requestId as string));
    const paidStuck = stuckRetries.filter((r) => records.some((o) => o.idempotencyKey === r.idempotencyKey && o !== r && chargedIds.has(o.requestId))).length;
    const interrupted = retried.filter((r) => r.errorCode === 'idempotency_interrupted').length;
    ctx.figure(
      'idempotent retries of cut calls',
      `${retried.length}: replayed ${retried.filter((r) => r.replayed && r.outcome === 'ok').length}, ran again ${retried.filter((r) => r.outcome === 'ok' && !r.replayed).length}, 409 interrupted (answered at once) ${interrupted}, 409 still in progress after 120 s ${stuck} (first attempt charged: ${paidStuck}), other ${retried.filter((r) => r.outcome !== 'ok' && r.errorCode !== 'idempotency_in_progress' && r.errorCode !== 'idempotency_interrupted' && r.outcome !== 'timeout').length}`,
    );
    ctx.figure(
      'verify (chains + rebuild)',
      final.verification.ok ? `ok, ${final.verification.events} events, ${final.verification.streams} streams` : 'FAILED',
    );
    if (stuck)
      ctx.note(
        `${stuck} of ${retried.length} retries with the Idempotency-Key of a call cut by the crash got no answer: the key's claim is orphaned (src/http/idempotency.ts), see RELIABILITY.md`,
      );
    if (f.succeeded === 0) ctx.violation('no call succeeded: the load did not run');
  } finally {
    killing = true;
    if (gw) await kill9(gw);
    models.remove();
    if (keep) ctx.log(`kept: ${engine === 'pglite' ? dataDir : `schema ${spec.schema}`}`);
    else {
      rmSync(dataDir, { recursive: true, force: true });
      if (spec.databaseUrl) await dropSchemas(spec.databaseUrl, spec.schema);
    }
  }
});

/**
 * Up to `max` calls that carried an Idempotency-Key and got no complete reply are sent again,
 * same key and body. Each is one logical call with its first attempt: the audit allows one
 * charge for both together, and a replay must stand for a charged first attempt.
 */
async function retryCutIdempotentCalls(records: CallRecord[], targets: Target[], epoch: number, max: number): Promise<CallRecord[]> {
  const cut = records.filter((r) => r.idempotencyKey && (r.outcome === 'conn_error' || r.outcome === 'cut')).slice(0, max);
  const retried = await Promise.all(
    cut.map((r) => {
      const target = targets.find((t) => t.accountId === r.accountId)!;
      return callOnce(target, r.kind, {
        requestId: newRequestId('retry'),
        epoch,
        idempotencyKey: r.idempotencyKey,
        body: r.sentBody,
        model: r.model,
        timeoutMs: 150_000,
      });
    }),
  );
  records.push(...retried);
  return retried;
}
