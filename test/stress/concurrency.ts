// C. The concurrency proof, longer: two gateway processes and a projector on one PostgreSQL,
// 500 simultaneous chat calls (half streamed) on an account whose quota covers exactly 100 of
// them, five times with fresh accounts. At most 100 may succeed; the rest must be 402s; the
// ledger, the read model and a rebuild must agree.
//
//   node --import tsx test/stress/concurrency.ts
//   STRESS_ROUNDS (5) STRESS_CALLS (500) STRESS_COVERED (100) STRESS_KEEP=1
//
// Every call asks for the same prompt and max_tokens 5; the simulated model always writes more
// than 5 tokens, so each call costs exactly its hold and a quota of COVERED x that cost leaves
// nothing for call COVERED + 1, however the holds interleave. The upstream takes 50 ms per
// token, so the 100 winners hold their tokens while the other 400 ask: they are refused on
// reserved tokens, not only on spent ones.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { runScenario, envNumber, databaseUrl, atInterrupt } from './support/scenario.ts';
import { freePort, startGatewayProcess, startProjectorProcess, kill9, stopGracefully, type ManagedProcess, type GatewaySpec } from './support/processes.ts';
import { adminClient, openLoadAccount, exportEvents, verify, accountRow, type AccountRow } from './support/admin.ts';
import { callOnce, newRequestId, type CallRecord } from './support/load.ts';
import { auditRun, auditAccountRows } from './support/audit.ts';
import { dropSchemas } from './support/storage.ts';
import { writeSlowSimulatedConfig } from './support/models.ts';
import { chatCharge } from '../../src/money/pricing.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';

const MODEL = 'alpha-sonnet-5';
const MAX_TOKENS = 5;

