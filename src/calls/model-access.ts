import type { CallDeps } from './call-deps.ts';
import type { KeyCaller } from '../http/caller.ts';
import { modelNotFound } from '../http/errors.ts';
import { isModelAllowedForKey, isModelEnabled } from '../accounts/index.ts';

/**
 * The model a caller may use, by id or alias. One outside the caller's plan, or outside its key's
 * own list, reads exactly like an unknown one (403 model_not_found pointing to GET {baseUrl}/models),
 * so ids are not disclosed.
 */
export async function resolveCallerModel(deps: Pick<CallDeps, 'catalog' | 'metering'>, caller: KeyCaller, idOrAlias: string, baseUrl: string) {
  const model = await deps.catalog.resolveCurrent(idOrAlias);
  if (!model) throw modelNotFound(idOrAlias, baseUrl);
  // Allowed on the cached account (the hold's append checks it), refused only on the log's.
  await deps.metering.onCurrentState(caller.accountId, (state) => {
    if (!isModelEnabled(state, model.id) || !isModelAllowedForKey(state, caller.keyId, model.id)) throw modelNotFound(idOrAlias, baseUrl);
  });
  return model;
}
