// CORS. The API is meant to be called from other sites' pages with a key (the spec: "bots,
// scripts and other sites can call the API directly with the key"). The key travels in a header,
// never in a cookie, so /v1 can answer every origin with `*` and no credentials: a foreign page
// gains nothing it does not already hold. Everything else (/app, /admin, /metrics, ...) grants
// no origin at all, so a browser refuses other sites' scripts there.
import type { Context, Next } from 'koa';

/** Response headers a browser client may read: costs, limits, ids, replay marker. */
const EXPOSED = [
  'x-request-id',
  'x-tollgate-billed-tokens',
  'x-tollgate-remaining-tokens',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'retry-after',
  'idempotent-replayed',
].join(', ');
const DEFAULT_ALLOWED_HEADERS = 'authorization, content-type, idempotency-key, x-api-key, anthropic-version, anthropic-beta';
/** A comma-separated list of header names (RFC 9110 tokens), as a preflight sends it. */
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

const isApiPath = (path: string) => path === '/v1' || path.startsWith('/v1/');

export async function apiCors(ctx: Context, next: Next): Promise<void> {
  if (!isApiPath(ctx.path) || !ctx.get('origin')) return next();
  ctx.set('Access-Control-Allow-Origin', '*');
  const preflightMethod = ctx.method === 'OPTIONS' ? ctx.get('access-control-request-method') : '';
  if (preflightMethod) {
    // SDKs add their own headers (x-stainless-*, openai-beta, ...): any well-formed list is allowed,
    // since no ambient credential rides along.
    const requested = ctx.get('access-control-request-headers').trim();
    ctx.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
    ctx.set('Access-Control-Allow-Headers', requested && requested.length <= 2000 && HEADER_LIST.test(requested) ? requested : DEFAULT_ALLOWED_HEADERS);
    ctx.set('Access-Control-Max-Age', '600');
    ctx.vary('Access-Control-Request-Headers');
    ctx.status = 204;
    return;
  }
  ctx.set('Access-Control-Expose-Headers', EXPOSED);
  await next();
}
