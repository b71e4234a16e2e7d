// Sign-in, the session and the person's sessions, typed (paths of src/customers/customer-auth-routes.ts).
import { appApi } from './client.ts';
import type { OpenSession, Session, SignInOptions } from './types.ts';

export const signInApi = {
  options: () => appApi.json<SignInOptions>('sign-in'),
  requestLink: (email: string) => appApi.json<{ message: string }>('sign-in/email', { method: 'POST', body: { email } }),
  useLink: (email: string, token: string) => appApi.json<{ session_id: string }>('sign-in/email/verify', { method: 'POST', body: { email, token } }),
  /** Where the OpenID Connect button goes (a full-page redirect to the provider). */
  oidcUrl: () => new URL('sign-in/oidc', appApi.base).href,
};

export const sessionApi = {
  /** The session; also arms the client with its CSRF token. */
  async read(): Promise<Session> {
    const s = await appApi.json<Session>('session');
    appApi.setCsrf(s.csrf_token);
    return s;
  },
  signOut: () => appApi.json<unknown>('sign-out', { method: 'POST' }),
  list: () => appApi.json<{ data: OpenSession[] }>('sessions').then((r) => r.data),
  end: (sessionId: string) => appApi.json<unknown>(`sessions/${encodeURIComponent(sessionId)}`, { method: 'DELETE' }),
};
