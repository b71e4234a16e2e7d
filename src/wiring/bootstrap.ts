// First start on an empty ledger: a demo plan with every model, an account and a key, so a
// newcomer can make a call at once, and money on the books at once: a second account,
// `demo-books`, buys the demo plan with a recorded manual payment, its model's channel gets a cost
// rate, and a few of its calls are metered, so the console's Finance page shows revenue, deferred
// revenue, upstream cost and margin. The demo key's own account stays untouched (its usage and
// quota are the newcomer's). The key is returned here and printed once by the CLI.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import * as plans from '../../projections/accounts/plans.ts';
import type { Payments } from '../books/payments.ts';
import { issueKey } from '../keys/index.ts';
import { accountCommand, definePlan, openAccount, subscribe } from '../accounts/index.ts';
import { modelDecider } from '../catalogue/index.ts';
import { costRatesDecider } from '../catalogue/cost-rates.ts';

const DEMO_PLAN = { planId: 'demo', name: 'Demo', quota: 10_000_000, validityDays: 365, requestsPerMinute: 600, models: ['*'] };
/** The model the README's first call uses; the demo's metered calls use it too. */
export const DEMO_MODEL = 'cx/gen-6-luna';
/** The demo plan's price (minor units of the settlement currency) and the calls metered on it. */
const DEMO_PRICE = 2000;
const DEMO_CALLS = [
  { promptTokens: 120_000, completionTokens: 30_000 },
  { promptTokens: 80_000, completionTokens: 45_000 },
  { promptTokens: 200_000, completionTokens: 60_000 },
];

/** A channel of the demo model, as the registry lists it. */
export interface DemoChannel {
  id: string;
  upstream_model: string;
  models: string[];
}

export interface DemoBooks {
  currency: string;
  paid: number;
  calls: number;
}

export async function bootstrapDemo(
  ledger: Ledger,
  payments?: Payments,
  channels: DemoChannel[] = [],
): Promise<{ keySecret: string; accountId: string; books: DemoBooks | null } | null> {
  if ((await plans.count(ledger.readModels.db, ledger.rmSchema)) > 0) return null;
  const actor = 'system:bootstrap';
  await definePlan(ledger, DEMO_PLAN, actor);
  const accountId = await openAccount(ledger, { accountId: 'demo', name: 'Demo account' }, actor);
  await subscribe(ledger, accountId, DEMO_PLAN.planId, actor);
  const key = await issueKey(ledger, accountId, 'demo key', actor);
  let books: DemoBooks | null = null;
  if (payments) {
    // Prices for a newcomer to see money at once: the demo plan per period and one pack (in minor units).
    await payments.pricePlan(DEMO_PLAN.planId, DEMO_PRICE, undefined, true, actor);
    await payments.pricePack('pack-1m', { name: '1M extra tokens', tokens: 1_000_000, amount: 500 }, actor);
    books = await seedDemoBooks(ledger, payments, channels, actor);
  }
  await ledger.caughtUp();
  return { keySecret: key.secret, accountId, books };
}

/** The demo-books account: the plan bought by a recorded bank transfer, a cost rate, its calls metered. */
async function seedDemoBooks(ledger: Ledger, payments: Payments, channels: DemoChannel[], actor: string): Promise<DemoBooks> {
  const { currency } = await payments.priceList();
  const accountId = await openAccount(ledger, { accountId: 'demo-books', name: 'Demo customer (seeded books)' }, actor);
  await payments.recordManual(accountId, { reference: 'demo-transfer-1', amount: DEMO_PRICE, currency, planId: DEMO_PLAN.planId }, actor);
  const channel = channels.find((c) => c.models.includes(DEMO_MODEL));
  if (channel) {
    await ledger.command(
      costRatesDecider,
      streams.upstreamCosts(),
      {
        type: 'SetRate',
        channel: channel.id,
        upstreamModel: channel.upstream_model,
        currency: currency ?? 'USD',
        effectiveAt: new Date(Date.now() - 60_000).toISOString(),
        prices: { input: '0.50', output: '1.50' },
        settlement: currency,
      },
      metadataFor(actor),
    );
    const key = await issueKey(ledger, accountId, 'demo books key', actor);
    await meterDemoCalls(ledger, accountId, key.keyId, channel);
  }
  return { currency: currency ?? 'USD', paid: DEMO_PRICE, calls: channel ? DEMO_CALLS.length : 0 };
}

/** The demo's calls, metered as a served call is (a hold, then its charge), with the channel that answered. */
async function meterDemoCalls(ledger: Ledger, accountId: string, keyId: string, channel: DemoChannel): Promise<void> {
  const md = metadataFor(`key:${keyId}`);
  // At the model's price, as the gateway meters it.
  const { multiplierMilli } = await ledger.streamState(modelDecider, streams.model(DEMO_MODEL));
  for (const [i, call] of DEMO_CALLS.entries()) {
    const holdId = `demo-hold-${i + 1}`;
    const amount = call.promptTokens + call.completionTokens;
    await accountCommand(
      ledger,
      accountId,
      { type: 'Reserve', holdId, requestId: `demo-request-${i + 1}`, keyId, model: DEMO_MODEL, kind: 'chat', amount, now: new Date(), ttlMs: 60_000 },
      md,
    );
    await accountCommand(
      ledger,
      accountId,
      {
        type: 'SettleChat',
        holdId,
        multiplierMilli,
        promptTokens: call.promptTokens,
        completionTokens: call.completionTokens,
        reasoningEffort: null,
        api: 'chat.completions',
        streamed: false,
        aborted: false,
        channel: channel.id,
        upstreamModel: channel.upstream_model,
      },
      md,
    );
  }
}
