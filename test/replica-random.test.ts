// Seeded random replica agreement (issue 38, item 5): two gateway processes (three with
// REPLICA_GATEWAYS=3, and in the stall run) and a projector on one PostgreSQL schema, as
// docker-compose.yml runs them. A seeded sequence of commands (payments, refunds, disputes, codes,
// grants, subscriptions, plan and price changes and their undoing, model and channel states, key
// controls, keys, management keys, members, sign-ins, chat calls plain and streamed through the
// official openai client, images) goes to random gateways; after every step the answer is checked
// against a model of the expected state (test/support/replica-model.ts), checkpoints read every
// account, key, member, plan, model and channel back from every gateway, and the end audits the log
// and the statements (test/support/replica-run.ts says what each step checks and what is left out,
// test/support/replica-commands.ts how each command is drawn and checked).
//
// A failing seed prints its disagreements and the whole sequence so far, and replays with:
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REPLICA_SEED=2 REPLICA_STEPS=80 node --import tsx test/replica-random.test.ts
// Settings (environment):
//   REPLICA_SEED=N or REPLICA_SEEDS=1,2,3   the seeds (CI: 1, 2, 3; `--stress`: 101 to 108; REPLICA_SEEDS= none, for the stall alone)
//   REPLICA_STEPS=N                          steps per seed (CI: 80; `--stress`: 300)
//   REPLICA_GATEWAYS=2|3                     gateways in the run (CI: 2; `--stress`: 3)
//   REPLICA_KEEP_GOING=1                     report every disagreement of a seed (the model follows the answers), not only the first
//   REPLICA_STALL=0|1                        the run with a database stall under one gateway (on by default; off when REPLICA_SEED is given, unless 1)
//   REPLICA_VERBOSE=1                        print the sequence of a seed that agreed too
// `npm run stress -- replica-random` runs this file with `--stress`.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { startUpstreamDouble, type UpstreamDouble } from './support/upstream-double.ts';
import { startReplicas, type Replica, type ReplicaSet } from './support/replicas.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';
import { ReplicaRun, replicaModelsConfig, SLOW } from './support/replica-run.ts';
import { COMMANDS } from './support/replica-commands.ts';

const url = process.env.DATABASE_URL;
const ADMIN = 'tg_admin_replica_random_test_0123456789abcdef';
const stress = process.argv.includes('--stress');
const env = process.env;
const seeds = env.REPLICA_SEED
  ? [Number(env.REPLICA_SEED)]
  : env.REPLICA_SEEDS !== undefined
    ? env.REPLICA_SEEDS.split(',').filter(Boolean).map(Number)
    : stress
      ? [101, 102, 103, 104, 105, 106, 107, 108]
      : [1, 2, 3];
const steps = Number(env.REPLICA_STEPS ?? (stress ? 300 : 80));
const gatewayCount = Number(env.REPLICA_GATEWAYS ?? (stress ? 3 : 2));
const keepGoing = env.REPLICA_KEEP_GOING === '1';
const withStall = env.REPLICA_STALL === '1' || (env.REPLICA_STALL !== '0' && !env.REPLICA_SEED);
const STALL_SEED = 7;
const STALL_MS = 5000;
/** The stalled gateway's bounds (docs/deployment.md's defaults are 5 s; shorter keeps the run short). */
const FAST_BOUNDS = {
  PG_CONNECT_TIMEOUT_MS: '2000',
  PG_STATEMENT_TIMEOUT_MS: '2000',
  TOLLGATE_LEDGER_DEADLINE_MS: '2000',
  TOLLGATE_READY_TIMEOUT_MS: '2000',
  TOLLGATE_STALE_HOLD_MS: '5000',
  TOLLGATE_SWEEP_INTERVAL_MS: '1000',
};

interface Rig {
  set: ReplicaSet;
  upstreams: { first: UpstreamDouble; second: UpstreamDouble; pics: UpstreamDouble };
  stop(): Promise<void>;
}

