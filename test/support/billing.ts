// What the tests of buying in /app start with: the Stripe double, an SMTP server on loopback for
// sign-in links, a gateway with the Stripe path and the session API on, a pack (p300: 300 tokens
// for 3.00 USD) and an account whose plan costs 20.00 USD, with the given members invited.
import * as assert from 'uvu/assert';
import { customerSettingsFromEnv } from '../../src/config.ts';
import { startSmtpServer } from './customer-servers.ts';
import type { TestGateway } from './gateway.ts';
import { call, openAccount, type Reply, type TestAccount } from './http.ts';
import { startStripeDouble, startStripeGateways, type StripeDouble } from './stripe-double.ts';

export interface BillingSetup {
  stripe: StripeDouble;
  smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  gw: TestGateway;
  acme: TestAccount;
  admin(path: string, body?: unknown, method?: string): Promise<Reply>;
  stop(): Promise<void>;
}

export async function startBillingSetup(adminToken: string, members: Array<[email: string, role: string]>): Promise<BillingSetup> {
  const stripe = await startStripeDouble();
  const smtp = await startSmtpServer();
  const { gw, stopAll } = await startStripeGateways(stripe, adminToken, { customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url } });
  const admin = (path: string, body?: unknown, method?: string) =>
    call(gw, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${adminToken}`, 'x-tollgate-actor': 'ops' } });
  assert.is((await admin('/packs/p300', { name: '300 tokens', tokens: 300, amount: 300 }, 'PUT')).status, 200);
  const acme = await openAccount(gw, { quota: 1_000 });
  assert.is((await admin(`/plans/${acme.planId}/price`, { amount: 2000 }, 'PUT')).status, 200);
  for (const [email, role] of members) assert.is((await admin(`/accounts/${acme.accountId}/members`, { email, role })).status, 201);
  return {
    stripe,
    smtp,
    gw,
    acme,
    admin,
    async stop() {
      await stopAll();
      await smtp.close();
    },
  };
}
