// Gateways and a projector started in every order on a fresh PostgreSQL schema (docker-compose's
// `depends_on: service_started` allows any): once /readyz says ready, every gateway knows the
// models and the keys, whichever process came first.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ChildProcess } from 'node:child_process';
import { spawnGateway, spawnProjector, dropSchemas, type GatewayProcess } from './support/gateway.ts';
import { uniqueSchema } from './support/db.ts';

const url = process.env.DATABASE_URL;
const ADMIN = 'tg_admin_start_order_test_0123456789abcdef';
const MODEL = 'alpha-haiku-4.5';

const site = (g: GatewayProcess) => g.baseUrl.replace(/\/v1$/, '');

async function admin(g: GatewayProcess, path: string, body: unknown) {
  const res = await fetch(`${site(g)}/admin/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, any>;
  assert.ok(res.ok, `${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Waits for /readyz to say ready (a projector starting on a loaded machine may take a while). */
async function ready(g: GatewayProcess) {
  const until = Date.now() + 60_000;
  for (;;) {
    const res = await fetch(`${site(g)}/readyz`);
    const body = await res.text();
    if (res.status === 200) return;
    assert.ok(Date.now() < until, `not ready: ${body}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const ORDERS = [
  ['projector', 'gateway', 'gateway'],
  ['gateway', 'projector', 'gateway'],
  ['gateway', 'gateway', 'projector'],
] as const;

if (!url) {
  console.log('start-order suite: SKIPPED (needs DATABASE_URL: several processes cannot share embedded PGlite)');
} else {
  for (const order of ORDERS)
    test(`started ${order.join(', then ')} on a fresh schema: every gateway lists the models and answers`, async () => {
      const schema = uniqueSchema('so');
      const gateways: GatewayProcess[] = [];
      const projectors: ChildProcess[] = [];
      try {
        for (const process of order) {
          if (process === 'projector') {
            const p = spawnProjector(schema);
            projectors.push(p.child);
            await p.running;
          } else {
            const env = { TOLLGATE_SCHEMA: schema, TOLLGATE_PROJECTIONS: 'off', TOLLGATE_ADMIN_TOKEN: ADMIN, TOLLGATE_BOOTSTRAP: 'off' };
            gateways.push(await spawnGateway(env));
          }
        }
        for (const g of gateways) await ready(g);
        await admin(gateways[0], '/plans', { plan_id: 'p', name: 'p', quota: 1_000_000, validity_days: 30, requests_per_minute: 1000, models: ['*'] });
        await admin(gateways[0], '/accounts', { account_id: 'a', name: 'a' });
        await admin(gateways[0], '/accounts/a/subscription', { plan_id: 'p' });
        const { key } = await admin(gateways[0], '/accounts/a/keys', { name: 'k' });
        for (const [i, g] of gateways.entries()) {
          const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
          const models = (await (await fetch(`${g.baseUrl}/models`, { headers: auth })).json()) as { data: Array<{ id: string }> };
          assert.ok(
            models.data?.some((m) => m.id === MODEL),
            `gateway ${i + 1} lists ${JSON.stringify(models)}`,
          );
          const chat = await fetch(`${g.baseUrl}/chat/completions`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
          });
          assert.is(chat.status, 200, `gateway ${i + 1}: ${await chat.text()}`);
        }
      } finally {
        await Promise.all(gateways.map((g) => g.stop()));
        for (const p of projectors) p.kill('SIGTERM');
        await dropSchemas(url, schema);
      }
    });
}

test.run();
