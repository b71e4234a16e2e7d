// The public origin: the one address Tollgate puts in what it sends or redirects people to (sign-in
// links, the OpenID Connect redirect, Checkout's way back, the page after sign-in), and the origin
// state-changing /app/api calls must come from. Never the request's Host or X-Forwarded-Host:
// whoever sends a request chooses those, so a link built from them could point anywhere (issue #39).
import type { Context, Next } from 'koa';
import { ApiError } from './errors.ts';

/** Hosts that listen on every address: no browser can be sent there. */
const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '[::]', '::0']);

/** An http(s) origin (scheme://host[:port]) from a setting (a path only where `withPath`), or an error naming the setting. */
export function originOf(value: string, setting: string, withPath = false): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`${setting} must be an absolute http(s) URL such as https://gateway.example.com, not ${JSON.stringify(value.slice(0, 100))}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || url.search || url.hash || (!withPath && url.pathname !== '/'))
    throw new Error(
      `${setting} must be an http(s) ${withPath ? 'URL' : 'origin (no path)'} without credentials, query or fragment, such as https://gateway.example.com`,
    );
  return url.origin;
}

/**
 * The public origin of a gateway listening at `listening` (http://host:port): TOLLGATE_PUBLIC_URL,
 * else the origin of TOLLGATE_PUBLIC_BASE_URL, else the address it listens on (the base URL
 * `npm start` prints), unless that is a wildcard (HOST=0.0.0.0): then there is none.
 */
export function publicOriginFor(opts: { publicUrl?: string; publicBaseUrl?: string; host: string; listening: string }): string | null {
  if (opts.publicUrl) return originOf(opts.publicUrl, 'TOLLGATE_PUBLIC_URL');
  if (opts.publicBaseUrl) return originOf(opts.publicBaseUrl, 'TOLLGATE_PUBLIC_BASE_URL', true);
  return WILDCARD_HOSTS.has(opts.host) ? null : originOf(opts.listening, 'HOST and PORT');
}

/** What a gateway without a public origin says at start. */
export const NO_PUBLIC_ORIGIN_WARNING =
  'no public origin: set TOLLGATE_PUBLIC_URL to the origin people reach /app at (e.g. https://gateway.example.com). Until then sign-in links, OpenID Connect sign-in and Checkout from /app are refused (503 public_url_unset): Tollgate never builds a link from the Host a request names';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * State-changing calls come from the public origin, or from no browser at all: a second line
 * behind the CSRF token. A browser names the calling page's origin in `Origin` and says in
 * `Sec-Fetch-Site` whether it is this one, and another site's page can forge neither. So a
 * cross-site `Sec-Fetch-Site`, or an `Origin` other than the public origin, is a 403
 * cross_site_request before anything is read. A request with neither header (curl, a script
 * holding the cookie and the token) passes: the CSRF token is its check. Without a public origin,
 * an `Origin` passes only with `Sec-Fetch-Site: same-origin`. On this machine, the loopback names
 * of one port are one gateway (`localhost` for `127.0.0.1`, as a developer may type either).
 */
export function sameOriginWrites(publicOrigin: () => string | null) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!SAFE_METHODS.has(ctx.method)) {
      const site = ctx.get('sec-fetch-site');
      const origin = ctx.get('origin');
      const expected = publicOrigin();
      if (site && site !== 'same-origin') throw crossSite(`Sec-Fetch-Site: ${site}`, expected);
      if (origin && (expected ? !sameGateway(origin, expected) : site !== 'same-origin')) throw crossSite(`Origin: ${origin}`, expected);
    }
    await next();
  };
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/** The origin is the expected one, or both are loopback names of the same scheme and port. */
function sameGateway(origin: string, expected: string): boolean {
  if (origin === expected) return true;
  if (!URL.canParse(origin)) return false;
  const a = new URL(origin);
  const b = new URL(expected);
  return a.protocol === b.protocol && a.port === b.port && LOOPBACK_NAMES.has(a.hostname) && LOOPBACK_NAMES.has(b.hostname);
}

const crossSite = (header: string, expected: string | null) =>
  new ApiError(
    403,
    `This request came from another site (${header.slice(0, 120)}): only pages of ${expected ?? 'this gateway'} may change anything here.`,
    'permission_error',
    'cross_site_request',
  );

/** The public origin, or the 503 that says why `what` cannot be done without one. */
export function requirePublicOrigin(publicOrigin: () => string | null, what: string): string {
  const origin = publicOrigin();
  if (origin) return origin;
  throw new ApiError(
    503,
    `${what} needs this gateway's public address, and none is configured: the operator must set TOLLGATE_PUBLIC_URL (e.g. https://gateway.example.com). A link is never built from the Host a request names.`,
    'server_error',
    'public_url_unset',
  );
}
