// The session API's account side under /app/api/accounts/:account: members, keys, usage and
// billing, each behind its action in the role table (src/ledger/roles.ts). A person who is not a
// member of the account, or whose role lacks the action, gets a 403 and nothing is written.
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import type { CustomerDeps } from './customer-deps.ts';
import { badRequest } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import { isRole, type Action } from '../ledger/roles.ts';
import { changeRole, invite, memberActor, membersWithHistory, remove, requireMember } from './members.ts';
import { accountKeyHandlers, issueManagementKey, listManagementKeys, revokeManagementKey } from '../keys/index.ts';
import { requireEmail } from './sign-in.ts';
import { buildStatement, statementCsv } from '../audit/index.ts';
import { subscription, usage } from '../calls/index.ts';
import { requireSession } from './customer-auth-routes.ts';
import { autoTopUpRoutes, billingProfileHandlers, documentHandlers, paymentRoutes } from '../books/index.ts';
import { balanceAlertRoutes } from '../accounts/index.ts';
import { requirePublicOrigin } from '../http/public-origin.ts';
import { callerOf, personOf } from '../http/state.ts';

type Body = Record<string, unknown>;
const objectBody = (ctx: Context): Body => {
  const b = ctx.request.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Body;
};

function role(v: unknown) {
  if (!isRole(v)) throw badRequest("'role' must be owner, admin, billing or developer.", 'role');
  return v;
}

/**
 * The member allowed `action` in the path's account, as the request's caller (the routes that
 * serve key holders too, usage and payments, find the account and the actor there).
 */
const allowed = (deps: CustomerDeps, action: Action) => async (ctx: Context, next: Next) => {
  const accountId = requireId(ctx.params.account, 'account_id');
  const member = await requireMember(deps.ledger, accountId, personOf(ctx).email, action);
  ctx.state.caller = { kind: 'member', keyId: null, accountId, member, actor: memberActor(member), requestId: ctx.state.requestId };
  await next();
};

const DAY_MS = 86_400_000;
function statementRange(ctx: Context) {
  const to = ctx.query.to === undefined ? new Date() : new Date(String(ctx.query.to));
  const from = ctx.query.from === undefined ? new Date(to.getTime() - 30 * DAY_MS) : new Date(String(ctx.query.from));
  if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || from >= to)
    throw badRequest("'from' and 'to' must be ISO 8601 times, 'from' first.", 'from');
  return { from, to };
}

