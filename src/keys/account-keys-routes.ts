// One account's API keys over HTTP, for whoever the route before has let in: a member of the
// account (the session API, src/customers/customer-account-routes.ts) or the account's management key (the
// key-management API, src/keys/key-management-routes.ts). The account is the caller's and the actor of
// every event the caller's actor.
import type { Context } from 'koa';
import type { KeysDeps } from './keys-deps.ts';
import { badRequest } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import { maskKey } from './secrets.ts';
import { DomainError } from '../ledger/errors.ts';
import { createKey, revokeAccountKey } from './member-keys.ts';
import { listKeys, MAX_GRACE_SECONDS, parseKeyControlsPatch, rotateKey, setKeyControls } from './key-controls.ts';
import { callerOf } from '../http/state.ts';

const objectBody = (ctx: Context): Record<string, unknown> => {
  const b = ctx.request.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Record<string, unknown>;
};
const acct = (ctx: Context) => callerOf(ctx).accountId;
const actor = (ctx: Context) => callerOf(ctx).actor;

export function accountKeyHandlers(deps: KeysDeps) {
  const { ledger, catalog } = deps;
  return {
    async list(ctx: Context) {
      ctx.body = { object: 'list', data: await listKeys(ledger, acct(ctx)) };
    },
    async one(ctx: Context) {
      const id = requireId(ctx.params.key, 'key_id');
      const key = (await listKeys(ledger, acct(ctx))).find((k) => k.key_id === id);
      if (!key) throw new DomainError('not_found', `key ${id} not found in account ${acct(ctx)}`, { param: 'key_id' });
      ctx.body = { object: 'api_key', ...key };
    },
    async create(ctx: Context) {
      const k = await createKey(ledger, catalog, acct(ctx), objectBody(ctx), actor(ctx));
      ctx.status = 201;
      // The only time the secret leaves the gateway.
      ctx.body = { object: 'api_key', key_id: k.keyId, account_id: acct(ctx), key: k.secret, masked: maskKey(k.last4), ...k.controls };
    },
    async update(ctx: Context) {
      const patch = parseKeyControlsPatch(objectBody(ctx));
      const res = await setKeyControls(ledger, catalog, requireId(ctx.params.key, 'key_id'), patch, actor(ctx), { accountId: acct(ctx) });
      ctx.body = { object: 'api_key', key_id: ctx.params.key, account_id: acct(ctx), ...res.controls, changed: res.changed };
    },
    async rotate(ctx: Context) {
      const grace = objectBody(ctx).grace_seconds ?? 0;
      if (typeof grace !== 'number' || !Number.isSafeInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS)
        throw badRequest(`'grace_seconds' must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}.`, 'grace_seconds');
      const res = await rotateKey(ledger, requireId(ctx.params.key, 'key_id'), grace, actor(ctx), { accountId: acct(ctx) });
      ctx.status = 201;
      ctx.body = {
        object: 'api_key',
        key_id: res.keyId,
        account_id: acct(ctx),
        key: res.secret,
        masked: maskKey(res.last4),
        replaces: { key_id: res.replaces, revoke_at: res.revokeAt },
      };
    },
    async revoke(ctx: Context) {
      await revokeAccountKey(ledger, acct(ctx), requireId(ctx.params.key, 'key_id'), actor(ctx));
      ctx.body = { object: 'api_key', key_id: ctx.params.key, status: 'revoked' };
    },
  };
}
