import type { Context, Next } from 'koa';
import { ApiError, keyExpiredError } from '../http/errors.ts';
import { isWellFormedKey, KEY_PREFIX } from './secrets.ts';
import { MANAGEMENT_KEY_PREFIX } from './management-key-decider.ts';
import type { KeyDirectory } from './key-directory.ts';
import { keyCaller } from '../http/caller.ts';
import '../http/state.ts';

const invalidKey = (message: string) => new ApiError(401, message, 'invalid_request_error', 'invalid_api_key');

/** The secret from `Authorization: Bearer` (or `x-api-key`, which Anthropic clients send). */
export function presentedKey(ctx: Context): string | null {
  const auth = ctx.get('authorization');
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1] : '';
  }
  const apiKey = ctx.get('x-api-key');
  return apiKey ? apiKey.trim() : null;
}

export function requireApiKey(keys: KeyDirectory) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const secret = presentedKey(ctx);
    if (secret === null) throw invalidKey('Missing API key. Send the header "Authorization: Bearer <API_KEY>".');
    if (secret.startsWith(MANAGEMENT_KEY_PREFIX))
      throw invalidKey(`A management key calls no model: it only manages keys at /v1/keys. Call models with an API key (${KEY_PREFIX}…).`);
    if (!secret.startsWith(KEY_PREFIX) || !isWellFormedKey(secret)) throw invalidKey(`Invalid API key format: keys begin with ${KEY_PREFIX}.`);
    const rec = await keys.lookup(secret);
    if (!rec) throw invalidKey('Incorrect API key provided.');
    // Exact to the millisecond, whether or not a later event has said so yet; the same refusal
    // before and after its KeyRevoked is recorded.
    const now = Date.now();
    if (rec.rotationDeadline && (now >= Date.parse(rec.rotationDeadline) || rec.status === 'revoked')) {
      keys.noticeRotationDue(rec);
      const at = Math.min(Date.parse(rec.rotationDeadline), Date.parse(rec.revokedAt ?? rec.rotationDeadline));
      throw invalidKey(`This API key was rotated and stopped working at ${new Date(at).toISOString()}: use the key that replaced it.`);
    }
    if (rec.status === 'revoked')
      throw invalidKey(`This API key was revoked${rec.revokedAt ? ` at ${new Date(rec.revokedAt).toISOString()}` : ''}: use another key of the account.`);
    if (rec.expiresAt && now >= Date.parse(rec.expiresAt)) throw keyExpiredError(new Date(rec.expiresAt).toISOString());
    ctx.state.caller = keyCaller(rec, ctx.state.requestId);
    await next();
  };
}
