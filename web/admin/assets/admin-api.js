// The console's calls to this gateway's /admin/v1 API. The admin token is kept in sessionStorage
// (this tab only, gone when it closes) and sent only as `Authorization: Bearer` to /admin/v1 on
// this origin. No dependencies, no build step.

const TOKEN_STORAGE = 'tollgate.adminToken';
const ACTOR_STORAGE = 'tollgate.adminActor';
export const ACTOR_PATTERN = /^[A-Za-z0-9_.@-]{1,64}$/;

/** The /admin/v1/ base of the gateway serving this page (works behind a path prefix too). */
export const ADMIN_BASE = (() => {
  const at = location.pathname.lastIndexOf('/admin');
  const root = at >= 0 ? location.pathname.slice(0, at) : '';
  return `${location.origin}${root}/admin/v1/`;
})();

function read(name) {
  try {
    return sessionStorage.getItem(name) || '';
  } catch {
    return '';
  }
}
function write(name, value) {
  try {
    if (value) sessionStorage.setItem(name, value);
    else sessionStorage.removeItem(name);
  } catch {
    /* storage disabled: the token lives for this page only */
  }
}

let memoryToken = '';
export const getToken = () => read(TOKEN_STORAGE) || memoryToken;
export function setToken(token) {
  memoryToken = token;
  write(TOKEN_STORAGE, token);
}
export const getActor = () => read(ACTOR_STORAGE);
export const setActor = (actor) => write(ACTOR_STORAGE, actor);

/** A failed call: HTTP status and the error fields {message, type, param, code}. */
export class AdminProblem extends Error {
  constructor(status, error = {}) {
    super(typeof error.message === 'string' && error.message ? error.message : `The gateway answered HTTP ${status}.`);
    this.name = 'AdminProblem';
    this.status = status;
    this.type = error.type ?? null;
    this.code = error.code ?? null;
    this.param = error.param ?? null;
  }
}

let unauthorized = () => undefined;
/** Called when the gateway refuses the saved token (it changed, or the gateway restarted with another). */
export function onUnauthorized(fn) {
  unauthorized = fn;
}

/**
 * Calls /admin/v1/<path>. JSON in and out unless `raw` (then the Response is returned, for CSV or
 * a stream); `accept` sets the Accept header (e.g. application/x-ndjson for verify's progress).
 * The URL is built from ADMIN_BASE and checked to stay under it: the token goes nowhere else.
 */
export async function admin(path, { method = 'GET', body, raw = false, accept, token = getToken(), signal } = {}) {
  if (!token) throw new AdminProblem(401, { message: 'You are not signed in.', code: 'missing_admin_token' });
  const url = new URL(path, ADMIN_BASE);
  if (url.origin !== location.origin || !url.pathname.startsWith(new URL(ADMIN_BASE).pathname))
    throw new Error(`refusing to send the admin token to ${url.href}`);
  const headers = { authorization: `Bearer ${token}` };
  const actor = getActor();
  if (actor) headers['x-tollgate-actor'] = actor;
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (accept) headers.accept = accept;
  let res;
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
    if (err?.name === 'AbortError') throw err;
    throw new AdminProblem(0, { message: 'The gateway could not be reached.', code: 'network_error' });
  }
  if (!res.ok) {
    let error = {};
    try {
      const j = await res.json();
      if (j && typeof j.error === 'object' && j.error) error = j.error;
    } catch {
      /* not JSON */
    }
    const problem = new AdminProblem(res.status, error);
    if (res.status === 401 && token === getToken()) unauthorized(problem);
    throw problem;
  }
  return raw ? res : res.json();
}

/** What went wrong and what to do, for an operator. */
export function explain(problem) {
  const p = problem instanceof AdminProblem ? problem : new AdminProblem(0, { message: String(problem?.message ?? problem), code: 'client_error' });
  const by = {
    0: ['Could not reach the gateway', 'Check that the gateway is running and reachable, then try again.'],
    400: ['The gateway did not accept this', p.param ? `Check the “${p.param}” field and try again.` : 'Check what you entered and try again.'],
    401: [
      'The admin token was not accepted',
      'Sign in again with the current admin token: it is in <data dir>/admin-token, or the value of TOLLGATE_ADMIN_TOKEN.',
    ],
    404: ['Not found', 'It may have been named differently or not exist yet. Reload the list and try again.'],
    405: ['Not allowed', 'Reload the page and try again.'],
    409: ['Conflict', 'It already exists or clashes with an earlier change (a correction id reused with other terms needs a new id). Reload and check.'],
    413: ['Too large', 'Send less at once.'],
    415: ['Unsupported request', 'Reload the page and try again.'],
    503: ['The gateway is busy or its read models are behind', 'Nothing was changed by a read. Try again in a moment.'],
  };
  let [title, action] =
    by[p.status] ??
    (p.status >= 500
      ? ['The gateway had an error', 'Try again; if it keeps happening, look at the gateway’s log (the request id is in the response headers).']
      : ['Something went wrong', 'Try again.']);
  if (p.code === 'client_error') [title, action] = ['Check your input', 'Correct the highlighted field and try again.'];
  if (p.code === 'missing_admin_token') [title, action] = ['Not signed in', 'Enter the admin token to sign in.'];
  return { title, message: p.message, action, status: p.status, code: p.code };
}
