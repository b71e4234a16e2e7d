// Sessions of /app: a cookie `<sessionId>.<secret>` (HttpOnly, SameSite=Strict, Secure over https)
// whose secret's hash is on the session's stream. Sign-out and "end this session" append
// SessionEnded, so the cookie stops working everywhere at once. CSRF: a synchronizer token
// derived from the session secret (HMAC), read by the page from GET /app/api/session and sent
// back in X-CSRF-Token on every state-changing request; a page of another origin can read neither.
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { hashKey } from '../keys/index.ts';
import { sessionDecider, sessionOpens, type SessionState } from './sign-in-decider.ts';
import { normalEmail } from './member-decider.ts';
import { openSessionsOf } from '../../projections/customers/members.ts';

export const SESSION_COOKIE = 'tollgate_session';
export const CSRF_HEADER = 'x-csrf-token';

const COOKIE_SHAPE = /^(ses_[0-9a-f]{24})\.([A-Za-z0-9_-]{43})$/;

export const randomSecret = (): string => randomBytes(32).toString('base64url');

/** The CSRF token of a session: bound to its secret, so it is worth nothing without the cookie. */
export const csrfTokenOf = (secret: string): string => createHmac('sha256', secret).update('tollgate csrf v1').digest('base64url');

export function csrfMatches(secret: string, sent: string | undefined): boolean {
  if (!sent) return false;
  const want = Buffer.from(csrfTokenOf(secret));
  const got = Buffer.from(sent);
  return want.length === got.length && timingSafeEqual(want, got);
}

export interface OpenSession {
  session: SessionState;
  secret: string;
}

/** Starts a session for a person who proved their address; returns the cookie value (shown once). */
export async function startSession(ledger: Ledger, email: string, method: 'email' | 'oidc', hours: number, now = new Date()) {
  const sessionId = `ses_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
  const secret = randomSecret();
  const expiresAt = new Date(now.getTime() + hours * 3_600_000).toISOString();
  await ledger.command(
    sessionDecider,
    streams.session(sessionId),
    { type: 'Start', sessionId, email: normalEmail(email), hash: hashKey(secret), method, expiresAt },
    metadataFor(`person:${normalEmail(email)}`.slice(0, 200)),
  );
  return { sessionId, cookie: `${sessionId}.${secret}`, expiresAt };
}

/** The session a cookie opens now, or null (unknown, ended, expired, wrong secret). */
export async function sessionOf(ledger: Ledger, cookie: string | undefined, now = new Date()): Promise<OpenSession | null> {
  const m = cookie ? COOKIE_SHAPE.exec(cookie) : null;
  if (!m) return null;
  // Read from the log, not a cache: a session ended through another gateway is ended here too.
  const session = await ledger.streamState(sessionDecider, streams.session(m[1]));
  return sessionOpens(session, hashKey(m[2]), now) ? { session, secret: m[2] } : null;
}

export async function endSession(ledger: Ledger, sessionId: string, reason: 'sign_out' | 'ended_by_member' | 'ended_by_operator', actor: string) {
  await ledger.command(sessionDecider, streams.session(sessionId), { type: 'End', reason }, metadataFor(actor));
}

/** A person's open sessions (this one marked). */
export async function sessionsOf(ledger: Ledger, email: string, current: string, now = new Date()) {
  await ledger.readYourWrites();
  const rows = await openSessionsOf(ledger.readModels.db, ledger.rmSchema, normalEmail(email), now);
  return rows.map((r) => ({
    session_id: r.session_id,
    method: r.method,
    started_at: r.started_at,
    expires_at: r.expires_at,
    current: r.session_id === current,
  }));
}
