// Headers every response carries. The pages under /app set their own, stricter policy on top
// (src/pages/web-routes.ts); API, session API and admin answers are data, never to be sniffed, framed or
// stored by any cache (the pages themselves are the same static files for everyone: they hold no
// secret and no money, and revalidate: no-cache).
import type { Context, Next } from 'koa';

/** JSON and NDJSON answers load nothing: a policy that allows nothing costs nothing. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/**
 * Every answer under these holds or may hold a secret or money: a new key's secret, a balance, a
 * statement, a receipt, usage, a session's CSRF token. Case-insensitive, as the routers match.
 */
const NEVER_STORED = /^\/(v1|admin|app\/api|metrics)(\/|$)/i;

export async function securityHeaders(ctx: Context, next: Next): Promise<void> {
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Content-Security-Policy', API_CSP);
  // Balances, usage, statements, receipts and freshly issued keys must not sit in a shared or disk cache.
  if (NEVER_STORED.test(ctx.path)) ctx.set('Cache-Control', 'no-store');
  if (ctx.secure) ctx.set('Strict-Transport-Security', 'max-age=31536000');
  await next();
}
