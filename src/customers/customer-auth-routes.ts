// The session API's sign-in side under /app/api: email links, OpenID Connect, the session itself,
// sign-out and the member's other sessions. Sessions are for /app only: /v1 never reads a cookie.
//   GET    /sign-in                             the ways to sign in here (OIDC provider's name, sign-up open)
//   POST   /sign-in/email {email}               202, the same answer for every address (a link if it may sign in)
//   POST   /sign-in/email/verify {email, token} the link's page sends it: a session cookie
//   GET    /sign-in/oidc                        302 to the provider (PKCE, state, nonce)
//   GET    /sign-in/oidc/callback               the provider's answer: a session cookie, 302 to /app
//   GET    /session                             who is signed in, their accounts and roles, the CSRF token
//   POST   /sign-out                            ends this session on the server
//   GET    /sessions, DELETE /sessions/:id      the person's open sessions; end one
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import { ApiError, badRequest } from '../http/errors.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { CustomerSettings } from '../config.ts';
import type { SignIn } from './sign-in.ts';
import type { Oidc, OidcTransaction } from './oidc.ts';
import { accountsOf } from './members.ts';
import { CSRF_HEADER, SESSION_COOKIE, csrfMatches, csrfTokenOf, endSession, sessionOf, sessionsOf } from './sessions.ts';
import { streams } from '../ledger/events.ts';
import { sessionDecider } from './sign-in-decider.ts';
import { requirePublicOrigin } from '../http/public-origin.ts';
import { personOf } from '../http/state.ts';

const OIDC_COOKIE = 'tollgate_oidc';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface CustomerAuthDeps {
  ledger: Ledger;
  settings: CustomerSettings;
  signIn: SignIn;
  oidc: Oidc | null;
  /** The origin of every link and redirect (src/http/public-origin.ts); null: none, and sign-in links are refused. */
  publicOrigin: () => string | null;
}

/** Cookies are Secure whenever /app is served over https (directly or behind an https public origin). */
function cookieOptions(ctx: Context, origin: string | null) {
  const secure = ctx.secure || (origin?.startsWith('https://') ?? false);
  if (secure) ctx.cookies.secure = true;
  return { httpOnly: true, secure, overwrite: true };
}

function setSessionCookie(ctx: Context, origin: string | null, value: string, expiresAt: string) {
  ctx.cookies.set(SESSION_COOKIE, value, { ...cookieOptions(ctx, origin), sameSite: 'strict', path: '/app', expires: new Date(expiresAt) });
}

/**
 * A signed-in person, for every /app/api route but sign-in: 401 without a live session; on a
 * state-changing method, 403 unless X-CSRF-Token carries the session's token.
 */
export function requireSession(ledger: Ledger) {
  return async (ctx: Context, next: Next) => {
    const open = await sessionOf(ledger, ctx.cookies.get(SESSION_COOKIE));
    if (!open) throw new ApiError(401, 'Sign in first (no session, or it has ended or expired).', 'invalid_request_error', 'no_session');
    if (!SAFE_METHODS.has(ctx.method) && !csrfMatches(open.secret, ctx.get(CSRF_HEADER) || undefined))
      throw new ApiError(403, `Missing or wrong ${CSRF_HEADER} header: read the token from GET /app/api/session.`, 'permission_error', 'csrf_failed');
    ctx.state.person = { email: open.session.email, sessionId: open.session.sessionId, secret: open.secret };
    ctx.state.actor = `person:${open.session.email}`.slice(0, 200);
    await next();
  };
}

const objectBody = (ctx: Context): Record<string, unknown> => {
  const b = ctx.request.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Record<string, unknown>;
};

