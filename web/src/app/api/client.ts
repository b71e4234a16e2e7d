// The one way the signed-in pages call the session API under /app/api: the session cookie (sent by
// the browser, same origin only), the CSRF token on every state-changing call, JSON in and out, a
// URL checked to stay under /app/api/ on this origin. A non-2xx answer becomes an ApiProblem.
import { gatewayRoot, send } from '../../shared/http.ts';

const SAFE = new Set(['GET', 'HEAD']);

export interface AppCall {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  signal?: AbortSignal;
}

export interface AppApi {
  readonly base: string;
  /** The raw answer (for downloads and non-JSON bodies). */
  call(path: string, options?: AppCall): Promise<Response>;
  json<T>(path: string, options?: AppCall): Promise<T>;
  /** Set once the session is read: sent in X-CSRF-Token on every state-changing call. */
  setCsrf(token: string | null): void;
}

export function createAppApi(base = `${gatewayRoot('/app/')}/app/api/`): AppApi {
  const root = new URL(base).pathname;
  let csrf: string | null = null;
  async function call(path: string, { method = 'GET', body, signal }: AppCall = {}): Promise<Response> {
    const url = new URL(path.replace(/^\/+/, ''), base);
    if (url.origin !== location.origin || !url.pathname.startsWith(root)) throw new Error(`refusing to call ${url.href}`);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (!SAFE.has(method) && csrf) headers['x-csrf-token'] = csrf;
    return send(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, credentials: 'same-origin' });
  }
  return {
    base,
    call,
    json: async <T>(path: string, options?: AppCall) => (await call(path, options)).json() as Promise<T>,
    setCsrf: (token) => {
      csrf = token;
    },
  };
}

/** The pages' one client. */
export const appApi = createAppApi();

/** The signed-in pages' wording for the statuses a member meets. */
export const MEMBER_ADVICE: Record<number, [string, string]> = {
  401: ['You are signed out', 'Your session ended or expired. Sign in again.'],
  403: ['Not allowed', 'Your role in this account may not do this; ask an owner or admin.'],
  404: ['Not found', 'It may have been removed a moment ago. Reload the page.'],
  409: ['Not possible right now', 'The account changed meanwhile, or this would leave it without an owner. Reload and try again.'],
  429: ['Too many attempts', 'Wait a minute and try again.'],
};
