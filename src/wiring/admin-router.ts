// The operator API under /admin/v1, behind the admin token. Every action is an event whose
// metadata records the actor ("admin:<x-tollgate-actor or 'operator'>").
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import type { GatewayDeps } from './deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { ADMIN_GUESSES_IN_ALL_FACTOR, ADMIN_GUESSES_PER_MINUTE, adminTokenMatches } from '../http/admin-token.ts';
import { ADMIN_LIMITS, jsonBody } from '../http/body.ts';
import { failureThrottle } from '../http/failure-throttle.ts';
import { toMilli } from '../money/pricing.ts';
import { requireId } from '../ledger/ledger.ts';
import { requireTokenAmount } from '../ledger/errors.ts';
import { maskKey } from '../keys/secrets.ts';
import * as accounts from '../../projections/accounts/accounts.ts';
import * as models from '../../projections/catalogue/models.ts';
import * as plans from '../../projections/accounts/plans.ts';
import { adminConsoleRoutes } from '../accounts/admin-console-routes.ts';
import { adminKeysRoutes } from '../keys/admin-keys-routes.ts';
import type { PlanTerms } from '../ledger/events.ts';
import { webhookAdminRouter } from '../webhooks/admin-webhooks-routes.ts';
import { adminPaymentsRoutes } from '../books/admin-payments-routes.ts';
import { adminFinanceRoutes } from '../books/admin-finance-routes.ts';
import { adminBillingProfileRoutes } from '../books/billing-profile-routes.ts';
import { adminDocumentRoutes } from '../books/document-routes.ts';
import { adminMembersRoutes } from '../customers/admin-members-routes.ts';
import { adminManagementKeyRoutes } from '../keys/admin-management-keys-routes.ts';
import { adminCostRoutes } from '../catalogue/admin-cost-routes.ts';
import { exchangeRateRoutes } from '../books/exchange-rate-routes.ts';

import { body, MAX_MODEL_ID, str, type Body } from '../http/admin-input.ts';
import { adminLedgerWorkRoutes } from '../audit/admin-ledger-work-routes.ts';
import { priceModel, setChannelEnabled } from '../catalogue/index.ts';
import { issueKey, revokeKey } from '../keys/index.ts';
import { DEFAULT_PRIORITY, definePlan, grantExtra, openAccount, requireCreditTerms, subscribe, updatePlan } from '../accounts/index.ts';

/**
 * The admin token, compared first: the right one always goes through, so nobody can lock the
 * operator out by sending wrong ones (the token's 256 bits, or an operator's 32+ characters, are
 * what stops guessing). Wrong tokens are counted per source address and from all sources together
 * over the last minute; past either limit a wrong one is answered 429 with Retry-After instead of
 * 401, and no longer counted. A wrong token's work is bounded: one constant-time comparison of a
 * header Node caps at 16 KB; the counts keep at most `perMinute` failures for each of at most
 * 10,000 addresses, and `perMinute` × ADMIN_GUESSES_IN_ALL_FACTOR in all.
 */
function adminAuth(token: string, perMinute: number) {
  const perAddress = failureThrottle(perMinute);
  const inAll = failureThrottle(perMinute * ADMIN_GUESSES_IN_ALL_FACTOR, { maxSources: 1 });
  return async (ctx: Context, next: Next) => {
    const m = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'));
    if (m && adminTokenMatches(m[1], token)) {
      const name = ctx.get('x-tollgate-actor');
      ctx.state.actor = `admin:${/^[A-Za-z0-9_.@-]{1,64}$/.test(name) ? name : 'operator'}`;
      return next();
    }
    // A request without any token is no guess.
    if (m) {
      perAddress.check(ctx.ip, 'wrong admin tokens from this address');
      inAll.check('*', 'wrong admin tokens');
      perAddress.record(ctx.ip);
      inAll.record('*');
    }
    throw new ApiError(401, 'Missing or wrong admin token.', 'invalid_request_error', 'invalid_admin_token');
  };
}

// The bounds of the PlanDefined/PlanUpdated event schemas: checked here so that a value beyond
// them is the caller's 400, not a refused append (a 500).
const MAX_VALIDITY_DAYS = 3650;
const MAX_REQUESTS_PER_MINUTE = 1_000_000;
const MAX_PLAN_MODELS = 500;

function planTerms(b: Body, planId: string): PlanTerms {
  const models = b.models;
  if (
    !Array.isArray(models) ||
    models.length === 0 ||
    models.length > MAX_PLAN_MODELS ||
    new Set(models).size !== models.length ||
    !models.every((m) => typeof m === 'string' && m.length > 0 && m.length <= 100)
  ) {
    throw badRequest(`'models' must list distinct model ids (at most ${MAX_PLAN_MODELS}), or ["*"] for all.`, 'models');
  }
  const int = (name: string, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const v = b[name];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
      throw badRequest(`'${name}' must be a whole number from ${min} to ${max}.`, name);
    return v;
  };
  return {
    planId,
    name: str(b, 'name'),
    quota: int('quota', 0),
    validityDays: int('validity_days', 1, MAX_VALIDITY_DAYS),
    requestsPerMinute: int('requests_per_minute', 1, MAX_REQUESTS_PER_MINUTE),
    models: models as string[],
  };
}

