// Shared by the chat and usage pages: the API key (localStorage only), calls to this gateway's
// /v1 API, readable errors, and small formatting helpers. No dependencies, no build step.

const KEY_STORAGE = 'tollgate.apiKey';

/** The /v1 base of the gateway serving this page (works behind a path prefix too). */
export const API_BASE = (() => {
  const at = location.pathname.indexOf('/app/');
  const root = at >= 0 ? location.pathname.slice(0, at) : '';
  return `${location.origin}${root}/v1/`;
})();

export function getKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || '';
  } catch {
    return '';
  }
}

export function setKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage disabled: the key lives for this page only */
  }
}

export function getPref(name, fallback) {
  try {
    return localStorage.getItem(`tollgate.${name}`) ?? fallback;
  } catch {
    return fallback;
  }
}

export function setPref(name, value) {
  try {
    localStorage.setItem(`tollgate.${name}`, value);
  } catch {
    /* ignore */
  }
}

/** A failed call: HTTP status plus OpenAI's error fields {message, type, param, code}. */
export class ApiProblem extends Error {
  constructor(status, error = {}, extra = {}) {
    super(typeof error.message === 'string' && error.message ? error.message : `The gateway answered HTTP ${status}.`);
    this.name = 'ApiProblem';
    this.status = status;
    this.type = error.type ?? null;
    this.code = error.code ?? null;
    this.param = error.param ?? null;
    this.retryAfter = extra.retryAfter ?? null;
  }
}

/** Turns a non-2xx response into an ApiProblem, whatever its body. */
export async function problemFrom(res) {
  let error = {};
  try {
    const body = await res.json();
    if (body && typeof body.error === 'object' && body.error) error = body.error;
    else if (body && typeof body.message === 'string') error = { message: body.message };
  } catch {
    /* not JSON: keep the status only */
  }
  const retry = Number(res.headers.get('retry-after'));
  return new ApiProblem(res.status, error, { retryAfter: Number.isFinite(retry) && retry > 0 ? retry : null });
}

/**
 * Calls this gateway's /v1 API with the saved key. The key is only ever sent here: the URL is
 * built from API_BASE and checked to stay on this origin.
 */
export async function api(path, { method = 'GET', body, signal, key = getKey() } = {}) {
  if (!key) throw new ApiProblem(401, { message: 'No API key entered yet.', type: 'invalid_request_error', code: 'missing_api_key' });
  const url = new URL(path, API_BASE);
  if (url.origin !== location.origin || !url.pathname.startsWith(new URL(API_BASE).pathname)) throw new Error(`refusing to send the key to ${url.href}`);
  const headers = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiProblem(0, { message: 'The gateway could not be reached.', type: 'network_error', code: 'network_error' });
  }
  if (!res.ok) throw await problemFrom(res);
  return res;
}

export async function apiJson(path, options) {
  const res = await api(path, options);
  return res.json();
}

/** What went wrong and what to do about it, for a person. */
export function explain(problem) {
  const p = problem instanceof ApiProblem ? problem : new ApiProblem(0, { message: String(problem?.message ?? problem), type: 'client_error' });
  const by = {
    0: ['Could not reach the gateway', 'Check your network connection and that the gateway is running, then try again.'],
    400: ['The request was not accepted', p.param ? `Check the “${p.param}” setting and try again.` : 'Check what you entered and try again.'],
    401: [
      'Your API key was not accepted',
      'Enter a valid key: it starts with sk_svc_ and is shown once when it is created. A revoked key stops working at once; ask for a new one.',
    ],
    402: [
      'Your quota is used up',
      'Renew or upgrade your main plan, or add extra tokens (extra tokens do not change your call rate). Your remaining quota is shown at the top of the page.',
    ],
    403: ['This model is not available on your plan', 'Pick another model from the list; it only shows the models your plan enables.'],
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
  };
  let [title, action] = by[p.status] ?? (p.status >= 500 ? by[500] : ['Something went wrong', 'Try again.']);
  if (p.code === 'missing_api_key') [title, action] = ['No API key yet', 'Enter your API key (sk_svc_…) in the API key box and save it.'];
  if (p.code === 'client_error') title = 'Check your input';
  return { title, message: p.message, action, status: p.status, code: p.code };
}

