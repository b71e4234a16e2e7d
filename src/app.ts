// The Koa application: middleware order is request id, access log, errors, then routes.
import { watchClient } from './http/client-gone.ts';
import { readFile } from 'node:fs/promises';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import type { GatewayDeps } from './wiring/deps.ts';
import { requestId } from './http/request-id.ts';
import { apiCors } from './http/cors.ts';
import { removeUploads } from './http/uploads.ts';
import { ADMIN_LIMITS, jsonBody, jsonOrMultipartBody, modelCallLimits, refuseBodyOutside } from './http/body.ts';
import { securityHeaders } from './http/security-headers.ts';
import { accessLog } from './http/access-log.ts';
import { requestMetrics } from './http/request-metrics.ts';
import { ApiError, errorBody, errorHandler } from './http/errors.ts';
import { requireApiKey } from './keys/auth-middleware.ts';
import { adminTokenMatches } from './http/admin-token.ts';
import { idempotency } from './http/idempotency.ts';
import { limitInvalidRequests } from './http/invalid-requests.ts';
import { invalidRequestStore } from './eventstore/invalid-request-store.ts';
import { validateBody } from './http/validate.ts';
import { chatCompletions } from './calls/chat-routes.ts';
import { anthropicErrors, countTokens, messages } from './calls/messages-routes.ts';
import { anthropicErrorBody } from './calls/dialects/anthropic-messages/render.ts';
import { responses } from './calls/responses-routes.ts';
import { images } from './calls/images-routes.ts';
import { embeddings } from './calls/embeddings-routes.ts';
import { listModels, subscription, usage } from './calls/account-routes.ts';
import { adminRouter } from './wiring/admin-router.ts';
import { paymentRoutes } from './books/payments-routes.ts';
import { documentHandlers } from './books/document-routes.ts';
import { autoTopUpRoutes } from './books/auto-top-up-routes.ts';
import { balanceAlertRoutes } from './accounts/balance-alert-routes.ts';
import { callerOf } from './http/state.ts';
import { stripeWebhookRoute } from './books/stripe-webhook-routes.ts';
import { redirectBrowserToPages, webRoutes } from './pages/web-routes.ts';
import { customerAuthRoutes, type CustomerAuthDeps } from './customers/customer-auth-routes.ts';
import { customerAccountRoutes } from './customers/customer-account-routes.ts';
import { sameOriginWrites } from './http/public-origin.ts';
import { keyManagementRouter } from './keys/key-management-routes.ts';
import { metricsEndpoint, readiness, type ViewsBehind } from './wiring/health-routes.ts';
import type { Metrics } from './wiring/metrics.ts';
import { callSpans } from './http/call-spans.ts';
import { callTimeline, endsPhase } from './http/call-timeline.ts';
import { recordingPhases } from './tracing/call-phases.ts';

/** Paths the /v1 router may match (it is case-insensitive) and the admin API: their routes read bodies after authentication. */
const READS_BODIES = /^\/(v1|admin\/v1|app\/api)(\/|$)/i;

// The prefixes of the routers mounted before /v1's model routes, as those routers match them (any
// case, with or without a trailing part). A router tests every one of its routes against every
// path it sees: a model call skips the admin API's hundred-odd routes instead.
const ADMIN_PATHS = /^\/admin\/v1(\/|$)/i;
const SESSION_API_PATHS = /^\/app\/api(\/|$)/i;
const KEY_MANAGEMENT_PATHS = /^\/v1\/keys(\/|$)/i;

/** `middleware` for the paths `paths` matches; every other request passes by it. It keeps a router's `router` (what lists its routes). */
function onlyUnder<C extends Context>(paths: RegExp, middleware: ((ctx: C, next: Next) => unknown) & { router?: unknown }) {
  const guarded = (ctx: C, next: Next): unknown => (paths.test(ctx.path) ? middleware(ctx, next) : next());
  return Object.assign(guarded, { router: middleware.router });
}

/** JSON for every POST, multipart too for image edits; anything else is a 415. */
function requireContentType(ctx: Context, next: Next) {
  if (ctx.method === 'POST') {
    const multipartOk = ctx.path.endsWith('/images/edits');
    const hasBody = Number(ctx.get('content-length') || 0) > 0 || !!ctx.get('transfer-encoding');
    const ok = ctx.is('application/json') || (multipartOk && ctx.is('multipart/form-data'));
    if (hasBody && !ok) {
      throw new ApiError(
        415,
        `Unsupported Content-Type '${ctx.get('content-type') || '(none)'}': send application/json${multipartOk ? ' or multipart/form-data' : ''}.`,
        'invalid_request_error',
        'unsupported_media_type',
      );
    }
  }
  return next();
}

