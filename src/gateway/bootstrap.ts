// First start on an empty ledger: a demo plan with every model, an account and a key, so a
// newcomer can make a call at once. The key is returned here and printed once by the CLI.
import type { Ledger } from '../ledger/ledger.ts';
import * as plans from '../../projections/plans.ts';
import type { Payments } from '../payments/service.ts';

const DEMO_PLAN = { planId: 'demo', name: 'Demo', quota: 10_000_000, validityDays: 365, requestsPerMinute: 600, models: ['*'] };

export async function bootstrapDemo(ledger: Ledger, payments?: Payments): Promise<{ keySecret: string; accountId: string } | null> {
  if ((await plans.count(ledger.readModels.db, ledger.rmSchema)) > 0) return null;
  const actor = 'system:bootstrap';
  await ledger.definePlan(DEMO_PLAN, actor);
  const accountId = await ledger.openAccount({ accountId: 'demo', name: 'Demo account' }, actor);
  await ledger.subscribe(accountId, DEMO_PLAN.planId, actor);
  const key = await ledger.issueKey(accountId, 'demo key', actor);
  // Prices for a newcomer to see money at once: the demo plan per period and one pack (in minor units).
  if (payments) {
    await payments.pricePlan(DEMO_PLAN.planId, 2000, undefined, true, actor);
    await payments.pricePack('pack-1m', { name: '1M extra tokens', tokens: 1_000_000, amount: 500 }, actor);
  }
  await ledger.caughtUp();
  return { keySecret: key.secret, accountId };
}
