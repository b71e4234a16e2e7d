// The operator's webhook API, mounted inside the admin router (/admin/v1, admin token, actor):
// register (the signing secret is shown once), list, remove, the delivery log, replay.
import type { Context } from 'koa';
import Router from '@koa/router';
import type { RouteDeps } from '../http/route-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { webhooksOf, type WebhookService } from './service.ts';

type Body = Record<string, unknown>;

const jsonBody = (ctx: Context): Body => {
  const b = ctx.request.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Body;
};

const optionalBody = (ctx: Context): Body =>
  ctx.request.body && typeof ctx.request.body === 'object' && !Array.isArray(ctx.request.body) ? (ctx.request.body as Body) : {};

const queryValue = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

export function webhookAdminRouter(deps: RouteDeps): Router {
  const r = new Router();
  const webhooks = (): WebhookService => {
    const h = webhooksOf(deps);
    if ('disabled' in h) throw new ApiError(503, `Webhooks are not available: ${h.disabled}.`, 'server_error', 'webhooks_disabled');
    return h.service;
  };

  r.post('/accounts/:id/webhooks', async (ctx) => {
    const created = await webhooks().register(ctx.params.id, jsonBody(ctx), ctx.state.actor);
    ctx.status = 201;
    // The only time the secret leaves the gateway.
    ctx.body = created;
  });
  r.get('/accounts/:id/webhooks', async (ctx) => {
    ctx.body = { object: 'list', data: await webhooks().list(ctx.params.id) };
  });
  r.delete('/accounts/:id/webhooks/:webhook_id', async (ctx) => {
    // The reason as ?reason= (a DELETE body is not read by every client or proxy), or in a JSON body.
    const reason = queryValue(ctx.query.reason) ?? optionalBody(ctx).reason;
    await webhooks().remove(ctx.params.id, ctx.params.webhook_id, typeof reason === 'string' ? reason.slice(0, 500) : '', ctx.state.actor);
    ctx.body = { object: 'webhook', webhook_id: ctx.params.webhook_id, account_id: ctx.params.id, removed: true };
  });
  r.get('/webhooks/:id/deliveries', async (ctx) => {
    const data = await webhooks().deliveries(ctx.params.id, {
      status: queryValue(ctx.query.status),
      limit: queryValue(ctx.query.limit),
      before: queryValue(ctx.query.before),
    });
    ctx.body = { object: 'list', data };
  });
  r.post('/webhooks/:id/deliveries/:delivery_id/replay', async (ctx) => {
    ctx.status = 202;
    ctx.body = await webhooks().replay(ctx.params.id, ctx.params.delivery_id);
  });
  return r;
}