export function createApp(
  deps: GatewayDeps,
  opts: {
    adminToken?: string;
    adminFailuresPerMinute?: number;
    /** Requests one key may have refused as invalid a minute (TOLLGATE_INVALID_REQUESTS_PER_MINUTE). */
    invalidRequestsPerMinute?: number;
    /** The largest model-call body in MB once decompressed (TOLLGATE_MAX_REQUEST_MB, default 10). */
    maxRequestMb?: number;
    idempotencyTtlHours?: number;
    metrics?: Metrics;
    /** /metrics is on the public port only behind this token (else on its own port, see metricsApp, or nowhere). */
    metricsToken?: string;
    /** The account and key ids on a call's span (TOLLGATE_TRACE_ACCOUNTS). */
    traceAccounts?: boolean;
    trustProxy?: boolean;
    readyMaxLag?: { events: number; seconds: number };
    readyTimeoutMs?: number;
    /** Why the in-memory views (keys, prices, channels) cannot answer for the log yet; null when current. */
    viewsBehind?: ViewsBehind;
    /** The session API of /app (sign-in, members, keys, billing); absent: not served. */
    customers?: Omit<CustomerAuthDeps, 'ledger' | 'publicOrigin'>;
  } = {},
): Koa {
  const app = new Koa({ proxy: opts.trustProxy === true });
  const v1 = new Router({ prefix: '/v1' });
  const auth = requireApiKey(deps.keys);
  // The body is read only once the key is known: a client without a valid key cannot make the
  // server decompress or parse anything (it gets its 401 first). See http/body.ts for the limits.
  const body = jsonBody(modelCallLimits(opts.maxRequestMb));
  const withUploads = jsonOrMultipartBody(modelCallLimits(opts.maxRequestMb));
  // Redeeming a code and opening a checkout take a few fields: the admin API's small limits.
  const smallBody = jsonBody(ADMIN_LIMITS);
  // Invalid requests count per key across gateways (429 past the limit); valid calls count against
  // the plan's call rate, decided with the call's hold (the account decider), not here.
  const invalid = limitInvalidRequests(invalidRequestStore(deps.db, deps.ledger.schema), opts.invalidRequestsPerMinute ?? 60);
  // A body that fails its schema is refused before an Idempotency-Key is claimed: it stores nothing.
  const idempotent = (schemaName?: string) =>
    idempotency(deps.db, deps.ledger.schema, {
      ttlHours: opts.idempotencyTtlHours,
      validate: schemaName ? async (b) => void (await validateBody(schemaName, b)) : undefined,
    });
  // With phases recorded (TOLLGATE_CALL_PHASES), each step of the chain ends a phase of its own.
  const phases = recordingPhases();
  const metered = (schemaName: string) =>
    phases
      ? [
          endsPhase('middleware'),
          auth,
          endsPhase('auth'),
          invalid,
          endsPhase('invalid_limit'),
          body,
          endsPhase('body'),
          idempotent(schemaName),
          endsPhase('idempotency'),
        ]
      : [auth, invalid, body, idempotent(schemaName)];

  v1.post('/chat/completions', ...metered('chat-completions'), chatCompletions(deps));
  v1.post('/messages', anthropicErrors, ...metered('messages'), messages(deps));
  v1.post('/messages/count_tokens', anthropicErrors, auth, invalid, body, countTokens(deps));
  v1.post('/responses', ...metered('responses'), responses(deps));
  v1.post('/images/generations', ...metered('images'), images(deps, 'generations'));
  v1.post('/embeddings', ...metered('embeddings'), embeddings(deps));
  v1.post('/images/edits', auth, invalid, withUploads, idempotent(), images(deps, 'edits'));
  v1.get('/models', auth, listModels(deps));
  v1.get('/subscription', auth, subscription(deps));
  v1.get('/usage', auth, usage(deps));
  const money = paymentRoutes(deps, deps.payments, deps.paymentSettings);
  v1.get('/prices', auth, money.prices);
  v1.post('/redemptions', auth, smallBody, money.redeem);
  v1.get('/payments', auth, money.list);
  v1.get('/payments/:id', auth, money.receipt);
  v1.post('/checkout/sessions', auth, smallBody, money.checkout);
  const topUp = autoTopUpRoutes(deps);
  v1.get('/auto-top-up', auth, topUp.get);
  v1.put('/auto-top-up', auth, smallBody, topUp.set);
  v1.delete('/auto-top-up', auth, topUp.off);
  v1.post('/auto-top-up/card', auth, smallBody, topUp.card);
  const alerts = balanceAlertRoutes(deps.ledger);
  v1.get('/balance-alerts', auth, alerts.get);
  v1.put('/balance-alerts', auth, smallBody, alerts.set);
  const documents = documentHandlers(deps.ledger, (ctx) => callerOf(ctx).accountId);
  v1.get('/invoices', auth, documents.list);
  v1.get('/invoices/:number', auth, documents.one);

  const site = new Router();
  site.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  site.get(
    '/readyz',
    readiness(deps.ledger, opts.readyMaxLag ?? { events: 10_000, seconds: 30 }, {
      timeoutMs: opts.readyTimeoutMs ?? 2000,
      log: deps.log,
      viewsBehind: opts.viewsBehind,
    }),
  );
  if (opts.metrics && opts.metricsToken) site.get('/metrics', requireBearer(opts.metricsToken, 'metrics'), metricsEndpoint(deps.ledger, opts.metrics));
  site.head('/', (ctx) => {
    ctx.status = 200;
  });
  site.get('/', (ctx) => {
    if (redirectBrowserToPages(ctx)) return;
    ctx.body = { name: 'tollgate', base_url: deps.baseUrl(ctx), docs: 'See README.md' };
  });
  for (const file of ['setup.sh', 'setup.ps1']) {
    site.get(`/setup/${file}`, async (ctx) => {
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = await readFile(new URL(`../setup/${file}`, import.meta.url));
    });
  }

  if (phases) app.use(callTimeline);
  app.use(watchClient);
  app.use(requestId);
  // Before everything that can answer, so errors and preflights carry them too.
  app.use(securityHeaders);
  app.use(apiCors);
  if (opts.metrics) app.use(requestMetrics(opts.metrics));
  app.use(callSpans({ accountAttributes: opts.traceAccounts ?? false }));
  app.use(accessLog(deps.log));
  // Anthropic clients call /v1/messages: even failures before the route runs come in their shape.
  app.use(errorHandler([{ path: /^\/v1\/messages(\/count_tokens)?\/?$/, body: anthropicErrorBody }]));
  // Stripe's webhook reads its own raw body (its signature covers the exact bytes): before any parser.
  app.use(stripeWebhookRoute(deps.stripe, deps.log));
  app.use(requireContentType);
  // Temporary upload files are removed once the request is answered, whatever the outcome.
  app.use(removeUploads);
  // No body is read here: /v1 and /admin/v1 routes read theirs after authentication; every other path refuses one.
  app.use(refuseBodyOutside(READS_BODIES));
  if (opts.adminToken) {
    const admin = adminRouter(deps, opts.adminToken, { failuresPerMinute: opts.adminFailuresPerMinute });
    app.use(onlyUnder(ADMIN_PATHS, admin.routes()));
    app.use(onlyUnder(ADMIN_PATHS, admin.allowedMethods({ throw: true })));
  }
  if (opts.customers) {
    // Cookies and CSRF tokens here only: /v1 never reads a cookie (a session there is a 401).
    const customers = new Router({ prefix: '/app/api' });
    // Another site's page changes nothing, even with a valid CSRF token: checked before the body is read.
    customers.use(sameOriginWrites(deps.publicOrigin));
    customers.use(jsonBody(ADMIN_LIMITS));
    customers.use(customerAuthRoutes({ ledger: deps.ledger, publicOrigin: deps.publicOrigin, ...opts.customers }).routes());
    customers.use(customerAccountRoutes(deps).routes());
    app.use(onlyUnder(SESSION_API_PATHS, customers.routes()));
    app.use(onlyUnder(SESSION_API_PATHS, customers.allowedMethods({ throw: true })));
  }
  // Before /v1's model routes: the management key opens /v1/keys and nothing else.
  const keyManagement = keyManagementRouter(deps);
  app.use(onlyUnder(KEY_MANAGEMENT_PATHS, keyManagement.routes()));
  app.use(onlyUnder(KEY_MANAGEMENT_PATHS, keyManagement.allowedMethods({ throw: true })));
  app.use(v1.routes());
  app.use(v1.allowedMethods({ throw: true }));
  app.use(site.routes());
  app.use(site.allowedMethods({ throw: true }));
  app.use(webRoutes());
  // Set, not thrown, so the routers' allowedMethods can still turn a known path into a 405.
  app.use((ctx) => {
    const base = deps.baseUrl(ctx);
    const e = new ApiError(
      404,
      `Unknown path ${ctx.method} ${ctx.path.slice(0, 200)}. The API base is ${base}; the chat endpoint is ${base}/chat/completions.`,
      'invalid_request_error',
      'unknown_url',
    );
    ctx.status = 404;
    ctx.state.errorCode = e.code;
    ctx.body = errorBody(e);
  });
  app.on('error', () => undefined);
  return app;
}

/** Only `Authorization: Bearer <token>`, compared in constant time. */
function requireBearer(token: string, what: string) {
  return (ctx: Context, next: Next) => {
    const m = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'));
    if (!m || !adminTokenMatches(m[1], token)) throw new ApiError(401, `Missing or wrong ${what} token.`, 'invalid_request_error', 'invalid_token');
    return next();
  };
}

/** /metrics alone, for a port of its own (TOLLGATE_METRICS_PORT) that only the scraper can reach. */
export function metricsApp(deps: GatewayDeps, metrics: Metrics): Koa {
  const app = new Koa();
  const router = new Router();
  router.get('/metrics', metricsEndpoint(deps.ledger, metrics));
  app.use(errorHandler());
  app.use(refuseBodyOutside(/^$/));
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  app.on('error', () => undefined);
  return app;
}
