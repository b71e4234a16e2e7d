// The operator's hand on an account's management keys (mounted in the admin router, behind its token):
//   GET    /accounts/:id/management-keys              the keys (masked)
//   POST   /accounts/:id/management-keys {name}       201, the secret shown once
//   POST   /accounts/:id/management-keys/:key/revoke  it stops at once, on every gateway
import Router from '@koa/router';
import type { Ledger } from '../ledger/ledger.ts';
import { requireId } from '../ledger/ledger.ts';
import { issueManagementKey, listManagementKeys, revokeManagementKey } from './management-keys.ts';

export function adminManagementKeyRoutes(ledger: Ledger): Router {
  const r = new Router({ prefix: '/accounts/:id/management-keys' });
  r.get('/', async (ctx) => {
    ctx.body = { object: 'list', data: await listManagementKeys(ledger, requireId(ctx.params.id, 'account_id')) };
  });
  r.post('/', async (ctx) => {
    const accountId = requireId(ctx.params.id, 'account_id');
    const name = (ctx.request.body as Record<string, unknown> | undefined)?.name;
    ctx.status = 201;
    ctx.body = { object: 'management_key', account_id: accountId, ...(await issueManagementKey(ledger, accountId, name, ctx.state.actor)) };
  });
  r.post('/:key/revoke', async (ctx) => {
    await revokeManagementKey(ledger, requireId(ctx.params.id, 'account_id'), requireId(ctx.params.key, 'key_id'), ctx.state.actor);
    ctx.body = { object: 'management_key', key_id: ctx.params.key, status: 'revoked' };
  });
  return r;
}
