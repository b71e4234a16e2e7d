// What went wrong and what to do, in an operator's words (the shared explain, with the console's
// advice per status and for mistakes caught before sending).
import { ApiProblem, explain, type Explained } from '../../shared/problem.ts';

const ADMIN_ADVICE: Record<number, [string, string]> = {
  0: ['Could not reach the gateway', 'Check that the gateway is running and reachable, then try again.'],
  401: [
    'The admin token was not accepted',
    'Sign in again with the current admin token: it is in <data dir>/admin-token, or the value of TOLLGATE_ADMIN_TOKEN.',
  ],
  402: ['Not enough balance', 'The account cannot pay for this. Check its balance and try again.'],
  403: ['Refused', 'This action is not allowed on this account or item. Reload and check.'],
  404: ['Not found', 'It may have been named differently or not exist yet. Reload the list and try again.'],
  409: ['Conflict', 'It already exists or clashes with an earlier change (a correction id reused with other terms needs a new id). Reload and check.'],
  413: ['Too large', 'Send less at once.'],
  429: ['Too many requests', 'Wait a moment and try again.'],
  500: ['The gateway had an error', 'Try again; if it keeps happening, look at the gateway’s log (the request id is in the response headers).'],
  503: ['The gateway is busy or its read models are behind', 'Nothing was changed by a read. Try again in a moment.'],
};

export function explainAdmin(problem: unknown): Explained {
  const e = explain(problem, ADMIN_ADVICE);
  if (problem instanceof ApiProblem && problem.code === 'client_error')
    return { ...e, title: 'Check your input', action: 'Correct the highlighted field and try again.' };
  if (problem instanceof ApiProblem && problem.code === 'missing_admin_token')
    return { ...e, title: 'Not signed in', action: 'Enter the admin token to sign in.' };
  if (e.status === 400 && problem instanceof ApiProblem)
    return {
      ...e,
      title: 'The gateway did not accept this',
      action: problem.param ? `Check the “${problem.param}” field and try again.` : 'Check what you entered and try again.',
    };
  return e;
}