/** Upstream doubles, then a projector and the gateways on a fresh schema. */
async function startRig(names: string[], envOf?: (name: string) => Record<string, string>): Promise<Rig> {
  const upstreams = { first: await startUpstreamDouble(), second: await startUpstreamDouble(), pics: await startUpstreamDouble() };
  const closeUpstreams = () => Promise.all(Object.values(upstreams).map((u) => u.close()));
  try {
    const set = await startReplicas({
      names,
      adminToken: ADMIN,
      models: replicaModelsConfig({ first: upstreams.first.url, second: upstreams.second.url, pics: upstreams.pics.url }),
      envOf,
    });
    return {
      set,
      upstreams,
      async stop() {
        await set.stop();
        await closeUpstreams();
      },
    };
  } catch (err) {
    await closeUpstreams();
    throw err;
  }
}

/** Fails the test with the run's report (printed whole) when the run disagreed with its model. */
function assertAgreed(run: ReplicaRun): void {
  console.log(run.summary());
  if (run.disagreements.length === 0) {
    if (env.REPLICA_VERBOSE === '1') console.log(run.report());
    return;
  }
  console.log(run.report());
  const first = run.disagreements[0];
  assert.is(
    run.disagreements.length,
    0,
    `seed ${run.o.seed}: ${run.disagreements.length} disagreement(s), the first at step ${first.step} (${first.kind} on ${first.gateway}): ${first.message.slice(0, 600)}`,
  );
}

/** Waits (bounded) until every hold in the log is settled or released. */
async function holdsClosed(run: ReplicaRun, g: Replica, boundMs: number): Promise<number> {
  const until = Date.now() + boundMs;
  for (;;) {
    const open = new Set<string>();
    for (const e of await run.events(g)) {
      if (e.type === 'QuotaReserved') open.add(e.data.holdId);
      if (e.type === 'ChatCharged' || e.type === 'ImageCharged' || e.type === 'ReservationReleased') open.delete(e.data.holdId);
    }
    if (open.size === 0 || Date.now() > until) return open.size;
    await sleep(250);
  }
}

