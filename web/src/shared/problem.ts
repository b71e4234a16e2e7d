// A failed call as the pages show it: the HTTP status and the error fields of the caller's dialect
// ({message, type, param, code}), and the sentence that tells a person what to do about it.

export class ApiProblem extends Error {
  readonly status: number;
  readonly type: string | null;
  readonly code: string | null;
  readonly param: string | null;
  readonly retryAfter: number | null;
  constructor(status: number, error: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } = {}, retryAfter: number | null = null) {
    super(typeof error.message === 'string' && error.message ? error.message : `The gateway answered HTTP ${status}.`);
    this.name = 'ApiProblem';
    this.status = status;
    this.type = typeof error.type === 'string' ? error.type : null;
    this.code = typeof error.code === 'string' ? error.code : null;
    this.param = typeof error.param === 'string' ? error.param : null;
    this.retryAfter = retryAfter;
  }
}

/** A mistake caught before anything is sent: shown like the gateway's errors, naming the field. */
export const clientProblem = (message: string, param: string | null = null): ApiProblem =>
  new ApiProblem(0, { message, param: param ?? undefined, type: 'client_error', code: 'client_error' });

/** Turns a non-2xx response into an ApiProblem, whatever its body. */
export async function problemFrom(res: Response): Promise<ApiProblem> {
  let error: Record<string, unknown> = {};
  try {
    const body = await res.json();
    if (body && typeof body.error === 'object' && body.error) error = body.error;
    else if (body && typeof body.message === 'string') error = { message: body.message };
  } catch {
    /* not JSON: keep the status only */
  }
  const retry = Number(res.headers.get('retry-after'));
  return new ApiProblem(res.status, error, Number.isFinite(retry) && retry > 0 ? retry : null);
}

export interface Explained {
  title: string;
  message: string;
  action: string;
  status: number;
  code: string | null;
}

type Advice = Record<number, [string, string]>;

/** What went wrong and what to do about it, for a person; `advice` overrides the titles per status. */
export function explain(problem: unknown, advice: Advice = USER_ADVICE): Explained {
  const p = problem instanceof ApiProblem ? problem : new ApiProblem(0, { message: String((problem as Error)?.message ?? problem), type: 'client_error' });
  const by: Advice = { ...COMMON_ADVICE(p), ...advice };
  let [title, action] = by[p.status] ?? (p.status >= 500 ? by[500] : ['Something went wrong', 'Try again.']);
  if (p.code === 'missing_api_key') [title, action] = ['No API key yet', 'Enter your API key (sk_svc_…) in the API key box and save it.'];
  if (p.type === 'client_error') title = 'Check your input';
  return { title, message: p.message, action, status: p.status, code: p.code };
}

const COMMON_ADVICE = (p: ApiProblem): Advice => ({
  0: ['Could not reach the gateway', 'Check your network connection and that the gateway is running, then try again.'],
  400: ['The request was not accepted', p.param ? `Check the “${p.param}” setting and try again.` : 'Check what you entered and try again.'],
  404: ['Not found', 'The address was not found on this gateway. Reload the page and try again.'],
  405: ['Not allowed', 'Reload the page and try again.'],
  409: ['Conflicting request', 'Wait a moment and send it again.'],
  413: ['The request is too large', 'Use a smaller source image (at most 20 MB) or a shorter message.'],
  415: ['Unsupported request', 'Reload the page and try again.'],
  429: [
    'Too many requests',
    p.retryAfter
      ? `Your plan’s call rate was reached. Wait ${p.retryAfter} second${p.retryAfter === 1 ? '' : 's'} and try again.`
      : 'Your plan’s call rate was reached. Wait a little and try again.',
  ],
  500: ['The gateway had an error', 'Nothing was charged. Try again in a moment; if it keeps happening, tell the gateway operator.'],
  502: ['The model provider failed', 'Nothing was charged. Try again, or pick another model.'],
  503: ['The gateway is busy or starting', 'Nothing was charged. Try again in a moment.'],
  504: ['The model provider took too long', 'Nothing was charged. Try again, or pick another model.'],
});

/** The /app pages' wording for a key holder. */
export const USER_ADVICE: Advice = {
  401: [
    'Your API key was not accepted',
    'Enter a valid key: it starts with sk_svc_ and is shown once when it is created. A revoked key stops working at once; ask for a new one.',
  ],
  402: [
    'Your quota is used up',
    'Renew or upgrade your main plan, or add extra tokens (extra tokens do not change your call rate). Your remaining quota is shown at the top of the page.',
  ],
  403: ['This model is not available on your plan', 'Pick another model from the list; it only shows the models your plan enables.'],
};
