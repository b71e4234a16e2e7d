import type { Context, Next } from 'koa';
import { ApiError, keyExpiredError } from './errors.ts';
import { isWellFormedKey, KEY_PREFIX } from '../ledger/keys.ts';
import type { KeyDirectory } from './key-directory.ts';

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
    if (!secret.startsWith(KEY_PREFIX) || !isWellFormedKey(secret)) throw invalidKey(`Invalid API key format: keys begin with ${KEY_PREFIX}.`);
    const rec = await keys.lookup(secret);
    if (!rec) throw invalidKey('Incorrect API key provided, or the key was revoked.');
    // Exact to the millisecond, whether or not a later event has said so yet.
    const now = Date.now();
    if (rec.rotationDeadline && now >= Date.parse(rec.rotationDeadline)) {
      keys.noticeRotationDue(rec);
      throw invalidKey(`This API key was rotated and stopped working at ${new Date(rec.rotationDeadline).toISOString()}: use the key that replaced it.`);
    }
    if (rec.expiresAt && now >= Date.parse(rec.expiresAt)) throw keyExpiredError(new Date(rec.expiresAt).toISOString());
    ctx.state.auth = rec;
    await next();
  };
}
