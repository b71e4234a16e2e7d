// The billing profile's routes: the operator's under /admin/v1 (admin token, actor), and the
// handlers /app mounts under an account for its owners and billing members (the 'billing' action).
import type { Context } from 'koa';
import Router from '@koa/router';
import type { Ledger } from '../ledger/ledger.ts';
import { requireId } from '../ledger/ledger.ts';
import { billingProfileOf, setBillingProfile } from './billing-profiles.ts';

export function adminBillingProfileRoutes(deps: { ledger: Ledger }): Router {
  const r = new Router();
  r.get('/accounts/:id/billing-profile', async (ctx) => {
    ctx.body = await billingProfileOf(deps.ledger, requireId(ctx.params.id, 'account_id'));
  });
  r.put('/accounts/:id/billing-profile', async (ctx) => {
    ctx.body = await setBillingProfile(deps.ledger, requireId(ctx.params.id, 'account_id'), ctx.request.body, ctx.state.actor);
  });
  return r;
}

/** The handlers of an account's session API (its account id and actor found by the caller's route). */
export const billingProfileHandlers = (ledger: Ledger, of: (ctx: Context) => { accountId: string; actor: string }) => ({
  get: async (ctx: Context) => {
    ctx.body = await billingProfileOf(ledger, of(ctx).accountId);
  },
  put: async (ctx: Context) => {
    const { accountId, actor } = of(ctx);
    ctx.body = await setBillingProfile(ledger, accountId, ctx.request.body, actor);
  },
});
