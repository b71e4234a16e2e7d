// Auto top-up under /v1, for the account's own key: save a card through Stripe Checkout (setup
// mode), choose a threshold and a pack, turn it off, and see it with its top-ups. The decisions
// are the account decider's (src/accounts/auto-top-up.ts); these routes check the input and ask.
import type { Context } from 'koa';
import type { BooksDeps } from './books-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { callerOf } from '../http/state.ts';
import { metadataFor, requireId } from '../ledger/ledger.ts';
import { accountCommand, accountState, requireThreshold, tokensLeft } from '../accounts/index.ts';
import { topUpsOf } from '../../projections/books/top-ups.ts';

const stripeOff = () =>
  new ApiError(400, 'Card payments are off on this gateway, so no card can be saved for auto top-up.', 'invalid_request_error', 'stripe_off');

export function autoTopUpRoutes(deps: BooksDeps) {
  async function view(accountId: string) {
    const s = await accountState(deps.ledger, accountId);
    const t = s.autoTopUp ?? null;
    const card = s.paymentMethod ?? null;
    const { db, schema } = deps.ledger.readModels;
    return {
      object: 'auto_top_up',
      account_id: accountId,
      enabled: t !== null && t.failed === null,
      threshold_tokens: t?.thresholdTokens ?? null,
      pack_id: t?.packId ?? null,
      tokens_left: tokensLeft(s, new Date()),
      card: card && { brand: card.brand, last4: card.last4 },
      pending_top_up: t?.pending ?? null,
      failed_reason: t?.failed ?? null,
      top_ups: (await topUpsOf(db, schema, accountId, 20)).map((r) => ({
        id: r.top_up_id,
        pack_id: r.pack_id,
        status: r.status,
        started_at: r.started_at,
        tokens_left: r.tokens_left,
        payment_id: r.payment_id,
        reason: r.reason,
        ended_at: r.ended_at,
      })),
    };
  }

  return {
    get: async (ctx: Context) => {
      ctx.body = await view(callerOf(ctx).accountId);
    },
    /** Turns auto top-up on, or changes it: `threshold_tokens` and `pack_id`. */
    set: async (ctx: Context) => {
      const { accountId, actor } = callerOf(ctx);
      const b = ctx.request.body as Record<string, unknown> | undefined;
      if (!b || typeof b !== 'object' || Array.isArray(b))
        throw badRequest('The request body must be a JSON object with "threshold_tokens" and "pack_id".', 'threshold_tokens');
      const thresholdTokens = requireThreshold(b.threshold_tokens);
      const packId = requireId(b.pack_id, 'pack_id');
      const { listPrice } = await deps.payments.resolve({ packId });
      if (!listPrice) throw badRequest(`pack ${packId} is not on sale, so it cannot be bought automatically.`, 'pack_id');
      await accountCommand(deps.ledger, accountId, { type: 'SetAutoTopUp', thresholdTokens, packId }, metadataFor(actor));
      ctx.body = await view(accountId);
    },
    off: async (ctx: Context) => {
      const { accountId, actor } = callerOf(ctx);
      await accountCommand(deps.ledger, accountId, { type: 'TurnOffAutoTopUp' }, metadataFor(actor));
      ctx.body = await view(accountId);
    },
    /** A Checkout Session in setup mode: the customer saves a card on Stripe's page; nothing is charged. */
    card: async (ctx: Context) => {
      if (!deps.stripe) throw stripeOff();
      const session = await deps.stripe.cardSetup(callerOf(ctx).accountId, { returnTo: ctx.state.checkoutReturn });
      ctx.status = 201;
      ctx.body = { object: 'checkout.session', ...session };
    },
  };
}
