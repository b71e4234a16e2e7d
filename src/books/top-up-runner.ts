// Charges the top-ups the log has started (src/accounts/auto-top-up.ts): each pending row of the
// top-ups read model is charged to the account's saved card and settled on the account stream,
// succeeded with its payment or failed with the reason. Every gateway runs it, right after one of
// its own charges starts a top-up and at each sweep: two charging one top-up at once get the same
// PaymentIntent from Stripe (its idempotency key is the top-up's id) and the same payment, and the
// account decider settles it once. An error that is not the card's (Stripe unreachable) leaves it
// pending for the next run; a declined card fails it, and it is not tried again.
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import { serialRuns } from '../serial-runs.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { accountCommand } from '../accounts/index.ts';
import { pendingTopUps } from '../../projections/books/top-ups.ts';
import type { StripeGateway } from './stripe.ts';

const BATCH = 50;
const RUNNER = 'system:auto-top-up';

export function createTopUpRunner(ledger: Ledger, stripe: StripeGateway | null, log: Logger) {
  const { db, schema } = ledger.readModels;

  async function settle(accountId: string, topUpId: string, outcome: { paymentId: string } | { failure: string }): Promise<void> {
    await accountCommand(ledger, accountId, { type: 'SettleTopUp', topUpId, outcome }, metadataFor(RUNNER));
    if ('failure' in outcome) log.warn({ accountId, topUpId, reason: outcome.failure }, 'auto top-up failed; not tried again until the customer sets it again');
  }

  async function chargePending(): Promise<number> {
    let settled = 0;
    for (const row of await pendingTopUps(db, schema, BATCH)) {
      const top = { topUpId: row.top_up_id, accountId: row.account_id, packId: row.pack_id };
      try {
        const outcome = stripe ? await stripe.chargeTopUp(top) : { failure: 'card payments (Stripe) are not configured' };
        if (outcome === null) continue; // settled already; the read model has not caught up
        await settle(top.accountId, top.topUpId, outcome);
        settled++;
      } catch (err) {
        log.warn({ err: (err as Error).message, topUpId: top.topUpId }, 'auto top-up not charged yet; the next sweep tries again');
      }
    }
    return settled;
  }

  return {
    /** Charges what is pending now, one pass at a time (serial-runs.ts). */
    run: serialRuns(chargePending),
  };
}

export type TopUpRunner = ReturnType<typeof createTopUpRunner>;
