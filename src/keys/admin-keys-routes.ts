// Admin API for per-key controls and rotation (mounted inside the admin router, behind its token):
//   GET   /accounts/:id/keys                the account's keys, their controls and their period's spend
//   PATCH /keys/:id                          set name, spend_limit, models, expires_at (null removes one)
//   PATCH /accounts/:id/keys/:keyId          the same, for a key of that account only
//   POST  /keys/:id/rotate {grace_seconds}   a new key with the same controls; the old one works until the grace ends
// Every change is an event whose metadata names the actor.
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import type { KeysDeps } from './keys-deps.ts';
import { badRequest } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import { maskKey } from './secrets.ts';
import { listKeys, MAX_GRACE_SECONDS, parseKeyControlsPatch, rotateKey, setKeyControls } from './key-controls.ts';

type Body = Record<string, unknown>;

const objectBody = (ctx: Context, optional = false): Body => {
  const b = ctx.request.body;
  if (optional && (b === undefined || b === null || (typeof b === 'object' && !Array.isArray(b) && Object.keys(b).length === 0))) return {};
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Body;
};

/** Ids in paths are parameters of SQL and stream names: they must be ids. */
function ids(ctx: Context, next: Next) {
  for (const [name, v] of Object.entries(ctx.params ?? {})) requireId(v, name === 'id' ? 'id' : 'key_id');
  return next();
}

function controlsBody(keyId: string, accountId: string, r: Awaited<ReturnType<typeof setKeyControls>>) {
  const c = r.controls;
  return {
    object: 'api_key',
    key_id: keyId,
    account_id: accountId,
    name: c.name,
    spend_limit: c.spendLimit,
    models: c.models,
    expires_at: c.expiresAt,
    changed: r.changed,
  };
}

export function adminKeysRoutes(deps: KeysDeps): Router {
  const { ledger, catalog } = deps;
  const r = new Router();

  r.get('/accounts/:id/keys', ids, async (ctx) => {
    ctx.body = { object: 'list', data: await listKeys(ledger, ctx.params.id) };
  });

  r.patch('/keys/:id', ids, async (ctx) => {
    const patch = parseKeyControlsPatch(objectBody(ctx));
    const res = await setKeyControls(ledger, catalog, ctx.params.id, patch, ctx.state.actor);
    ctx.body = controlsBody(ctx.params.id, res.accountId, res);
  });
  r.patch('/accounts/:id/keys/:keyId', ids, async (ctx) => {
    const patch = parseKeyControlsPatch(objectBody(ctx));
    const res = await setKeyControls(ledger, catalog, ctx.params.keyId, patch, ctx.state.actor, { accountId: ctx.params.id });
    ctx.body = controlsBody(ctx.params.keyId, res.accountId, res);
  });

  r.post('/keys/:id/rotate', ids, async (ctx) => {
    const b = objectBody(ctx, true);
    for (const k of Object.keys(b))
      if (k !== 'grace_seconds') throw badRequest(`Unknown field '${k.slice(0, 100)}': a rotation takes grace_seconds.`, k.slice(0, 100));
    const grace = b.grace_seconds ?? 0;
    if (typeof grace !== 'number' || !Number.isSafeInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS) {
      throw badRequest(`'grace_seconds' must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS} (90 days).`, 'grace_seconds');
    }
    const res = await rotateKey(ledger, ctx.params.id, grace, ctx.state.actor);
    ctx.status = 201;
    // The only time the new secret leaves the gateway.
    ctx.body = {
      object: 'api_key',
      key_id: res.keyId,
      account_id: res.accountId,
      key: res.secret,
      masked: maskKey(res.last4),
      name: res.controls.name,
      spend_limit: res.controls.spendLimit,
      models: res.controls.models,
      expires_at: res.controls.expiresAt,
      replaces: { key_id: res.replaces, revoke_at: res.revokeAt },
    };
  });
  return r;
}