/** Waits (bounded) until the gateway's /readyz answers 200 (its database reached again, its views current). */
async function ready(g: Replica, boundMs: number): Promise<boolean> {
  const until = Date.now() + boundMs;
  for (;;) {
    const status = await fetch(`${g.url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return true;
    if (Date.now() > until) return false;
    await sleep(200);
  }
}

if (!url) {
  // Several processes cannot share embedded PGlite.
  test.skip('replica random (PostgreSQL only: set DATABASE_URL)', () => undefined);
  test.run();
} else {
  for (const seed of seeds) {
    test(`seed ${seed}: ${steps} random steps over ${gatewayCount} gateways and a projector agree with the model at every step`, async () => {
      const rig = await startRig(['A', 'B', 'C'].slice(0, gatewayCount));
      try {
        const run = new ReplicaRun({
          seed,
          steps,
          keepGoing,
          checkEvery: 20,
          gateways: rig.set.replicas,
          adminToken: ADMIN,
          upstreams: rig.upstreams,
          commands: COMMANDS,
        });
        await run.setup();
        await run.runSteps();
        if (run.disagreements.length === 0 || keepGoing) {
          await run.checkpoint('at the end');
          await run.audit();
        }
        assertAgreed(run);
      } finally {
        await rig.stop();
      }
    });
  }

  if (withStall) {
    // One gateway (C) reaches PostgreSQL through a TCP proxy that holds every byte for a few
    // seconds while calls are in flight on it: a call answered 503 must not be charged (its hold
    // released, its charge withdrawn, no void after the fact), a call answered 200 is charged once,
    // and random steps on all three gateways agree with the model before and after.
    test(`a stall of ${STALL_MS} ms under one of three gateways: no call answered 503 is charged, and the gateways agree before and after`, async () => {
      const pg = new URL(url);
      const proxy: TcpProxy = await startTcpProxy(Number(pg.port || 5432), pg.hostname);
      const viaProxy = new URL(url);
      viaProxy.hostname = '127.0.0.1';
      viaProxy.port = String(proxy.port);
      let rig: Rig | null = null;
      try {
        rig = await startRig(['A', 'B', 'C'], (name) => (name === 'C' ? { DATABASE_URL: viaProxy.href, ...FAST_BOUNDS } : {}));
        const [a, , c] = rig.set.replicas;
        const run = new ReplicaRun({
          replay: 'REPLICA_SEEDS= REPLICA_STALL=1',
          seed: STALL_SEED,
          steps: 50,
          keepGoing,
          checkEvery: 25,
          gateways: rig.set.replicas,
          adminToken: ADMIN,
          upstreams: rig.upstreams,
          commands: COMMANDS,
        });
        await run.setup();
        await run.runSteps(25);
        let answered: Array<{ status: number; code: string | null; retryAfter: string | null }> = [];
        if (run.disagreements.length === 0 || keepGoing) {
          const key = await run.openReservedAccount(a, 'stall', 1_000_000);
          await run.own('stall', `8 calls on C, then every byte between C and PostgreSQL held for ${STALL_MS} ms`, c.name, async () => {
            const ids = Array.from({ length: 8 }, (_, k) => `rr-${STALL_SEED}-stall-${k}`);
            // Two short calls end before the stall (charged); the others are generating when it begins.
            const calls = ids.map((id, k) =>
              fetch(`${c.url}/v1/chat/completions`, {
                method: 'POST',
                headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json', 'x-request-id': id },
                body: JSON.stringify({ model: SLOW, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: k < 2 ? 1 : 12 }),
              }).then(async (res) => ({ res, json: (await res.json().catch(() => null)) as Record<string, any> | null })),
            );
            // The holds are taken and the upstream (100 ms a token) is generating when the link stalls.
            await sleep(800);
            proxy.mode({ kind: 'stall' });
            await sleep(STALL_MS);
            proxy.mode({ kind: 'pass' });
            const replies = await Promise.all(calls);
            answered = replies.map(({ res, json }) => ({ status: res.status, code: json?.error?.code ?? null, retryAfter: res.headers.get('retry-after') }));
            // The calls ran side by side, so the log, not the order they were sent, says which was
            // charged first; the model records them in that order (a statement lists the log's order).
            const chargedAt = new Map<string, number>();
            (await run.events(a)).forEach((e, position) => {
              const requestId = (e.data as Record<string, any>).requestId;
              if (e.type === 'ChatCharged' && !chargedAt.has(requestId)) chargedAt.set(requestId, position);
            });
            const inLogOrder = ids.map((_, k) => k).sort((x, y) => (chargedAt.get(ids[x]) ?? Infinity) - (chargedAt.get(ids[y]) ?? Infinity));
            inLogOrder.forEach((k) => {
              const { res, json } = replies[k];
              if (res.status === 200 && json)
                run.recordServed(key, SLOW, ids[k], 'chat', Number(res.headers.get('x-tollgate-billed-tokens')), 1000, json.usage);
              else {
                run.expect(
                  res.status === 503 && json?.error?.code === 'ledger_unavailable' && res.headers.get('retry-after') !== null,
                  () => `call ${ids[k]} during the stall: expected 200 or 503 ledger_unavailable with Retry-After, got ${res.status} ${JSON.stringify(json)}`,
                );
                run.recordRefused(key, SLOW, ids[k], 'chat');
              }
            });
            run.expect(await ready(c, 30_000), () => 'C is not ready 30 s after the stall ended');
            const open = await holdsClosed(run, a, 30_000);
            run.expect(open === 0, () => `${open} holds still open 30 s after the stall ended`);
            // What the log holds for the calls answered 503: no charge, and so no void of one either.
            const failed = new Set(ids.filter((_, k) => replies[k].res.status !== 200));
            for (const e of await run.events(a)) {
              const d = e.data as Record<string, any>;
              if ((e.type === 'ChatCharged' || e.type === 'ChargeAdjusted') && failed.has(d.requestId))
                run.disagree(
                  `call ${d.requestId} was answered ${replies[ids.indexOf(d.requestId)].res.status} during the stall, yet the log has its ${e.type}: ${JSON.stringify(d)}`,
                );
            }
          });
          console.log(`stall: the calls on C answered ${answered.map((x) => `${x.status}${x.code ? ` ${x.code}` : ''}`).join(', ')}`);
          await run.runSteps(25);
        }
        if (run.disagreements.length === 0 || keepGoing) {
          await run.checkpoint('at the end');
          // The audit: each call answered 503 has no charge in the log and no ChargeAdjusted voids anything.
          await run.audit();
        }
        assertAgreed(run);
        assert.ok(
          answered.some((x) => x.status === 503),
          `the stall made no call fail (${answered.map((x) => x.status).join(', ')}): the case tested nothing`,
        );
      } finally {
        await rig?.stop();
        await proxy.close();
      }
    });
  }

  test.run();
}