export function customerAuthRoutes(deps: CustomerAuthDeps): Router {
  const { ledger, settings, signIn, oidc, publicOrigin } = deps;
  const r = new Router();
  const session = requireSession(ledger);
  // Where the provider sends the person back: the operator's TOLLGATE_OIDC_REDIRECT_URI, else the public origin's callback.
  const oidcCallback = () => oidc?.redirectUri ?? `${requirePublicOrigin(publicOrigin, 'Signing in with OpenID Connect')}/app/api/sign-in/oidc/callback`;

  r.get('/sign-in', (ctx) => {
    ctx.body = {
      object: 'sign_in_options',
      oidc: oidc ? { name: oidc.name } : null,
      sign_up: { open: settings.signUpOpen, plan: settings.signUpOpen ? (settings.signUpPlan ?? null) : null },
    };
  });
  r.post('/sign-in/email', async (ctx) => {
    // The link names the configured public origin, never this request's Host (asked first: the same answer for every address).
    const origin = requirePublicOrigin(publicOrigin, 'Sending a sign-in link');
    await signIn.requestLink(objectBody(ctx).email, origin);
    ctx.status = 202;
    ctx.body = { object: 'sign_in', message: 'If this address may sign in here, a sign-in link is on its way to it.' };
  });
  r.post('/sign-in/email/verify', async (ctx) => {
    const b = objectBody(ctx);
    const s = await signIn.useLink(b.email, b.token);
    setSessionCookie(ctx, publicOrigin(), s.cookie, s.expiresAt);
    ctx.body = { object: 'session', session_id: s.sessionId, expires_at: s.expiresAt };
  });

  r.get('/sign-in/oidc', async (ctx) => {
    if (!oidc) throw new ApiError(404, 'No OpenID Connect provider is configured here.', 'invalid_request_error', 'oidc_off');
    const { url, transaction } = await oidc.start(oidcCallback());
    // Lax: the provider's redirect back is a cross-site top-level GET, which must carry it.
    ctx.cookies.set(OIDC_COOKIE, Buffer.from(JSON.stringify(transaction)).toString('base64url'), {
      ...cookieOptions(ctx, publicOrigin()),
      sameSite: 'lax',
      path: '/app/api/sign-in/oidc',
      maxAge: 10 * 60_000,
    });
    ctx.redirect(url);
  });
  r.get('/sign-in/oidc/callback', async (ctx) => {
    if (!oidc) throw new ApiError(404, 'No OpenID Connect provider is configured here.', 'invalid_request_error', 'oidc_off');
    const raw = ctx.cookies.get(OIDC_COOKIE);
    ctx.cookies.set(OIDC_COOKIE, null, { path: '/app/api/sign-in/oidc' });
    let transaction: OidcTransaction;
    try {
      transaction = JSON.parse(Buffer.from(raw ?? '', 'base64url').toString('utf8')) as OidcTransaction;
      if (typeof transaction.state !== 'string' || typeof transaction.nonce !== 'string' || typeof transaction.verifier !== 'string') throw new Error();
    } catch {
      throw badRequest('This sign-in was not started here, or took too long: start it again.', null, 'oidc_no_transaction');
    }
    const back = new URL(oidcCallback()).origin;
    const email = await oidc.finish(new URL(`${back}${ctx.url}`), transaction);
    const s = await signIn.signedIn(email, 'oidc');
    setSessionCookie(ctx, publicOrigin(), s.cookie, s.expiresAt);
    // Onwards on the public origin (or, without one, the origin the provider sent the person back to).
    ctx.redirect(`${publicOrigin() ?? back}/app/home`);
  });

  r.get('/session', session, async (ctx) => {
    const p = personOf(ctx);
    ctx.set('cache-control', 'no-store');
    const s = await ledger.streamState(sessionDecider, streams.session(p.sessionId));
    ctx.body = {
      object: 'session',
      email: p.email,
      session_id: p.sessionId,
      expires_at: s.expiresAt,
      csrf_token: csrfTokenOf(p.secret),
      accounts: await accountsOf(ledger, p.email),
      sign_in: { oidc: oidc ? oidc.name : null },
    };
  });
  r.post('/sign-out', session, async (ctx) => {
    const p = personOf(ctx);
    await endSession(ledger, p.sessionId, 'sign_out', ctx.state.actor);
    ctx.cookies.set(SESSION_COOKIE, null, { path: '/app' });
    ctx.body = { object: 'session', session_id: p.sessionId, ended: true };
  });
  r.get('/sessions', session, async (ctx) => {
    const p = personOf(ctx);
    ctx.body = { object: 'list', data: await sessionsOf(ledger, p.email, p.sessionId) };
  });
  r.delete('/sessions/:id', session, async (ctx) => {
    const p = personOf(ctx);
    const id = String(ctx.params.id);
    const target = /^ses_[0-9a-f]{24}$/.test(id) ? await ledger.streamState(sessionDecider, streams.session(id)) : sessionDecider.initialState();
    // Someone else's session is as unknown as one that never was.
    if (target.status !== 'active' || target.email !== p.email) throw new ApiError(404, 'No such open session of yours.', 'invalid_request_error', 'not_found');
    await endSession(ledger, target.sessionId, 'ended_by_member', ctx.state.actor);
    ctx.body = { object: 'session', session_id: target.sessionId, ended: true };
  });
  return r;
}
