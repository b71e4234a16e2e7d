// The one way the pages call this gateway: a bearer token in the Authorization header (never in
// the URL), a URL checked to stay under the API's own path on this origin, no cache, no referrer.
// A non-2xx answer becomes an ApiProblem; a network failure one with status 0.
import { ApiProblem, problemFrom } from './problem.ts';

export interface CallOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

/** The gateway's root (before /app/ or /admin), so the pages work behind a path prefix too. */
export function gatewayRoot(marker: string): string {
  const at = location.pathname.indexOf(marker);
  return `${location.origin}${at >= 0 ? location.pathname.slice(0, at) : ''}`;
}

/** fetch with the pages' defaults (no cache, no referrer): a non-2xx answer or a network failure thrown as an ApiProblem. */
export async function send(url: URL, init: RequestInit): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, cache: 'no-store', referrerPolicy: 'no-referrer' });
  } catch (err) {
    if ((err as Error)?.name === 'AbortError') throw err;
    throw new ApiProblem(0, { message: 'The gateway could not be reached.', type: 'network_error', code: 'network_error' });
  }
  if (!res.ok) throw await problemFrom(res);
  return res;
}

export interface Client {
  readonly base: string;
  call(path: string, options?: CallOptions): Promise<Response>;
  json<T>(path: string, options?: CallOptions): Promise<T>;
}

/** A client for the API under `base` (ending in '/'), sending the token `token()` returns. */
export function createClient(base: string, token: () => string, missing: () => ApiProblem): Client {
  const root = new URL(base).pathname;
  async function call(path: string, { method = 'GET', body, signal }: CallOptions = {}): Promise<Response> {
    const secret = token();
    if (!secret) throw missing();
    const url = new URL(path, base);
    if (url.origin !== location.origin || !url.pathname.startsWith(root)) throw new Error(`refusing to send the token to ${url.href}`);
    const headers: Record<string, string> = { authorization: `Bearer ${secret}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return send(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  }
  return { base, call, json: async <T>(path: string, options?: CallOptions) => (await call(path, options)).json() as Promise<T> };
}