export function customerAccountRoutes(deps: CustomerDeps): Router {
  const { ledger } = deps;
  const r = new Router({ prefix: '/accounts/:account' });
  r.use(requireSession(ledger));
  const by = (ctx: Context) => {
    const caller = callerOf(ctx);
    if (caller.kind !== 'member') throw new Error(`${ctx.method} ${ctx.path} needs a member's caller, not a ${caller.kind}'s`);
    return { actorRole: caller.member.role, actor: caller.actor };
  };
  const acct = (ctx: Context) => callerOf(ctx).accountId;

  r.get('/members', allowed(deps, 'members.read'), async (ctx) => {
    ctx.body = { object: 'members', ...(await membersWithHistory(ledger, acct(ctx))) };
  });
  r.post('/members', allowed(deps, 'members.manage'), async (ctx) => {
    const b = objectBody(ctx);
    ctx.status = 201;
    ctx.body = { object: 'member', ...(await invite(ledger, acct(ctx), requireEmail(b.email), role(b.role), by(ctx))) };
  });
  r.patch('/members/:member', allowed(deps, 'members.manage'), async (ctx) => {
    const m = await changeRole(ledger, acct(ctx), requireId(ctx.params.member, 'member_id'), role(objectBody(ctx).role), by(ctx));
    ctx.body = { object: 'member', member_id: m.memberId, email: m.email, role: m.role, status: m.status };
  });
  r.delete('/members/:member', allowed(deps, 'members.manage'), async (ctx) => {
    await remove(ledger, acct(ctx), requireId(ctx.params.member, 'member_id'), by(ctx));
    ctx.body = { object: 'member', member_id: ctx.params.member, removed: true };
  });

  const keys = accountKeyHandlers(deps);
  r.get('/keys', allowed(deps, 'keys.read'), keys.list);
  r.post('/keys', allowed(deps, 'keys.manage'), keys.create);
  r.patch('/keys/:key', allowed(deps, 'keys.manage'), keys.update);
  r.post('/keys/:key/rotate', allowed(deps, 'keys.manage'), keys.rotate);
  r.post('/keys/:key/revoke', allowed(deps, 'keys.manage'), keys.revoke);

  r.get('/management-keys', allowed(deps, 'keys.read'), async (ctx) => {
    ctx.body = { object: 'list', data: await listManagementKeys(ledger, acct(ctx)) };
  });
  r.post('/management-keys', allowed(deps, 'keys.manage'), async (ctx) => {
    ctx.status = 201;
    ctx.body = { object: 'management_key', account_id: acct(ctx), ...(await issueManagementKey(ledger, acct(ctx), objectBody(ctx).name, callerOf(ctx).actor)) };
  });
  r.post('/management-keys/:key/revoke', allowed(deps, 'keys.manage'), async (ctx) => {
    await revokeManagementKey(ledger, acct(ctx), requireId(ctx.params.key, 'key_id'), callerOf(ctx).actor);
    ctx.body = { object: 'management_key', key_id: ctx.params.key, status: 'revoked' };
  });

  r.get('/usage', allowed(deps, 'usage.read'), usage(deps));

  const money = paymentRoutes(deps, deps.payments, deps.paymentSettings);
  r.get('/subscription', allowed(deps, 'billing'), subscription(deps));
  r.get('/prices', allowed(deps, 'billing'), money.prices);
  // Checkout sends a member back to the billing page at the public origin, never at the request's
  // Host (STRIPE_SUCCESS_URL and STRIPE_CANCEL_URL are for /v1/checkout/sessions, whose callers choose their own page).
  r.post('/checkout', allowed(deps, 'billing'), async (ctx) => {
    const page = `${requirePublicOrigin(deps.publicOrigin, 'Checkout from /app')}/app/billing`;
    ctx.state.checkoutReturn = { success: `${page}?checkout=paid`, cancel: `${page}?checkout=cancelled` };
    await money.checkout(ctx);
  });
  r.post('/redemptions', allowed(deps, 'billing'), money.redeem);
  r.get('/payments', allowed(deps, 'billing'), money.list);
  r.get('/payments/:id', allowed(deps, 'billing'), money.receipt);
  r.get('/billing/usage', allowed(deps, 'billing'), usage(deps));
  // Who the account's invoices are made out to: read and set by its owners and billing members.
  const profile = billingProfileHandlers(ledger, (ctx) => ({ accountId: acct(ctx), actor: by(ctx).actor }));
  r.get('/billing-profile', allowed(deps, 'billing'), profile.get);
  r.put('/billing-profile', allowed(deps, 'billing'), profile.put);
  // The account's invoices and credit notes, to list and download.
  const documents = documentHandlers(ledger, (ctx) => acct(ctx));
  r.get('/invoices', allowed(deps, 'billing'), documents.list);
  r.get('/invoices/:number', allowed(deps, 'billing'), documents.one);
  // When the balance runs low: auto top-up with a saved card, and balance alerts, as the account's key has them on /v1.
  const topUp = autoTopUpRoutes(deps);
  r.get('/auto-top-up', allowed(deps, 'billing'), topUp.get);
  r.put('/auto-top-up', allowed(deps, 'billing'), topUp.set);
  r.delete('/auto-top-up', allowed(deps, 'billing'), topUp.off);
  r.post('/auto-top-up/card', allowed(deps, 'billing'), async (ctx) => {
    const page = `${requirePublicOrigin(deps.publicOrigin, 'Saving a card from /app')}/app/billing`;
    ctx.state.checkoutReturn = { success: `${page}?card=saved`, cancel: `${page}?card=cancelled` };
    await topUp.card(ctx);
  });
  const alerts = balanceAlertRoutes(ledger);
  r.get('/balance-alerts', allowed(deps, 'billing'), alerts.get);
  r.put('/balance-alerts', allowed(deps, 'billing'), alerts.set);
  r.get('/statement', allowed(deps, 'billing'), async (ctx) => {
    const { from, to } = statementRange(ctx);
    await ledger.caughtUp();
    const s = await buildStatement(ledger, acct(ctx), from, to);
    if (ctx.query.format === 'csv') {
      ctx.type = 'text/csv; charset=utf-8';
      ctx.set('content-disposition', `attachment; filename="statement-${acct(ctx)}.csv"`);
      ctx.body = statementCsv(s);
    } else ctx.body = s;
  });
  return r;
}
