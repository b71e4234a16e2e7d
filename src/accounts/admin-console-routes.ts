// Admin API endpoints the operator console (/admin) needs beyond the rest of /admin/v1: the
// accounts, a page at a time, and one account's balance as the money rule (src/accounts/balance.ts)
// reads it. Mounted inside the admin router, so the admin token guards them like every other route.
import Router from '@koa/router';
import type { RouteDeps } from '../http/route-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import * as balance from './balance.ts';
import { accountState } from './commands.ts';
import { creditsBody } from './payment-bodies.ts';
import type { Balance } from './balance.ts';
import * as accounts from '../../projections/accounts/accounts.ts';
import type { AccountRow } from '../../projections/accounts/accounts.ts';

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;

const iso = (v: string | null): string | null => (v ? new Date(v).toISOString() : null);

/** An account as the console lists it: its plan, and its balance by the money rule. */
export function accountSummary(a: AccountRow, now: Date) {
  const b: Balance = {
    quota: Number(a.quota_total),
    quotaUsed: Number(a.quota_used),
    extraGranted: Number(a.extra_granted),
    extraUsed: Number(a.extra_used),
    reserved: Number(a.reserved),
    startsAt: iso(a.starts_at),
    expiresAt: iso(a.expires_at),
  };
  const status = a.plan_id === null ? 'no_plan' : balance.isPlanActive(b, now) ? 'active' : 'expired';
  return {
    object: 'account' as const,
    account_id: a.account_id,
    name: a.name,
    plan: a.plan_id ? { id: a.plan_id, name: a.plan_name } : null,
    status,
    quota: { total: b.quota, used: b.quotaUsed, reserved: b.reserved, remaining: balance.mainRemaining(b) },
    extra_tokens: { granted: b.extraGranted, used: b.extraUsed, remaining: balance.extraRemaining(b) },
    remaining_tokens: balance.availableTokens(b, now),
    open_holds: Number(a.open_holds),
    starts_at: b.startsAt,
    expires_at: b.expiresAt,
    rate_limit: { requests_per_minute: a.requests_per_minute === null ? null : Number(a.requests_per_minute) },
    models: a.models,
    opened_at: iso(a.opened_at),
  };
}

function limitOf(raw: unknown): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_LIMIT)) throw badRequest(`'limit' must be a whole number from 1 to ${MAX_LIMIT}.`, 'limit');
  return n;
}

/** An account id from the query or the path; it reaches SQL as a parameter, which cannot hold a NUL. */
function accountIdOf(raw: unknown, name = 'after'): string | undefined {
  if (raw === undefined) return undefined;
  // eslint-disable-next-line no-control-regex
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 200 || /[\u0000-\u001f]/.test(raw))
    throw badRequest(`'${name}' must be an account id.`, name);
  return raw;
}

export function adminConsoleRoutes(deps: RouteDeps): Router {
  const { ledger, db } = deps;
  const r = new Router();

  // GET /admin/v1/accounts?limit=&after=: accounts in id order; `next_after` continues the list.
  r.get('/accounts', async (ctx) => {
    const limit = limitOf(ctx.query.limit);
    const after = accountIdOf(ctx.query.after);
    await ledger.readYourWrites();
    const rows = await accounts.page(db, ledger.rmSchema, { limit: limit + 1, after });
    const now = new Date();
    const data = rows.slice(0, limit).map((a) => accountSummary(a, now));
    const hasMore = rows.length > limit;
    ctx.body = { object: 'list', data, has_more: hasMore, next_after: hasMore ? data[data.length - 1].account_id : null };
  });

  // GET /admin/v1/accounts/:id/balance: the same summary for one account.
  r.get('/accounts/:id/balance', async (ctx) => {
    const id = accountIdOf(ctx.params.id, 'id') as string;
    await ledger.readYourWrites();
    const row = await accounts.byId(db, ledger.rmSchema, id);
    if (!row) throw new ApiError(404, `account ${id} not found`, 'invalid_request_error', 'not_found');
    const now = new Date();
    // Its lots of credit with terms, as the account's stream holds them (the customer sees the same in /v1/subscription).
    ctx.body = { ...accountSummary(row, now), credits: creditsBody((await accountState(ledger, id)).credits, now) };
  });
  return r;
}