await runScenario('concurrency', async (ctx) => {
  const rounds = envNumber('STRESS_ROUNDS', 5);
  const calls = envNumber('STRESS_CALLS', 500);
  const covered = envNumber('STRESS_COVERED', 100);
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-conc-'));
  const models = writeSlowSimulatedConfig({ tokenDelayMs: 50, imageDelayMs: 0 });
  const base: Omit<GatewaySpec, 'port'> = {
    schema: `cc_${randomBytes(5).toString('hex')}`,
    dataDir,
    databaseUrl: databaseUrl(),
    adminToken: `tg_admin_conc_${randomBytes(12).toString('hex')}`,
    projections: false,
    modelsConfig: models.path,
  };
  atInterrupt(async () => {
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (base.databaseUrl) await dropSchemas(base.databaseUrl, base.schema);
  });
  const procs: ManagedProcess[] = [];
  let stopping = false;
  const watch = (p: ManagedProcess, name: string) => {
    procs.push(p);
    void p.exited.then((how) => {
      if (!stopping) ctx.violation(`${name} exited (${how}):\n${p.output().slice(-3000)}`);
    });
  };
  try {
    // The projector first: it creates the read models the gateways (projections off) read.
    const projector = await startProjectorProcess({ ...base, port: 0 });
    watch(projector, 'the projector');
    const specs = [
      { ...base, port: await freePort() },
      { ...base, port: await freePort() },
    ];
    for (const [i, s] of specs.entries()) watch(await startGatewayProcess(s), `gateway ${i + 1}`);
    const origins = specs.map((s) => `http://127.0.0.1:${s.port}`);
    const admin = adminClient(origins[0], base.adminToken);
    const prompt = [{ role: 'user', content: 'The concurrency proof: how many of these calls fit in the quota?' }];

    // The price of one call, measured through a gateway on an account of its own.
    const probe = await openLoadAccount(admin, 'probe', 1_000_000);
    const one = await callOnce({ origin: origins[0], key: probe.key, accountId: 'probe' }, 'chat', {
      requestId: newRequestId('probe'),
      epoch: 0,
      model: MODEL,
      body: { model: MODEL, messages: prompt, max_tokens: MAX_TOKENS },
    });
    if (one.outcome !== 'ok' || one.usage?.completion !== MAX_TOKENS) throw new Error(`probe call: ${JSON.stringify(one)}`);
    const cost = one.billedHeader!;
    if (cost !== chatCharge(one.usage.prompt, MAX_TOKENS, 1500))
      throw new Error(`probe billed ${cost}, expected ceil((${one.usage.prompt}+${MAX_TOKENS}) x 1.5)`);
    ctx.log(`one call costs ${cost} tokens; quota per round ${cost * covered}; ${calls} calls over 2 gateways, ${rounds} rounds`);

    const perRound: string[] = [];
    const allRecords: CallRecord[] = [];
    const accountIds = new Set<string>();
    for (let round = 1; round <= rounds; round++) {
      const id = `conc-${round}-${randomBytes(3).toString('hex')}`;
      const acct = await openLoadAccount(admin, id, cost * covered);
      accountIds.add(id);
      // Fire all at once: the bodies are built first, then every request starts in one tick.
      const started = Date.now();
      const records = await Promise.all(
        Array.from({ length: calls }, (_, i) =>
          callOnce({ origin: origins[i % 2], key: acct.key, accountId: id }, i % 4 < 2 ? 'chat' : 'stream', {
            requestId: newRequestId(`c${round}`),
            epoch: 0,
            model: MODEL,
            timeoutMs: 300_000,
            body: { model: MODEL, messages: prompt, max_tokens: MAX_TOKENS, ...(i % 4 < 2 ? {} : { stream: true, stream_options: { include_usage: true } }) },
          }),
        ),
      );
      const seconds = (Date.now() - started) / 1000;
      allRecords.push(...records);
      const ok = records.filter((r) => r.outcome === 'ok');
      const refused = records.filter((r) => r.outcome === 'http_error' && r.status === 402 && r.errorCode === 'insufficient_quota');
      const other = records.filter((r) => r.outcome !== 'ok' && !refused.includes(r));
      if (ok.length > covered) ctx.violation(`round ${round}: ${ok.length} calls succeeded on a quota covering ${covered}`);
      if (ok.length < covered) ctx.violation(`round ${round}: only ${ok.length} of the ${covered} covered calls succeeded`);
      if (other.length)
        ctx.violation(
          `round ${round}: ${other.length} calls neither succeeded nor got a 402, e.g. ${JSON.stringify(other.slice(0, 3).map((r) => ({ outcome: r.outcome, status: r.status, code: r.errorCode, error: r.error })))}`,
        );

      // The projector is its own process: wait (bounded) until its read model has caught up with
      // the events; whatever still differs then is reported.
      let settled!: AccountRow;
      let events: StoredEvent[] = [];
      const end = Date.now() + 30_000;
      do {
        events = (await exportEvents(admin)).filter((e) => e.data.accountId === id || e.type === 'ModelPriced');
        settled = await accountRow(admin, id);
        if (auditAccountRows([settled], events).length === 0) break;
        await new Promise((r) => setTimeout(r, 200));
      } while (Date.now() < end);
      const audit = auditRun(records, events, { accounts: new Set([id]), final: true });
      for (const v of audit.violations) ctx.violation(`round ${round}: ${v}`);
      for (const v of auditAccountRows([settled], events)) ctx.violation(`round ${round}: ${v}`);
      const billed = events.filter((e) => e.type === 'ChatCharged').reduce((n, e) => n + Number(e.data.billed), 0);
      // How many holds were open at once, in commit order: the refusals met reserved tokens.
      let open = 0;
      let peakOpen = 0;
      for (const e of events) {
        if (e.type === 'QuotaReserved') peakOpen = Math.max(peakOpen, ++open);
        else if (e.type === 'ChatCharged' || e.type === 'ReservationReleased') open--;
      }
      if (billed > acct.quota) ctx.violation(`round ${round}: ${billed} tokens billed on a quota of ${acct.quota}`);
      const line = `round ${round}: ${ok.length} ok, ${refused.length} x 402, ${other.length} other in ${seconds.toFixed(1)} s; billed ${billed} / quota ${acct.quota}; at most ${peakOpen} holds open at once; read model used ${settled.quota_used}, reserved ${settled.reserved}, open holds ${settled.open_holds}`;
      perRound.push(line);
      ctx.log(line);
    }

    const ver = await verify(admin);
    if (!ver.ok) ctx.violation(`verify failed: ${JSON.stringify({ chains: ver.chainProblems.slice(0, 5), readModels: ver.readModelDifferences.slice(0, 5) })}`);
    const ok = allRecords.filter((r) => r.outcome === 'ok').length;
    ctx.figure(
      'setup',
      `2 gateways (projections off) + 1 projector, PostgreSQL; ${calls} calls per round (half streamed), quota = ${covered} x ${cost} tokens`,
    );
    ctx.figure('rounds', rounds);
    perRound.forEach((l, i) => ctx.figure(`round ${i + 1}`, l.replace(/^round \d+: /, '')));
    ctx.figure('succeeded in all rounds', `${ok} (at most ${covered * rounds})`);
    ctx.figure('verify (chains + rebuild)', ver.ok ? `ok, ${ver.events} events, ${ver.streams} streams` : 'FAILED');
  } finally {
    stopping = true;
    for (const p of procs) await stopGracefully(p, 20_000).catch(() => kill9(p));
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (process.env.STRESS_KEEP !== '1') await dropSchemas(base.databaseUrl!, base.schema);
  }
});
