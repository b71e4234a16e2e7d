// The Koa application: middleware order is request id, access log, errors, then routes.
import { watchClient } from './http/client-gone.ts';
import { readFile } from 'node:fs/promises';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import { koaBody } from 'koa-body';
import type { GatewayDeps } from './gateway/deps.ts';
import { requestId } from './http/request-id.ts';
import { apiCors } from './http/cors.ts';
import { removeUploads, trackUpload } from './http/uploads.ts';
import { securityHeaders } from './http/security-headers.ts';
import { accessLog } from './http/access-log.ts';
import { ApiError, errorBody, errorHandler } from './http/errors.ts';
import { requireApiKey } from './http/auth.ts';
import { idempotency } from './http/idempotency.ts';
import { chatCompletions } from './routes/chat.ts';
import { anthropicErrors, countTokens, messages } from './routes/messages.ts';
import { anthropicErrorBody } from './gateway/anthropic-messages.ts';
import { responses } from './routes/responses.ts';
import { images } from './routes/images.ts';
import { listModels, subscription, usage } from './routes/account.ts';
import { adminRouter } from './routes/admin.ts';
import { paymentRoutes } from './routes/payments.ts';
import { stripeWebhookRoute } from './routes/stripe-webhook.ts';
import { webRoutes } from './routes/web.ts';
import { metricsEndpoint, readiness } from './gateway/health.ts';
import type { Metrics } from './gateway/metrics.ts';

const BODY_LIMIT = '25mb';

/** Paths the /v1 router may match (it is case-insensitive): their bodies are parsed by the routes. */
const V1_PATH = /^\/v1(\/|$)/i;

const bodyParser = () =>
  koaBody({
    jsonLimit: BODY_LIMIT,
    multipart: true,
    urlencoded: false,
    text: false,
    formidable: { maxFileSize: 20 * 1024 * 1024, maxFiles: 4, maxFields: 50, maxFieldsSize: 1024 * 1024, onFileBegin: trackUpload },
  });

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
  opts: { adminToken?: string; metrics?: Metrics; trustProxy?: boolean; readyMaxLag?: { events: number; seconds: number } } = {},
): Koa {
  const app = new Koa({ proxy: opts.trustProxy === true });
  const v1 = new Router({ prefix: '/v1' });
  const auth = requireApiKey(deps.keys);
  // On /v1 the body is read only once the key is known: a client without a valid key cannot
  // make the server parse megabytes of JSON or multipart (it gets its 401 first).
  const body = bodyParser();
  // The plan's call rate is decided with the call's hold (the account decider), not here.
  const metered = [auth, body, idempotency(deps.db, deps.ledger.schema)];

  v1.post('/chat/completions', ...metered, chatCompletions(deps));
  v1.post('/messages', anthropicErrors, ...metered, messages(deps));
  v1.post('/messages/count_tokens', anthropicErrors, auth, body, countTokens(deps));
  v1.post('/responses', ...metered, responses(deps));
  v1.post('/images/generations', ...metered, images(deps, 'generations'));
  v1.post('/images/edits', ...metered, images(deps, 'edits'));
  v1.get('/models', auth, listModels(deps));
  v1.get('/subscription', auth, subscription(deps));
  v1.get('/usage', auth, usage(deps));
  const money = paymentRoutes(deps, deps.payments, deps.paymentSettings);
  v1.get('/prices', auth, money.prices);
  v1.post('/redemptions', auth, body, money.redeem);
  v1.get('/payments', auth, money.list);
  v1.get('/payments/:id', auth, money.receipt);
  v1.post('/checkout/sessions', auth, body, money.checkout);

  const site = new Router();
  site.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  site.get('/readyz', readiness(deps.ledger, opts.readyMaxLag ?? { events: 10_000, seconds: 30 }));
  if (opts.metrics) site.get('/metrics', metricsEndpoint(deps.ledger, opts.metrics));
  site.head('/', (ctx) => {
    ctx.status = 200;
  });
  site.get('/', (ctx) => {
    ctx.body = { name: 'tollgate', base_url: deps.baseUrl(ctx), docs: 'See README.md' };
  });
  for (const file of ['setup.sh', 'setup.ps1']) {
    site.get(`/setup/${file}`, async (ctx) => {
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = await readFile(new URL(`../setup/${file}`, import.meta.url));
    });
  }

  app.use(watchClient);
  app.use(requestId);
  // Before everything that can answer, so errors and preflights carry them too.
  app.use(securityHeaders);
  app.use(apiCors);
  if (opts.metrics) app.use(opts.metrics.middleware);
  app.use(accessLog(deps.log));
  // Anthropic clients call /v1/messages: even failures before the route runs come in their shape.
  app.use(errorHandler([{ path: /^\/v1\/messages(\/count_tokens)?\/?$/, body: anthropicErrorBody }]));
  // Stripe's webhook reads its own raw body (its signature covers the exact bytes): before any parser.
  app.use(stripeWebhookRoute(deps.stripe, deps.log));
  app.use(requireContentType);
  // Temporary upload files are removed once the request is answered, whatever the outcome.
  app.use(removeUploads);
  // Every other path (admin, web) has its body parsed here; /v1 routes parse theirs after auth.
  const globalBody = bodyParser();
  app.use((ctx, next) => (V1_PATH.test(ctx.path) ? next() : globalBody(ctx, next)));
  app.use((ctx, next) => {
    ctx.state.route = ctx.path.startsWith('/v1/') ? ctx.path.slice(0, 60) : ctx.path.slice(0, 60);
    return next();
  });
  if (opts.adminToken) {
    const admin = adminRouter(deps, opts.adminToken);
    app.use(admin.routes());
    app.use(admin.allowedMethods({ throw: true }));
  }
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
