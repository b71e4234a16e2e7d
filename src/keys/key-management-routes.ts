// The key-management API: an account's own software issues API keys to its users with the
// account's management key (sk_mgmt_…, made in /app or by the operator), which can call no model.
//   GET    /v1/keys                      the account's keys, each with its spend against its limit
//   POST   /v1/keys {name, spend_limit, models, expires_at}   201, the secret shown once
//   GET    /v1/keys/:key                 one key
//   PATCH  /v1/keys/:key {…controls}     change its name, limit, models or expiry
//   POST   /v1/keys/:key/rotate {grace_seconds}               201, the new secret shown once
//   DELETE /v1/keys/:key                 revoke it (at once, on every gateway)
// Each change is an event whose actor is `management-key:<id>`. Errors in OpenAI's shape.
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import type { KeysDeps } from './keys-deps.ts';
import { ApiError } from '../http/errors.ts';
import { presentedKey } from './auth-middleware.ts';
import { ADMIN_LIMITS, jsonBody } from '../http/body.ts';
import { KEY_PREFIX } from './secrets.ts';
import { MANAGEMENT_KEY_PREFIX } from './management-key-decider.ts';
import { managementActor, managementKeyOf } from './management-keys.ts';
import { accountKeyHandlers } from './account-keys-routes.ts';

/** Lets in the account's live management key (read from the log: a revoked one stops everywhere at once). */
function requireManagementKey(deps: KeysDeps) {
  return async (ctx: Context, next: Next) => {
    const secret = presentedKey(ctx);
    if (!secret)
      throw new ApiError(401, 'Missing management key. Send the header "Authorization: Bearer <MANAGEMENT_KEY>".', 'invalid_request_error', 'invalid_api_key');
    if (secret.startsWith(KEY_PREFIX))
      throw new ApiError(
        403,
        `An API key cannot manage keys: use the account's management key (${MANAGEMENT_KEY_PREFIX}…).`,
        'permission_error',
        'management_key_required',
      );
    const opened = secret.startsWith(MANAGEMENT_KEY_PREFIX) ? await managementKeyOf(deps.ledger, secret) : null;
    if (!opened) throw new ApiError(401, 'Incorrect or revoked management key.', 'invalid_request_error', 'invalid_api_key');
    ctx.state.caller = {
      kind: 'management_key',
      keyId: null,
      accountId: opened.accountId,
      managementKeyId: opened.keyId,
      actor: managementActor(opened.keyId),
      requestId: ctx.state.requestId,
    };
    await next();
  };
}

export function keyManagementRouter(deps: KeysDeps): Router {
  const r = new Router({ prefix: '/v1/keys' });
  // The body is read only once the key is known.
  r.use(requireManagementKey(deps), jsonBody(ADMIN_LIMITS));
  const keys = accountKeyHandlers(deps);
  r.get('/', keys.list);
  r.post('/', keys.create);
  r.get('/:key', keys.one);
  r.patch('/:key', keys.update);
  r.post('/:key/rotate', keys.rotate);
  r.delete('/:key', keys.revoke);
  return r;
}
