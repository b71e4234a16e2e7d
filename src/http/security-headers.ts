// Headers every response carries. The pages under /app set their own, stricter policy on top
// (src/routes/web.ts); API and admin answers are data, never to be sniffed, framed or cached.
import type { Context, Next } from 'koa';

/** JSON and NDJSON answers load nothing: a policy that allows nothing costs nothing. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'";

export async function securityHeaders(ctx: Context, next: Next): Promise<void> {
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Content-Security-Policy', API_CSP);
  // Balances, usage, statements and freshly issued keys must not sit in a shared or disk cache.
  if (ctx.path.startsWith('/v1') || ctx.path.startsWith('/admin')) ctx.set('Cache-Control', 'no-store');
  if (ctx.secure) ctx.set('Strict-Transport-Security', 'max-age=31536000');
  await next();
}
