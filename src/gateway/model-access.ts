import type { Context } from 'koa';
import type { GatewayDeps } from './deps.ts';
import { modelNotFound } from '../http/errors.ts';
import { isModelEnabled } from '../ledger/account-state.ts';
import { isModelAllowedForKey } from '../ledger/key-controls.ts';

/**
 * The model a caller may use, by id or alias. One outside the caller's plan, or outside its key's
 * own list, reads exactly like an unknown one (403 model_not_found pointing to GET /models), so
 * ids are not disclosed.
 */
export async function resolveCallerModel(deps: GatewayDeps, ctx: Context, idOrAlias: string) {
  const model = await deps.catalog.resolveCurrent(idOrAlias);
  const state = model ? await deps.metering.state(ctx.state.auth.accountId) : null;
  if (!model || !state || !isModelEnabled(state, model.id) || !isModelAllowedForKey(state, ctx.state.auth.keyId, model.id))
    throw modelNotFound(idOrAlias, deps.baseUrl(ctx));
  ctx.state.model = model.id;
  return model;
}