/** Fills an alert region with a readable error; returns the element it built. */
export function showProblem(region, problem, { onKey } = {}) {
  const e = explain(problem);
  region.replaceChildren();
  const box = el('div', { class: 'problem-box' });
  box.append(el('p', { class: 'problem-title' }, e.title));
  if (e.message) box.append(el('p', { class: 'problem-message' }, e.message));
  box.append(el('p', { class: 'problem-action' }, el('strong', {}, 'What to do: '), e.action));
  const meta = [e.status ? `HTTP ${e.status}` : null, e.code].filter(Boolean).join(' · ');
  const actions = el('div', { class: 'problem-actions' });
  if (meta) actions.append(el('span', { class: 'problem-meta' }, meta));
  if ((e.status === 401 || e.code === 'missing_api_key') && onKey) {
    const b = el('button', { type: 'button', class: 'secondary small' }, 'Enter a key');
    b.addEventListener('click', onKey);
    actions.append(b);
  }
  const dismiss = el('button', { type: 'button', class: 'secondary small', 'aria-label': 'Dismiss this error' }, 'Dismiss');
  dismiss.addEventListener('click', () => region.replaceChildren());
  actions.append(dismiss);
  box.append(actions);
  region.append(box);
  return box;
}

/** Tiny element builder: attributes (no inline styles, the CSP forbids them) and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

export const fmt = (n) => Number(n ?? 0).toLocaleString('en-US');

export function compact(n) {
  const v = Number(n) || 0;
  if (v >= 1e9) return `${+(v / 1e9).toFixed(1)}B`;
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(v);
}

export function keyHint(key) {
  return key.length > 14 ? `${key.slice(0, 7)}…${key.slice(-4)}` : '…';
}

/**
 * The API-key box shared by both pages: a form while no key is saved, a one-line summary once
 * it is. Calls onChange(key) when a key is saved or forgotten.
 */
export function setupKeyBar({ onChange }) {
  const form = document.getElementById('key-form');
  const input = document.getElementById('api-key');
  const saved = document.getElementById('key-saved');
  const hint = document.getElementById('key-hint');
  const change = document.getElementById('key-change');
  const forget = document.getElementById('key-forget');
  const cancel = document.getElementById('key-cancel');

  const render = () => {
    const key = getKey();
    form.hidden = !!key;
    saved.hidden = !key;
    if (cancel) cancel.hidden = !key;
    hint.textContent = keyHint(key);
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) {
      input.focus();
      return;
    }
    setKey(key);
    input.value = '';
    render();
    change.focus();
    onChange(key);
  });
  change.addEventListener('click', () => {
    form.hidden = false;
    saved.hidden = true;
    if (cancel) cancel.hidden = false;
    input.focus();
  });
  cancel?.addEventListener('click', () => {
    input.value = '';
    render();
    change.focus();
  });
  forget.addEventListener('click', () => {
    setKey('');
    render();
    input.focus();
    onChange('');
  });
  render();
  return {
    focus() {
      form.hidden = false;
      saved.hidden = true;
      if (cancel) cancel.hidden = !getKey();
      input.focus();
    },
  };
}

/** Shows a subscription (GET /v1/subscription) in the header badge. */
export function renderQuota(badge, sub) {
  const expired = sub.status !== 'active';
  badge.replaceChildren(el('span', { class: 'quota-label' }, 'Remaining'), ' ', el('strong', { id: 'remaining-tokens' }, fmt(sub.remaining_tokens)), ' tokens');
  if (expired) badge.append(' · ', el('span', { class: 'warn' }, 'plan expired'));
  badge.dataset.state = sub.remaining_tokens <= 0 ? 'empty' : expired ? 'expired' : 'ok';
  badge.dataset.remaining = String(sub.remaining_tokens);
  badge.title = sub.plan
    ? `${sub.plan.name} plan${sub.expires_at ? `, ${expired ? 'expired' : 'expires'} ${new Date(sub.expires_at).toLocaleDateString()}` : ''}`
    : 'No plan';
}

export function renderQuotaError(badge, err) {
  badge.textContent = !getKey() ? 'No key entered' : err?.status === 401 ? 'Key not accepted' : 'Quota unavailable';
  badge.dataset.state = getKey() ? 'error' : 'none';
  badge.removeAttribute('title');
  delete badge.dataset.remaining;
}

/** GET /v1/subscription, shown in the header badge; returns the subscription or null. */
export async function refreshQuota(badge) {
  if (!getKey()) {
    renderQuotaError(badge, null);
    return null;
  }
  try {
    const sub = await apiJson('subscription');
    renderQuota(badge, sub);
    return sub;
  } catch (err) {
    renderQuotaError(badge, err);
    return null;
  }
}
