// The session API (/app/api) as the billing page calls it: the session cookie goes by itself
// (same origin, HttpOnly), every state-changing call carries the session's CSRF token, and a
// non-2xx answer becomes an ApiProblem like the /v1 pages'.
import { gatewayRoot } from '../../shared/http.ts';
import { ApiProblem, problemFrom } from '../../shared/problem.ts';

export type Role = 'owner' | 'admin' | 'billing' | 'developer';

export interface SessionInfo {
  email: string;
  session_id: string;
  expires_at: string;
  csrf_token: string;
  accounts: Array<{ account_id: string; member_id: string; role: Role }>;
}

const BASE = `${gatewayRoot('/app/')}/app/api/`;
let csrf = '';

/** GET /app/api/session; remembers its CSRF token for the calls that change something. */
export async function loadSession(): Promise<SessionInfo> {
  const s = await json<SessionInfo>('session');
  csrf = s.csrf_token;
  return s;
}

export async function call(path: string, { method = 'GET', body }: { method?: string; body?: unknown } = {}): Promise<Response> {
  const url = new URL(path, BASE);
  if (url.origin !== location.origin || !url.pathname.startsWith(new URL(BASE).pathname)) throw new Error(`refusing to call ${url.href}`);
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') headers['x-csrf-token'] = csrf;
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
  } catch {
    throw new ApiProblem(0, { message: 'The gateway could not be reached.', type: 'network_error', code: 'network_error' });
  }
  if (!res.ok) throw await problemFrom(res);
  return res;
}

export const json = async <T>(path: string, options?: { method?: string; body?: unknown }): Promise<T> => (await call(path, options)).json() as Promise<T>;

/** The paths of one account's billing routes. */
export const accountPath = (accountId: string, path: string) => `accounts/${encodeURIComponent(accountId)}/${path}`;

/** The /app pages' wording for a signed-in member. */
export const MEMBER_ADVICE: Record<number, [string, string]> = {
  401: ['You are signed out', 'Your session has ended or expired. Sign in again to continue.'],
  402: ['Payment needed', 'Buy a plan or a pack, or redeem a code.'],
  403: ['Not allowed for your role', 'Billing is for the owner and billing roles. Ask an owner of the account to change your role.'],
};
