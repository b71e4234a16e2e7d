// A person signed in to /app the way a browser does it: the email link asked for over the session
// API, read from the mail the loopback SMTP server received, sent back to verify; then calls of the
// session API with the cookie and the session's CSRF token.
import * as assert from 'uvu/assert';
import { call, type Reply } from './http.ts';
import type { startSmtpServer } from './customer-servers.ts';

export interface Person {
  email: string;
  /** The value of the tollgate_session cookie. */
  cookie: string;
  csrf: string;
  sessionId: string;
}

type Smtp = Awaited<ReturnType<typeof startSmtpServer>>;

const cookieOf = (r: Reply) => /tollgate_session=([^;]+)/.exec(r.headers.get('set-cookie') ?? '')?.[1] ?? '';

/** Signs `email` in through the link mailed to it; the person has the session's cookie and CSRF token. */
export async function signInByLink(gw: { url: string }, smtp: Smtp, email: string): Promise<Person> {
  const before = smtp.mails.length;
  const asked = await call(gw, '/app/api/sign-in/email', { body: { email } });
  assert.is(asked.status, 202, asked.text);
  const mail = await smtp.mailTo(email, before);
  const url = /https?:\/\/\S+\/app\/sign-in#\S+/.exec(mail.text)?.[0];
  assert.ok(url, `a sign-in link in: ${mail.text}`);
  const fragment = new URLSearchParams(new URL(url).hash.slice(1));
  const verified = await call(gw, '/app/api/sign-in/email/verify', { body: { email: fragment.get('email'), token: fragment.get('token') } });
  assert.is(verified.status, 200, verified.text);
  const cookie = cookieOf(verified);
  const session = await call(gw, '/app/api/session', { headers: { cookie: `tollgate_session=${cookie}` } });
  assert.is(session.status, 200, session.text);
  return { email, cookie, csrf: session.json.csrf_token, sessionId: session.json.session_id };
}

/** A call of the session API (/app/api + path) as this person, with their CSRF token. */
export function asPerson(gw: { url: string }, p: Person, path: string, body?: unknown, method?: string): Promise<Reply> {
  return call(gw, `/app/api${path}`, { body, method, headers: { cookie: `tollgate_session=${p.cookie}`, 'x-csrf-token': p.csrf } });
}
