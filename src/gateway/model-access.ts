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
  if (!model) throw modelNotFound(idOrAlias, deps.baseUrl(ctx));
  // Allowed on the cached account (the hold's append checks it), refused only on the log's.
  await deps.metering.onCurrentState(ctx.state.auth.accountId, (state) => {
    if (!isModelEnabled(state, model.id) || !isModelAllowedForKey(state, ctx.state.auth.keyId, model.id)) throw modelNotFound(idOrAlias, deps.baseUrl(ctx));
  });
  ctx.state.model = model.id;
  return model;
}
