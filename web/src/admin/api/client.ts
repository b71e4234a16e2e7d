// The console's one way to call this gateway's /admin/v1: the admin token (this tab's
// sessionStorage only) as `Authorization: Bearer`, the operator's name as `X-Tollgate-Actor`, a
// URL checked to stay under /admin/v1 on this origin, no cache, no cookies, no referrer.
import { ApiProblem, problemFrom } from '../../shared/problem.ts';

const TOKEN_STORAGE = 'tollgate.adminToken';
const ACTOR_STORAGE = 'tollgate.adminActor';
export const ACTOR_PATTERN = /^[A-Za-z0-9_.@-]{1,64}$/;

/** The /admin/v1/ base of the gateway serving this page (works behind a path prefix too). */
export const ADMIN_BASE = (() => {
  const at = location.pathname.lastIndexOf('/admin');
  return `${location.origin}${at >= 0 ? location.pathname.slice(0, at) : ''}/admin/v1/`;
})();

function read(name: string): string {
  try {
    return sessionStorage.getItem(name) ?? '';
  } catch {
    return '';
  }
}
function write(name: string, value: string): void {
  try {
    if (value) sessionStorage.setItem(name, value);
    else sessionStorage.removeItem(name);
  } catch {
    /* storage disabled: the token lives for this page only */
  }
}

let memoryToken = '';
export const getToken = (): string => read(TOKEN_STORAGE) || memoryToken;
export function setToken(token: string): void {
  memoryToken = token;
  write(TOKEN_STORAGE, token);
}
export const getActor = (): string => read(ACTOR_STORAGE);
export const setActor = (actor: string): void => write(ACTOR_STORAGE, actor);

let unauthorized: (p: ApiProblem) => void = () => undefined;
/** Called when the gateway refuses the saved token (it changed, or the gateway restarted with another). */
export function onUnauthorized(fn: (p: ApiProblem) => void): void {
  unauthorized = fn;
}

export interface AdminCall {
  method?: string;
  body?: unknown;
  accept?: string;
  token?: string;
  signal?: AbortSignal;
}

/** Calls /admin/v1/<path> and returns the response; a non-2xx answer is thrown as an ApiProblem. */
export async function adminCall(path: string, { method = 'GET', body, accept, token = getToken(), signal }: AdminCall = {}): Promise<Response> {
  if (!token) throw new ApiProblem(401, { message: 'You are not signed in.', code: 'missing_admin_token' });
  const url = new URL(path, ADMIN_BASE);
  if (url.origin !== location.origin || !url.pathname.startsWith(new URL(ADMIN_BASE).pathname))
    throw new Error(`refusing to send the admin token to ${url.href}`);
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  const actor = getActor();
  if (actor) headers['x-tollgate-actor'] = actor;
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (accept) headers.accept = accept;
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
  } catch (err) {
    if ((err as Error)?.name === 'AbortError') throw err;
    throw new ApiProblem(0, { message: 'The gateway could not be reached.', code: 'network_error' });
  }
  if (!res.ok) {
    const problem = await problemFrom(res);
    if (res.status === 401 && token === getToken()) unauthorized(problem);
    throw problem;
  }
  return res;
}

/** Calls /admin/v1/<path> and reads its JSON answer. */
export const admin = async <T>(path: string, options?: AdminCall): Promise<T> => (await adminCall(path, options)).json() as Promise<T>;

export const enc = encodeURIComponent;
/** A channel or model id in a path: each part encoded, the slashes kept. */
export const pathOf = (id: string): string => id.split('/').map(enc).join('/');
