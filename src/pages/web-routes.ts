// The web pages under /app: the chat page, the usage page and their static assets (web/), with
// strict security headers. The pages call this gateway's /v1 endpoints from the browser with the
// key the user typed; the server holds no session for them. The operator console at /admin
// (web/admin/) is served the same way and calls /admin/v1 with the admin token typed into it.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import type { Context, Middleware, Next } from 'koa';
import { ApiError } from '../http/errors.ts';
import { SESSION_COOKIE } from '../customers/index.ts';
import { BUNDLE_DIR, ENTRIES, ensureBundle } from './web-bundle.ts';

const WEB_DIR = new URL('../../web/', import.meta.url);

const PAGES: Record<string, string> = {
  '/app/chat': 'chat.html',
  '/app/usage': 'usage.html',
  // The signed-in shell (web/src/app/shell/): one HTML page, the page chosen by its path.
  '/app/home': 'app.html',
  '/app/sign-in': 'app.html',
  '/app/keys': 'app.html',
  '/app/members': 'app.html',
  '/app/sessions': 'app.html',
  '/app/billing': 'app.html',
  '/app/account-usage': 'app.html',
};

/** The pages a newcomer should know of (named in `npm start`'s banner); a browser opening `/` gets the first. */
export const LANDING_PAGES: ReadonlyArray<{ path: string; what: string }> = [
  { path: '/app/chat', what: 'chat and images with an API key' },
  { path: '/app/usage', what: 'usage per day and model' },
  { path: '/admin', what: 'operator console (admin token)' },
  { path: '/app/sign-in', what: "members' sign-in: keys, members, sessions" },
];

/** `/` as a browser asks for it (HTML before JSON): sent to the pages; API clients keep the JSON. */
export function redirectBrowserToPages(ctx: Context): boolean {
  if (ctx.accepts('json', 'html') !== 'html') return false;
  ctx.redirect(LANDING_PAGES[0].path);
  return true;
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

/** Only the gateway's own scripts, styles and API; images may also be data: and blob: (results, previews). */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function securityHeaders(ctx: Context): void {
  ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=()');
}

/** Asset names are flat: letters, digits, dot, dash, underscore; never a path. */
const ASSET = /^\/app\/assets\/([a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_-]+)*\.(js|css|svg))$/i;

const BUNDLE_URL = pathToFileURL(BUNDLE_DIR + '/');

/** A page's bundled script (web/.bundle/, built from web/src/ when stale) or a file under web/. */
async function serveFile(ctx: Context, file: string, ext: string): Promise<boolean> {
  // assets/<page>.js is web/.bundle/<page>.js; the console's admin/assets/<name>.js is web/.bundle/admin/<name>.js.
  const name = file.startsWith('assets/')
    ? file.slice('assets/'.length)
    : file.startsWith('admin/assets/')
      ? `admin/${file.slice('admin/assets/'.length)}`
      : null;
  const bundled = name !== null && Object.hasOwn(ENTRIES, name);
  if (bundled) await ensureBundle();
  let bytes: Buffer;
  try {
    bytes = await readFile(bundled ? new URL(name, BUNDLE_URL) : new URL(file, WEB_DIR));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  ctx.type = TYPES[ext.toLowerCase()];
  // Revalidated on every load (cheap 304s), so a new version is picked up at once.
  ctx.set('Cache-Control', 'no-cache');
  ctx.etag = createHash('sha256').update(bytes).digest('base64url').slice(0, 27);
  ctx.body = bytes;
  if (ctx.fresh) {
    ctx.status = 304;
    ctx.body = null;
  }
  return true;
}

/** The operator console (web/admin/): one page at /admin, its assets under /admin/assets/, the same headers. */
const CONSOLE_ASSET = /^\/admin\/assets\/([a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_-]+)*\.(js|css|svg))$/i;

async function adminConsole(ctx: Context, next: Next): Promise<void> {
  securityHeaders(ctx);
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
    throw new ApiError(405, `Method not allowed: ${ctx.path} only answers GET and HEAD.`, 'invalid_request_error', 'method_not_allowed', null, {
      Allow: 'GET, HEAD',
    });
  }
  // The page loads its assets as admin/assets/…, relative to /admin.
  if (ctx.path === '/admin/') return ctx.redirect('/admin' + (ctx.querystring ? `?${ctx.querystring}` : ''));
  const asset = CONSOLE_ASSET.exec(ctx.path);
  if (!(asset ? await serveFile(ctx, `admin/assets/${asset[1]}`, asset[2]) : await serveFile(ctx, 'admin/console.html', 'html'))) return next();
}

export function webRoutes(): Middleware {
  // Build a stale bundle while the server starts; a failure shows on the first request for it.
  ensureBundle().catch(() => undefined);
  return async (ctx: Context, next: Next) => {
    const path = ctx.path;
    if (path === '/admin' || path === '/admin/' || CONSOLE_ASSET.test(path)) return adminConsole(ctx, next);
    if (path !== '/app' && !path.startsWith('/app/')) return next();
    securityHeaders(ctx);
    const page = PAGES[path];
    const asset = ASSET.exec(path);
    const slashed = PAGES[path.replace(/\/+$/, '')] || path === '/app/';
    if (!page && !asset && path !== '/app' && !slashed) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new ApiError(405, `Method not allowed: ${path} only answers GET and HEAD.`, 'invalid_request_error', 'method_not_allowed', null, {
        Allow: 'GET, HEAD',
      });
    }
    // A signed-in member goes to the shell (its first page their role may use); a key holder to the chat.
    if (path === '/app' || path === '/app/')
      return ctx.redirect((ctx.cookies.get(SESSION_COOKIE) ? '/app/home' : '/app/chat') + (ctx.querystring ? `?${ctx.querystring}` : ''));
    // The pages load their assets by relative URL, so a trailing slash would break them.
    if (!page && !asset) return ctx.redirect(path.replace(/\/+$/, '') + (ctx.querystring ? `?${ctx.querystring}` : ''));
    const served = page ? await serveFile(ctx, page, 'html') : await serveFile(ctx, `assets/${asset![1]}`, asset![2]);
    if (!served) return next();
  };
}