export function adminRouter(deps: GatewayDeps, adminToken: string, opts: { failuresPerMinute?: number } = {}): Router {
  const { ledger } = deps;
  const r = new Router({ prefix: '/admin/v1' });
  r.use(adminAuth(adminToken, opts.failuresPerMinute ?? ADMIN_GUESSES_PER_MINUTE));
  // Read only once the token matched: an unknown caller cannot make the server parse anything.
  r.use(jsonBody(ADMIN_LIMITS));
  // Ids in paths reach SQL as parameters; PostgreSQL text cannot hold a NUL, and no id is that long.
  r.param('id', (id: unknown, ctx, next) => {
    // eslint-disable-next-line no-control-regex
    if (typeof id === 'string' && (id.length > 200 || /[\u0000-\u001f]/.test(id))) throw badRequest('That id is not valid.', 'id');
    return next();
  });
  r.use(adminConsoleRoutes(deps).routes()); // GET /accounts (paginated) and /accounts/:id/balance, for the console
  r.use(adminKeysRoutes(deps).routes()); // GET /accounts/:id/keys (with controls and spend), PATCH /keys/:id, POST /keys/:id/rotate
  r.use(adminMembersRoutes(ledger).routes()); // an account's members and who changed them
  r.use(adminManagementKeyRoutes(ledger).routes()); // an account's management keys (the key-management API)

  r.get('/plans', async (ctx) => {
    await ledger.readYourWrites();
    ctx.body = { object: 'list', data: await plans.list(ledger.readModels.db, ledger.rmSchema) };
  });
  r.post('/plans', async (ctx) => {
    const b = body(ctx);
    const terms = planTerms(b, requireId(b.plan_id, 'plan_id'));
    await definePlan(ledger, terms, ctx.state.actor);
    ctx.status = 201;
    ctx.body = { object: 'plan', ...terms };
  });
  r.put('/plans/:id', async (ctx) => {
    const terms = planTerms(body(ctx), requireId(ctx.params.id, 'plan_id'));
    const res = await updatePlan(ledger, terms, ctx.state.actor);
    ctx.body = { object: 'plan', ...terms, changed: res.events.length > 0 };
  });

  r.post('/accounts', async (ctx) => {
    const b = body(ctx);
    if (b.account_id !== undefined && typeof b.account_id !== 'string')
      throw badRequest("'account_id' must be a string (or left out to generate one).", 'account_id');
    const accountId = await openAccount(ledger, { accountId: b.account_id, name: str(b, 'name') }, ctx.state.actor);
    ctx.status = 201;
    ctx.body = { object: 'account', account_id: accountId };
  });
  r.get('/accounts/:id', async (ctx) => {
    await ledger.readYourWrites();
    const row = await accounts.byId(ledger.readModels.db, ledger.rmSchema, ctx.params.id);
    if (!row) throw new ApiError(404, `account ${ctx.params.id} not found`, 'invalid_request_error', 'not_found');
    ctx.body = { object: 'account', ...row };
  });
  r.post('/accounts/:id/subscription', async (ctx) => {
    const b = body(ctx);
    const res = await subscribe(ledger, requireId(ctx.params.id, 'account_id'), requireId(b.plan_id, 'plan_id'), ctx.state.actor);
    ctx.body = { object: 'subscription', event: res.events[0].type, ...res.events[0].data };
  });
  r.post('/accounts/:id/extra-tokens', async (ctx) => {
    const b = body(ctx);
    const amount = requireTokenAmount(b.amount, 'amount');
    const terms = requireCreditTerms(b, new Date());
    await grantExtra(
      ledger,
      requireId(ctx.params.id, 'account_id'),
      amount,
      typeof b.reason === 'string' ? b.reason.slice(0, 500) : '',
      ctx.state.actor,
      terms,
    );
    ctx.body = {
      object: 'extra_tokens',
      account_id: ctx.params.id,
      granted: amount,
      expires_at: terms.expiresAt ?? null,
      priority: terms.priority ?? DEFAULT_PRIORITY,
      models: terms.models ?? null,
    };
  });
  r.post('/accounts/:id/keys', async (ctx) => {
    const b = ctx.request.body && typeof ctx.request.body === 'object' ? (ctx.request.body as Body) : {};
    const key = await issueKey(
      ledger,
      requireId(ctx.params.id, 'account_id'),
      typeof b.name === 'string' && b.name ? b.name.slice(0, 200) : 'default',
      ctx.state.actor,
    );
    ctx.status = 201;
    // The only time the secret leaves the gateway.
    ctx.body = { object: 'api_key', key_id: key.keyId, account_id: ctx.params.id, key: key.secret, masked: maskKey(key.last4) };
  });
  r.post('/keys/:id/revoke', async (ctx) => {
    const b = ctx.request.body && typeof ctx.request.body === 'object' ? (ctx.request.body as Body) : {};
    await revokeKey(ledger, ctx.params.id, typeof b.reason === 'string' ? b.reason.slice(0, 500) : '', ctx.state.actor);
    ctx.body = { object: 'api_key', key_id: ctx.params.id, status: 'revoked' };
  });

  r.get('/models', async (ctx) => {
    await ledger.readYourWrites();
    ctx.body = { object: 'list', data: await models.all(ledger.readModels.db, ledger.rmSchema) };
  });

  // Upstream channels: their health, and an operator's switch (each change an event with its actor).
  r.get('/channels', (ctx) => {
    ctx.body = { object: 'list', data: deps.channels.list() };
  });
  // Channel ids contain '/' (provider/upstream model).
  r.patch('/channels/*id', async (ctx) => {
    const channelId = ([] as string[]).concat(ctx.params.id as unknown as string[]).join('/');
    if (!deps.channels.has(channelId))
      throw new ApiError(
        404,
        `No channel ${channelId.slice(0, 200)} in the models config; GET /admin/v1/channels lists them.`,
        'invalid_request_error',
        'not_found',
        'channel',
      );
    const b = body(ctx);
    if (typeof b.enabled !== 'boolean') throw badRequest("'enabled' must be true or false.", 'enabled');
    const reason = typeof b.reason === 'string' ? b.reason.slice(0, 500) : '';
    const res = await setChannelEnabled(ledger, channelId, b.enabled, reason, ctx.state.actor);
    ctx.body = { object: 'channel', changed: res.events.length > 0, ...deps.channels.list().find((c) => c.id === channelId) };
  });
  // Model ids may contain '/', e.g. cx/gen-6-terra.
  r.patch('/models/*id', async (ctx) => {
    const modelId = ([] as string[]).concat(ctx.params.id as unknown as string[]).join('/');
    if (modelId.length > MAX_MODEL_ID) throw badRequest(`A model id has at most ${MAX_MODEL_ID} characters.`, 'model');
    const b = body(ctx);
    const cmd: {
      modelId: string;
      multiplierMilli?: number;
      status?: 'ACTIVE' | 'INACTIVE';
      alias?: string | null;
      cacheReadMilli?: number | null;
      cacheWriteMilli?: number | null;
    } = { modelId };
    if (b.multiplier !== undefined) cmd.multiplierMilli = toMilli(b.multiplier as number);
    // Cache weights as fractions of a plain prompt token (0.1 = a tenth); null removes one.
    for (const [field, key] of [
      ['cache_read_weight', 'cacheReadMilli'],
      ['cache_write_weight', 'cacheWriteMilli'],
    ] as const) {
      if (b[field] === undefined) continue;
      if (b[field] !== null && !(typeof b[field] === 'number' && b[field] >= 0 && b[field] <= 1000))
        throw badRequest(`'${field}' must be a number from 0 to 1000 (1 = a plain prompt token), or null.`, field);
      cmd[key] = b[field] === null ? null : Math.round((b[field] as number) * 1000);
    }
    if (b.status !== undefined) {
      if (b.status !== 'ACTIVE' && b.status !== 'INACTIVE') throw badRequest("'status' must be ACTIVE or INACTIVE.", 'status');
      cmd.status = b.status;
    }
    if (b.alias !== undefined) {
      if (b.alias !== null && (typeof b.alias !== 'string' || !b.alias || b.alias.length > MAX_MODEL_ID))
        throw badRequest(`'alias' must be a string of at most ${MAX_MODEL_ID} characters, or null.`, 'alias');
      cmd.alias = b.alias as string | null;
    }
    const res = await priceModel(ledger, cmd, ctx.state.actor);
    const m = res.state;
    // The price in force, whether this call changed it or (the same values again) appended nothing.
    ctx.body = {
      object: 'model',
      modelId: m.modelId,
      multiplierMilli: m.multiplierMilli,
      status: m.status,
      alias: m.alias,
      ...m.cache,
      changed: res.events.length > 0,
    };
  });

  r.use(adminLedgerWorkRoutes(deps).routes()); // corrections, statements, the upstream report, verify, sweep, events, rebuild
  r.use(webhookAdminRouter(deps).routes());
  r.use(adminPaymentsRoutes(deps, deps.payments, deps.paymentSettings).routes()); // prices, payments, refunds, disputes, code batches
  r.use(adminFinanceRoutes(deps).routes()); // /finance: report, reconciliation, journal, lots
  r.use(adminBillingProfileRoutes(deps).routes()); // an account's billing profile: who its invoices are made out to
  r.use(adminDocumentRoutes(deps).routes()); // invoices and credit notes, every account's
  r.use(adminCostRoutes(deps, deps.paymentSettings).routes()); // upstream cost rates, cost per day and call, bills and their reconciliation
  r.use(exchangeRateRoutes(ledger).routes()); // exchange rates into the settlement currency, by UTC day and source
  return r;
}
