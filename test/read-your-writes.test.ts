// What an operator and a customer do next: an account opened, subscribed and keyed through the
// admin API, then read at once by the customer (subscription with the exact figures just written,
// usage, models), then topped up and read again. Every read must see every write before it, in
// every topology: embedded PGlite; PostgreSQL with one gateway; two gateways with default
// settings (each projecting); two gateways beside a separate projector. Writes and reads are
// spread so that half of them cross from one gateway to the other.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnGateway, spawnProjector, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';

const url = process.env.DATABASE_URL;
const ADMIN = 'tg_admin_read_your_writes_test_0123456789';
const ACCOUNTS = Number(process.env.RYW_ACCOUNTS ?? 200);
/** Accounts worked through at once (an operator script, several customers). */
const PARALLEL = 8;
const QUOTA = 1000;
const EXTRA = 500;

interface Topology {
  gateways: GatewayProcess[];
  stop(): Promise<void>;
}

async function topology(gatewayCount: number, withProjector: boolean): Promise<Topology> {
  const schema = uniqueSchema('ryw');
  const projector = withProjector ? spawnProjector(schema) : null;
  await projector?.running;
  const env: Record<string, string> = { TOLLGATE_SCHEMA: schema, TOLLGATE_ADMIN_TOKEN: ADMIN, TOLLGATE_BOOTSTRAP: 'off', LOG_LEVEL: 'warn' };
  if (withProjector) env.TOLLGATE_PROJECTIONS = 'off';
  const gateways: GatewayProcess[] = [];
  for (let i = 0; i < gatewayCount; i++) gateways.push(await spawnGateway(env));
  return {
    gateways,
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      projector?.child.kill('SIGTERM');
      if (url) await dropSchemas(url, schema);
    },
  };
}

const origin = (g: GatewayProcess) => g.baseUrl.replace(/\/v1$/, '');

async function admin(g: GatewayProcess, method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${origin(g)}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, any>;
  if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function read(g: GatewayProcess, key: string, path: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(`${g.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** Every way a read can disagree with the writes before it; empty when it agrees. */
function subscriptionProblems(r: { status: number; body: Record<string, any> }, extra: number): string[] {
  if (r.status !== 200) return [`subscription ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`];
  const b = r.body;
  const want = { status: 'active', plan: 'ryw', total: QUOTA, used: 0, reserved: 0, remaining: QUOTA, extra, remaining_tokens: QUOTA + extra };
  const got = {
    status: b.status,
    plan: b.plan?.id,
    total: b.quota?.total,
    used: b.quota?.used,
    reserved: b.quota?.reserved,
    remaining: b.quota?.remaining,
    extra: b.extra_tokens?.granted,
    remaining_tokens: b.remaining_tokens,
  };
  return JSON.stringify(got) === JSON.stringify(want) ? [] : [`subscription ${JSON.stringify(got)} instead of ${JSON.stringify(want)}`];
}

/** Opens, subscribes and keys one account, reading it at once after each step; returns what went wrong. */
async function openAndRead(i: number, writer: GatewayProcess, reader: GatewayProcess, modelCount: number): Promise<string[]> {
  const id = `ryw-${i}`;
  await admin(writer, 'POST', '/accounts', { account_id: id, name: `customer ${i}` });
  await admin(writer, 'POST', `/accounts/${id}/subscription`, { plan_id: 'ryw' });
  const key = (await admin(writer, 'POST', `/accounts/${id}/keys`, { name: 'first' })).key as string;
  const problems = subscriptionProblems(await read(reader, key, '/subscription'), 0);
  const usage = await read(reader, key, '/usage');
  if (usage.status !== 200 || usage.body.totals?.requests !== 0) problems.push(`usage ${usage.status} ${JSON.stringify(usage.body).slice(0, 200)}`);
  const models = await read(reader, key, '/models');
  if (models.status !== 200 || models.body.data?.length !== modelCount)
    problems.push(`models ${models.status} with ${models.body.data?.length} models, want ${modelCount}`);
  // What the operator does next: a top-up, seen by the customer's next read.
  await admin(writer, 'POST', `/accounts/${id}/extra-tokens`, { amount: EXTRA, reason: 'welcome' });
  problems.push(...subscriptionProblems(await read(reader, key, '/subscription'), EXTRA));
  const row: Record<string, any> = await admin(reader, 'GET', `/accounts/${id}`).catch((e: Error) => ({ error: e.message }));
  if (Number(row.extra_granted) !== EXTRA) problems.push(`admin read ${JSON.stringify(row).slice(0, 200)}`);
  return problems.map((p) => `${id} (written through gateway ${writer.baseUrl}, read through ${reader.baseUrl}): ${p}`);
}

async function runScenario(t: Topology): Promise<void> {
  const [first] = t.gateways;
  await admin(first, 'POST', '/plans', { plan_id: 'ryw', name: 'RYW', quota: QUOTA, validity_days: 30, requests_per_minute: 600, models: ['*'] });
  const modelCount = (await admin(first, 'GET', '/models')).data.length as number;
  assert.ok(modelCount > 0);
  const n = t.gateways.length;
  const problems: string[] = [];
  const accountsWrong = new Set<number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      for (let i = next++; i < ACCOUNTS; i = next++) {
        // Every pairing of writer and reader occurs: same gateway and across gateways.
        const found = await openAndRead(i, t.gateways[i % n], t.gateways[Math.floor(i / n) % n], modelCount);
        if (found.length) accountsWrong.add(i);
        problems.push(...found);
      }
    }),
  );
  assert.equal(problems.slice(0, 10), [], `${accountsWrong.size} of ${ACCOUNTS} accounts read something other than what was written`);
}

const scenarios: Array<[string, number, boolean]> = url
  ? [
      ['PostgreSQL, one gateway', 1, false],
      ['PostgreSQL, two gateways with default settings', 2, false],
      ['PostgreSQL, two gateways and a projector', 2, true],
    ]
  : [['embedded PGlite, one gateway', 1, false]];

for (const [name, gateways, withProjector] of scenarios) {
  test(`${ACCOUNTS} accounts read at once after each admin write: ${name}`, async () => {
    const t = await topology(gateways, withProjector);
    try {
      await runScenario(t);
    } finally {
      await t.stop();
    }
  });
}

test.run();
