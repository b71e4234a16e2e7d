// The operator console at /admin: accounts (balance, keys, plan, extra tokens, statements),
// plans, model prices, channel health, corrections (dry run as a table and a chart, then apply)
// and the ledger audit. One page; the part after # names the section. Every call goes to this
// gateway's /admin/v1 with the admin token (admin-api.js).
import { el, fmt } from '../../app/assets/common.js';
import { ACTOR_PATTERN, AdminProblem, admin, explain, getActor, getToken, onUnauthorized, setActor, setToken } from './admin-api.js';
import { reconciliationChart } from './reconciliation-chart.js';

const $ = (id) => document.getElementById(id);
const view = $('view');
const signin = $('signin');
const nav = $('nav');
const session = $('session');
const announcer = $('announce');

// ---- small helpers ----------------------------------------------------------------------------

/** Says `text` to screen readers through the page's status region. */
function announce(text) {
  announcer.textContent = '';
  setTimeout(() => {
    announcer.textContent = text;
  }, 30);
}

const enc = encodeURIComponent;
const pathOfChannel = (id) => id.split('/').map(enc).join('/');
const signed = (n) => (n > 0 ? `+${fmt(n)}` : n < 0 ? `−${fmt(-n)}` : '0');
const when = (iso) => (iso ? `${new Date(iso).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '—');
/** To the second, for correction windows. */
const whenExact = (iso) => (iso ? `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC` : '—');
const dayUtc = (d = new Date()) => d.toISOString().slice(0, 10);
const milli = (v) => (v === null || v === undefined ? null : Number(v) / 1000);

let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

/** A labelled form field: input (or select/textarea) with an optional help line. */
function field(labelText, control, help = null, { optional = false, wide = false } = {}) {
  if (!control.id) control.id = nextId('f');
  const wrap = el(
    'div',
    { class: wide ? 'field wide' : 'field' },
    el('label', { for: control.id }, labelText, optional ? el('span', { class: 'optional' }, ' (optional)') : null),
    control,
  );
  if (help) {
    const h = el('p', { class: 'help', id: `${control.id}-help` }, help);
    control.setAttribute('aria-describedby', h.id);
    wrap.append(h);
  }
  return wrap;
}

function input(attrs) {
  return el('input', { autocomplete: 'off', spellcheck: 'false', ...attrs });
}

/** An error region (role=alert) and a way to fill it with what went wrong and what to do. */
function problemRegion() {
  return el('div', { class: 'problem', role: 'alert', 'aria-live': 'assertive' });
}

function showProblem(region, problem, form = null) {
  const e = explain(problem);
  const meta = [e.status ? `HTTP ${e.status}` : null, e.code].filter(Boolean).join(' · ');
  const dismiss = el('button', { type: 'button', class: 'secondary small', 'aria-label': 'Dismiss this error' }, 'Dismiss');
  dismiss.addEventListener('click', () => region.replaceChildren());
  region.replaceChildren(
    el(
      'div',
      { class: 'problem-box' },
      el('p', { class: 'problem-title' }, e.title),
      e.message ? el('p', { class: 'problem-message' }, e.message) : null,
      el('p', { class: 'problem-action' }, el('strong', {}, 'What to do: '), e.action),
      el('div', { class: 'problem-actions' }, meta ? el('span', { class: 'problem-meta' }, meta) : null, dismiss),
    ),
  );
  // The field the gateway named, if this form has it.
  if (form && problem instanceof AdminProblem && problem.param) {
    const bad = form.querySelector(`[name="${CSS.escape(problem.param)}"]`);
    if (bad) {
      bad.setAttribute('aria-invalid', 'true');
      bad.focus();
    }
  }
}

/** A polite live region for the result of an action. */
function resultRegion(extraClass = '') {
  return el('div', { class: `result ${extraClass}`.trim(), role: 'status', 'aria-live': 'polite' });
}

function showResult(region, ...nodes) {
  region.replaceChildren(el('div', { class: 'result-box' }, ...nodes));
}

function clearInvalid(form) {
  for (const n of form.querySelectorAll('[aria-invalid="true"]')) n.removeAttribute('aria-invalid');
}

function fail(message, param) {
  return new AdminProblem(0, { message, param, code: 'client_error' });
}

/** Runs `work` with `button` disabled and marked busy; errors go to `region`. */
async function busy(button, region, work, form = null) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  region.replaceChildren();
  if (form) clearInvalid(form);
  try {
    return await work();
  } catch (err) {
    showProblem(region, err, form);
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

function card(titleText, ...children) {
  const id = nextId('h');
  return el('section', { class: 'card', 'aria-labelledby': id }, el('h2', { id }, titleText), ...children);
}

function table({ caption, head, rows, foot = null, id = null, captionVisible = false }) {
  const t = el(
    'table',
    { id },
    el('caption', { class: captionVisible ? null : 'visually-hidden' }, caption),
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col', class: h.startsWith('#') ? 'num' : null }, h.replace(/^#/, ''))))),
    el('tbody', {}, ...rows),
    foot ? el('tfoot', {}, foot) : null,
  );
  const wrap = el('div', { class: 'table-wrap', role: 'region', tabindex: 0, 'aria-label': caption }, t);
  return wrap;
}

const num = (value, attrs = {}) => el('td', { class: 'num', 'data-value': value, ...attrs }, typeof value === 'number' ? fmt(value) : (value ?? '—'));
const emptyRow = (cols, text) => el('tr', {}, el('td', { colspan: cols, class: 'empty-cell' }, text));

function pill(state, text = state) {
  return el('span', { class: `pill pill-${String(state).replace(/[^a-z_]/gi, '')}` }, text);
}

/** A key's state: revoked, expired (its own expires_at passed; the listing says `expired`) or active. */
function keyStatusPill(k) {
  if (k.status !== 'active') return pill('revoked', 'Revoked');
  return k.expired ? pill('expired', 'Expired') : pill('active', 'Active');
}

// ---- confirmation dialog ----------------------------------------------------------------------

const dialog = $('dialog');
const dialogForm = $('dialog-form');
const dialogReasonField = $('dialog-reason-field');
const dialogReason = $('dialog-reason');
const dialogReasonError = $('dialog-reason-error');
const dialogConfirm = $('dialog-confirm');
let dialogDone = null;

/**
 * Asks before an action that changes the ledger. Resolves to { confirmed, reason }. With
 * `reason`, a reason box is shown (required when reason.required).
 */
function confirmAction({ title, body, confirmLabel = 'Confirm', danger = false, reason = null }) {
  const opener = document.activeElement;
  $('dialog-title').textContent = title;
  $('dialog-body').replaceChildren(...[].concat(body).map((b) => (typeof b === 'string' ? el('p', {}, b) : b)));
  dialogConfirm.textContent = confirmLabel;
  dialogConfirm.classList.toggle('danger', danger);
  dialogReasonField.hidden = !reason;
  dialogReason.value = reason?.value ?? '';
  dialogReason.required = !!reason?.required;
  dialogReason.removeAttribute('aria-invalid');
  dialogReason.removeAttribute('aria-describedby');
  dialogReasonError.hidden = true;
  $('dialog-reason-label').replaceChildren(reason?.label ?? 'Reason', reason && !reason.required ? el('span', { class: 'optional' }, ' (optional)') : '');
  return new Promise((resolve) => {
    dialogDone = (confirmed) => {
      dialogDone = null;
      const out = { confirmed, reason: dialogReason.value.trim() };
      if (dialog.open) dialog.close();
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(out);
    };
    dialog.showModal();
    // A reason box takes the focus; otherwise the safe choice (Cancel) has it.
    (reason ? dialogReason : $('dialog-cancel')).focus();
  });
}
dialogForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (dialogReason.required && !dialogReason.value.trim()) {
    dialogReason.setAttribute('aria-invalid', 'true');
    dialogReason.setAttribute('aria-describedby', 'dialog-reason-error');
    dialogReasonError.hidden = false;
    dialogReason.focus();
    return;
  }
  dialogDone?.(true);
});
$('dialog-cancel').addEventListener('click', () => dialogDone?.(false));
dialog.addEventListener('close', () => dialogDone?.(false));

// ---- sign in, sign out ------------------------------------------------------------------------

const signinForm = $('signin-form');
const tokenInput = $('admin-token');
const actorInput = $('actor');
const signinProblem = $('signin-problem');

function showSignin(problem = null) {
  view.hidden = true;
  view.replaceChildren();
  nav.hidden = true;
  session.hidden = true;
  signin.hidden = false;
  document.title = 'Sign in · Operator console · Tollgate';
  actorInput.value = getActor() && getActor() !== 'console' ? getActor() : '';
  if (problem) showProblem(signinProblem, problem);
  else signinProblem.replaceChildren();
}

signinForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const token = tokenInput.value.trim();
  const actor = actorInput.value.trim();
  clearInvalid(signinForm);
  if (!token) {
    showProblem(signinProblem, fail('Enter the admin token.', 'admin-token'));
    tokenInput.setAttribute('aria-invalid', 'true');
    tokenInput.focus();
    return;
  }
  if (actor && !ACTOR_PATTERN.test(actor)) {
    showProblem(signinProblem, fail('Your name may have 1 to 64 letters, digits, “_”, “.”, “@” or “-”.', 'actor'));
    actorInput.setAttribute('aria-invalid', 'true');
    actorInput.focus();
    return;
  }
  const submit = $('signin-submit');
  const ok = await busy(submit, signinProblem, async () => {
    try {
      await admin('accounts?limit=1', { token });
    } catch (err) {
      // Without an admin token configured the gateway serves no /admin/v1 at all.
      if (err instanceof AdminProblem && err.status === 404)
        throw new AdminProblem(404, {
          message: 'This gateway has no admin API: it was started without an admin token (set TOLLGATE_ADMIN_TOKEN, or give it a data directory).',
          code: 'admin_api_disabled',
        });
      throw err;
    }
    return true;
  });
  if (!ok) {
    tokenInput.setAttribute('aria-invalid', 'true');
    tokenInput.focus();
    tokenInput.select();
    return;
  }
  setToken(token);
  setActor(actor || 'console');
  tokenInput.value = '';
  signinProblem.replaceChildren();
  announce('Signed in.');
  if (!location.hash || location.hash === '#') history.replaceState(null, '', '#/accounts');
  route({ focus: true });
});

$('sign-out').addEventListener('click', () => {
  setToken('');
  showSignin();
  announce('Signed out. The admin token was removed from this tab.');
  tokenInput.focus();
});

onUnauthorized((problem) => {
  setToken('');
  showSignin(new AdminProblem(401, { message: `Your session ended: ${problem.message}`, code: problem.code }));
  tokenInput.focus();
});

// ---- routing ----------------------------------------------------------------------------------

let seq = 0;

const SECTIONS = {
  accounts: { title: 'Accounts', render: accountsView },
  plans: { title: 'Plans', render: plansView },
  models: { title: 'Models and prices', render: modelsView },
  channels: { title: 'Channel health', render: channelsView },
  corrections: { title: 'Corrections', render: correctionsView },
  verify: { title: 'Verify the ledger', render: verifyView },
};

function route({ focus = false } = {}) {
  if (!getToken()) {
    showSignin();
    return;
  }
  signin.hidden = true;
  view.hidden = false;
  nav.hidden = false;
  session.hidden = false;
  $('session-who').textContent = `Signed in as ${getActor() || 'console'}`;
  const hash = location.hash.replace(/^#\/?/, '');
  const [section, ...rest] = hash.split('/').filter(Boolean);
  const known = section && Object.hasOwn(SECTIONS, section) ? section : 'accounts';
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.section === known) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const mine = ++seq;
  const alive = () => mine === seq;
  let account = null;
  if (section === 'accounts' && rest.length) {
    try {
      account = decodeURIComponent(rest.join('/'));
    } catch {
      account = rest.join('/');
    }
  }
  view.replaceChildren();
  if (account) accountView(account, alive);
  else SECTIONS[known].render(alive);
  const heading = view.querySelector('h1');
  document.title = `${heading?.textContent ?? 'Console'} · Operator console · Tollgate`;
  if (focus) heading?.focus();
}

window.addEventListener('hashchange', () => route({ focus: true }));

function heading(text, intro = null) {
  return [el('h1', { tabindex: -1, id: 'view-heading' }, text), intro ? el('p', { class: 'muted intro' }, intro) : null];
}

// ---- accounts ---------------------------------------------------------------------------------

const PAGE_SIZE = 25;
/** Cursors of the pages seen: page n starts after cursors[n] (undefined: the first page). */
const accountPages = { cursors: [undefined], index: 0 };

function statusPill(status) {
  return pill(status, { active: 'Active', expired: 'Expired', no_plan: 'No plan' }[status] ?? status);
}

function accountsView(alive) {
  const problem = problemRegion();
  const list = el('div', { class: 'list-body', 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the accounts…'));
  const prev = el('button', { type: 'button', class: 'secondary small' }, 'Previous page');
  const next = el('button', { type: 'button', class: 'secondary small' }, 'Next page');
  const pageLabel = el('span', { class: 'muted', 'aria-live': 'polite' });
  const refresh = el('button', { type: 'button', class: 'secondary small' }, 'Refresh');

  async function load() {
    list.setAttribute('aria-busy', 'true');
    problem.replaceChildren();
    try {
      const after = accountPages.cursors[accountPages.index];
      const page = await admin(`accounts?limit=${PAGE_SIZE}${after ? `&after=${enc(after)}` : ''}`);
      if (!alive()) return;
      if (page.next_after) accountPages.cursors[accountPages.index + 1] = page.next_after;
      const rows = page.data.map((a) =>
        el(
          'tr',
          { 'data-account-id': a.account_id },
          el('th', { scope: 'row' }, el('a', { href: `#/accounts/${enc(a.account_id)}` }, a.name), el('span', { class: 'sub' }, a.account_id)),
          num(a.remaining_tokens, { 'data-field': 'remaining_tokens' }),
          el('td', {}, statusPill(a.status)),
          el('td', {}, a.plan ? a.plan.name : '—'),
          el('td', { class: 'num' }, a.plan ? `${fmt(a.quota.remaining)} of ${fmt(a.quota.total)}` : '—'),
          num(a.extra_tokens.remaining),
          el('td', {}, when(a.expires_at)),
        ),
      );
      if (rows.length === 0) rows.push(emptyRow(7, 'No accounts yet: open one below.'));
      list.replaceChildren(
        table({
          caption: 'Accounts',
          id: 'accounts-table',
          head: ['Account', '#Remaining tokens', 'Status', 'Plan', '#Main quota left', '#Extra tokens left', 'Plan expires'],
          rows,
        }),
      );
      prev.disabled = accountPages.index === 0;
      next.disabled = !page.has_more;
      pageLabel.textContent = `Page ${accountPages.index + 1}${page.data.length ? `: ${page.data[0].account_id} to ${page.data[page.data.length - 1].account_id}` : ''}`;
    } catch (err) {
      if (!alive()) return;
      list.replaceChildren(el('p', { class: 'loading' }, 'The accounts could not be loaded.'));
      showProblem(problem, err);
    } finally {
      list.setAttribute('aria-busy', 'false');
    }
  }
  prev.addEventListener('click', () => {
    accountPages.index = Math.max(0, accountPages.index - 1);
    load();
  });
  next.addEventListener('click', () => {
    accountPages.index += 1;
    load();
  });
  refresh.addEventListener('click', () => load());

  // Open an account.
  const name = input({ type: 'text', name: 'name', required: true, maxlength: 200 });
  const id = input({ type: 'text', name: 'account_id', maxlength: 64 });
  const submit = el('button', { type: 'submit' }, 'Open account');
  const openProblem = problemRegion();
  const openResult = resultRegion();
  const form = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Name', name),
    field('Account id', id, 'Letters, digits, _ . : -; left empty, one is generated.', { optional: true }),
    el('div', { class: 'form-actions' }, submit),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const res = await busy(
      submit,
      openProblem,
      async () => {
        if (!name.value.trim()) throw fail('Give the account a name.', 'name');
        return admin('accounts', { method: 'POST', body: { name: name.value.trim(), ...(id.value.trim() ? { account_id: id.value.trim() } : {}) } });
      },
      form,
    );
    if (!res) return;
    showResult(
      openResult,
      'Opened account ',
      el('a', { href: `#/accounts/${enc(res.account_id)}` }, res.account_id),
      '. Subscribe it to a plan and issue a key on its page.',
    );
    form.reset();
    load();
  });

  view.append(
    ...heading('Accounts', 'Every account with its plan and balance. Open one to manage its keys, plan, extra tokens and statements.'),
    problem,
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'accounts-list-heading' },
      el('div', { class: 'card-head' }, el('h2', { id: 'accounts-list-heading' }, 'All accounts'), refresh),
      list,
      el('div', { class: 'row pager' }, prev, pageLabel, next),
    ),
    card('Open an account', form, openProblem, openResult),
  );
  load();
}

function accountView(accountId, alive) {
  const backLink = el('a', { href: '#/accounts', class: 'back' }, '← All accounts');
  const title = el('h1', { tabindex: -1, id: 'view-heading' }, `Account ${accountId}`);
  const problem = problemRegion();

  // Balance
  const balanceBody = el('div', { id: 'balance', 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the balance…'));
  let current = null;
  async function loadBalance() {
    balanceBody.setAttribute('aria-busy', 'true');
    try {
      const a = await admin(`accounts/${enc(accountId)}/balance`);
      if (!alive()) return null;
      current = a;
      title.textContent = `${a.name}`;
      title.append(el('span', { class: 'sub' }, ` ${a.account_id}`));
      document.title = `${a.name} · Operator console · Tollgate`;
      const total = a.quota.total;
      const pct = total > 0 ? Math.max(0, Math.min(100, Math.round((a.quota.remaining / total) * 100))) : 0;
      const dd = (fieldName, value, text = typeof value === 'number' ? fmt(value) : value) =>
        el('dd', { 'data-field': fieldName, 'data-value': value ?? '' }, text ?? '—');
      balanceBody.replaceChildren(
        el('p', { class: 'big-label muted' }, 'Remaining tokens (what a new call may use)'),
        el('p', { class: 'big', 'data-field': 'remaining_tokens', 'data-value': a.remaining_tokens }, fmt(a.remaining_tokens)),
        el('progress', { max: 100, value: pct, class: 'quota-bar', 'aria-label': `Main quota left: ${pct}%` }),
        el(
          'dl',
          { class: 'facts' },
          el('dt', {}, 'Plan'),
          el('dd', { 'data-field': 'plan' }, a.plan ? `${a.plan.name} (${a.plan.id})` : 'None', ' ', statusPill(a.status)),
          el('dt', {}, 'Quota total'),
          dd('quota_total', a.quota.total),
          el('dt', {}, 'Quota used'),
          dd('quota_used', a.quota.used),
          el('dt', {}, 'Held by calls in flight'),
          dd('quota_reserved', a.quota.reserved),
          el('dt', {}, 'Quota remaining'),
          dd('quota_remaining', a.quota.remaining),
          el('dt', {}, 'Extra tokens granted'),
          dd('extra_granted', a.extra_tokens.granted),
          el('dt', {}, 'Extra tokens used'),
          dd('extra_used', a.extra_tokens.used),
          el('dt', {}, 'Extra tokens left'),
          dd('extra_remaining', a.extra_tokens.remaining),
          el('dt', {}, 'Plan started'),
          dd('starts_at', a.starts_at, when(a.starts_at)),
          el('dt', {}, 'Plan expires'),
          dd('expires_at', a.expires_at, when(a.expires_at)),
          el('dt', {}, 'Call rate'),
          dd('rpm', a.rate_limit.requests_per_minute, a.rate_limit.requests_per_minute ? `${fmt(a.rate_limit.requests_per_minute)} requests/min` : '—'),
        ),
      );
      renderPlanChoice();
      return a;
    } catch (err) {
      if (!alive()) return null;
      balanceBody.replaceChildren(el('p', { class: 'loading' }, 'The balance could not be loaded.'));
      showProblem(problem, err);
      return null;
    } finally {
      balanceBody.setAttribute('aria-busy', 'false');
    }
  }

  // Subscribe / renew
  const planSelect = el('select', { name: 'plan_id' }, el('option', { value: '' }, 'Loading the plans…'));
  const subscribe = el('button', { type: 'submit' }, 'Subscribe');
  const subProblem = problemRegion();
  const subResult = resultRegion();
  const subForm = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Plan', planSelect, 'Renewing resets the quota and moves the expiry; a different plan replaces the current one.', { wide: true }),
    el('div', { class: 'form-actions' }, subscribe),
  );
  let plansList = [];
  function renderPlanChoice() {
    const chosen = planSelect.value || current?.plan?.id || '';
    planSelect.replaceChildren(
      el('option', { value: '' }, plansList.length ? 'Choose a plan' : 'No plans defined yet'),
      ...plansList.map((p) => el('option', { value: p.plan_id }, `${p.name} (${p.plan_id}): ${fmt(p.quota)} tokens, ${p.validity_days} days`)),
    );
    planSelect.value = plansList.some((p) => p.plan_id === chosen) ? chosen : '';
    subscribe.textContent = current?.plan && planSelect.value === current.plan.id ? 'Renew' : 'Subscribe';
  }
  planSelect.addEventListener('change', renderPlanChoice);
  subForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const renew = subscribe.textContent === 'Renew';
    const res = await busy(
      subscribe,
      subProblem,
      async () => {
        if (!planSelect.value) throw fail('Choose a plan.', 'plan_id');
        return admin(`accounts/${enc(accountId)}/subscription`, { method: 'POST', body: { plan_id: planSelect.value } });
      },
      subForm,
    );
    if (!res) return;
    await loadBalance();
    const text = `${renew ? 'Renewed' : 'Subscribed to'} ${res.planName ?? res.planId ?? planSelect.value}: expires ${when(res.expiresAt)}.`;
    showResult(subResult, text);
  });

  // Extra tokens
  const amount = input({ type: 'number', name: 'amount', min: 1, step: 1, inputmode: 'numeric', required: true });
  const reason = input({ type: 'text', name: 'reason', maxlength: 500 });
  const grant = el('button', { type: 'submit' }, 'Grant extra tokens');
  const grantProblem = problemRegion();
  const grantResult = resultRegion();
  const grantForm = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Tokens to grant', amount, 'Spent after the main plan; they do not change the call rate.'),
    field('Reason for the grant', reason, null, { optional: true }),
    el('div', { class: 'form-actions' }, grant),
  );
  grantForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const n = Number(amount.value);
    const res = await busy(
      grant,
      grantProblem,
      async () => {
        if (!Number.isSafeInteger(n) || n < 1) throw fail('Enter a whole number of tokens, at least 1.', 'amount');
        return admin(`accounts/${enc(accountId)}/extra-tokens`, { method: 'POST', body: { amount: n, reason: reason.value.trim() } });
      },
      grantForm,
    );
    if (!res) return;
    const a = await loadBalance();
    const text = `Granted ${fmt(res.granted)} extra tokens.${a ? ` Extra tokens left: ${fmt(a.extra_tokens.remaining)}; remaining tokens: ${fmt(a.remaining_tokens)}.` : ''}`;
    showResult(grantResult, text);
    grantForm.reset();
  });

  // Keys
  const keysBody = el('div', { 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the keys…'));
  const keysProblem = problemRegion();
  const keysResult = resultRegion();
  const secretSlot = el('div', { class: 'secret-slot' });
  const limitsSlot = el('div', { class: 'limits-slot' });
  async function loadKeys() {
    keysBody.setAttribute('aria-busy', 'true');
    try {
      const list = await admin(`accounts/${enc(accountId)}/keys`);
      if (!alive()) return;
      // Per-key controls (spend limit, models, expiry) when this gateway's key listing carries them.
      const withControls = list.data.some((k) => 'spend_limit' in k);
      const rows = list.data.map((k) => {
        const actions = el('div', { class: 'row actions' });
        if (k.status === 'active') {
          if (withControls) {
            const limits = el('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit the limits of key ${k.name} (${k.masked})` }, 'Limits');
            limits.addEventListener('click', () => editLimits(k, limits));
            actions.append(limits);
          }
          const revokeButton = el(
            'button',
            { type: 'button', class: 'secondary small danger-text', 'aria-label': `Revoke key ${k.name} (${k.masked})` },
            'Revoke',
          );
          revokeButton.addEventListener('click', () => revoke(k));
          actions.append(revokeButton);
        } else {
          actions.append(el('span', { class: 'muted' }, k.revoked_at ? `Revoked ${when(k.revoked_at)}` : 'Revoked'));
        }
        return el(
          'tr',
          { 'data-key-id': k.key_id, 'data-status': k.status },
          el('th', { scope: 'row' }, k.name),
          el('td', {}, el('code', { class: 'masked' }, k.masked)),
          el('td', {}, keyStatusPill(k)),
          withControls ? el('td', { class: 'note controls' }, ...controlsText(k)) : null,
          el('td', {}, when(k.issued_at)),
          el('td', {}, k.last_used_at ? when(k.last_used_at) : 'Never'),
          el('td', {}, actions),
        );
      });
      const head = ['Name', 'Key', 'Status', ...(withControls ? ['Limits'] : []), 'Issued', 'Last used', 'Action'];
      if (rows.length === 0) rows.push(emptyRow(head.length, 'No keys yet.'));
      keysBody.replaceChildren(table({ caption: `Keys of ${accountId}`, id: 'keys-table', head, rows }));
    } catch (err) {
      if (!alive()) return;
      keysBody.replaceChildren(el('p', { class: 'loading' }, 'The keys could not be loaded.'));
      showProblem(keysProblem, err);
    } finally {
      keysBody.setAttribute('aria-busy', 'false');
    }
  }
  const PERIOD_TEXT = { none: 'in total', daily: 'a day', weekly: 'a week', monthly: 'a month' };
  /** A key's controls in words: its spend limit and what is left of it, its models, its expiry. */
  function controlsText(k) {
    const lines = [];
    if (k.spend_limit) {
      const left = k.spend?.remaining;
      lines.push(
        el(
          'span',
          { class: 'control', 'data-field': 'spend_limit', 'data-value': k.spend_limit.tokens },
          `${fmt(k.spend_limit.tokens)} tokens ${PERIOD_TEXT[k.spend_limit.period] ?? k.spend_limit.period}`,
          k.spend ? ` (${fmt(k.spend.spent)} spent${typeof left === 'number' ? `, ${fmt(left)} left` : ''})` : '',
        ),
      );
    } else lines.push(el('span', { class: 'control' }, 'No spend limit'));
    lines.push(el('span', { class: 'control', 'data-field': 'models' }, k.models ? `Models: ${k.models.join(', ')}` : 'Every model of the plan'));
    if (k.expires_at)
      lines.push(el('span', { class: 'control', 'data-field': 'key_expires_at' }, `${k.expired ? 'Expired' : 'Expires'} ${when(k.expires_at)}`));
    return lines;
  }

  /** The form for one key's controls, under the table; only what changed is sent. */
  function editLimits(k, opener) {
    const tokens = input({ type: 'number', name: 'spend_limit.tokens', min: 0, step: 1, inputmode: 'numeric', value: k.spend_limit?.tokens ?? '' });
    const period = el(
      'select',
      { name: 'spend_limit.period' },
      ...Object.entries({ none: 'In total', daily: 'Per day (UTC)', weekly: 'Per week (from Monday, UTC)', monthly: 'Per month (UTC)' }).map(([v, t]) =>
        el('option', { value: v }, t),
      ),
    );
    period.value = k.spend_limit?.period ?? 'monthly';
    const models = input({ type: 'text', name: 'models', value: (k.models ?? []).join(', ') });
    const expires = input({ type: 'datetime-local', name: 'expires_at', step: 1, value: k.expires_at ? isoToLocal(new Date(k.expires_at)) : '' });
    const save = el('button', { type: 'submit' }, 'Save limits');
    const close = el('button', { type: 'button', class: 'secondary' }, 'Cancel');
    const formProblem = problemRegion();
    const form = el(
      'form',
      { class: 'form-grid', novalidate: true },
      field('Spend limit (billed tokens)', tokens, 'Empty: no limit of its own (the account’s balance still applies).', { optional: true }),
      field('Limit period', period),
      field('Models', models, 'Model ids, separated by commas; empty: every model of the plan.', { optional: true }),
      field('Key expires (your local time)', expires, 'Empty: the key does not expire.', { optional: true }),
      el('div', { class: 'form-actions' }, save, close),
    );
    close.addEventListener('click', () => {
      limitsSlot.replaceChildren();
      opener.focus();
    });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const res = await busy(
        save,
        formProblem,
        async () => {
          const body = {};
          const t = tokens.value.trim() === '' ? null : Number(tokens.value);
          if (t !== null && !(Number.isSafeInteger(t) && t >= 0))
            throw fail('Enter a whole number of tokens, or leave it empty for no limit.', 'spend_limit.tokens');
          const limit = t === null ? null : { tokens: t, period: period.value };
          if (JSON.stringify(limit) !== JSON.stringify(k.spend_limit ? { tokens: k.spend_limit.tokens, period: k.spend_limit.period } : null))
            body.spend_limit = limit;
          const list = models.value.split(/[\s,]+/).filter(Boolean);
          const m = list.length ? list : null;
          if (JSON.stringify(m) !== JSON.stringify(k.models ?? null)) body.models = m;
          const e = expires.value ? localToIso(expires.value) : null;
          if (expires.value && !e) throw fail('Choose a valid time, or leave it empty.', 'expires_at');
          if (e !== (k.expires_at ? new Date(k.expires_at).toISOString() : null)) body.expires_at = e;
          if (Object.keys(body).length === 0) throw fail('Nothing changed.', null);
          return admin(`accounts/${enc(accountId)}/keys/${enc(k.key_id)}`, { method: 'PATCH', body });
        },
        form,
      );
      if (!res) return;
      limitsSlot.replaceChildren();
      // The table is reloaded before the message, so what the message announces is already shown.
      await loadKeys();
      showResult(keysResult, `Limits of key ${k.name} (${k.masked}) saved.`);
      keysBody.querySelector(`tr[data-key-id="${CSS.escape(k.key_id)}"] button`)?.focus();
    });
    limitsSlot.replaceChildren(
      el(
        'section',
        { class: 'edit-card limits-card', 'aria-labelledby': 'limits-heading' },
        el('h3', { id: 'limits-heading' }, `Limits of key ${k.name} (${k.masked})`),
        form,
        formProblem,
      ),
    );
    tokens.focus();
  }

  async function revoke(k) {
    const answer = await confirmAction({
      title: `Revoke key ${k.name}?`,
      body: [
        `The key ${k.masked} of ${accountId} stops working at once, in every gateway process: its next request is a 401. This cannot be undone; issue a new key instead.`,
      ],
      confirmLabel: 'Revoke key',
      danger: true,
      reason: { label: 'Reason', required: false },
    });
    if (!answer.confirmed) {
      announce('Nothing was revoked.');
      return;
    }
    try {
      await admin(`keys/${enc(k.key_id)}/revoke`, { method: 'POST', body: { reason: answer.reason } });
      await loadKeys();
      showResult(keysResult, `Key ${k.name} (${k.masked}) is revoked.`);
      keyName.focus();
    } catch (err) {
      showProblem(keysProblem, err);
    }
  }
  const keyName = input({ type: 'text', name: 'name', maxlength: 200, placeholder: 'default' });
  const issue = el('button', { type: 'submit' }, 'Issue a key');
  const issueForm = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Key name', keyName, null, { optional: true }),
    el('div', { class: 'form-actions' }, issue),
  );
  issueForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const res = await busy(
      issue,
      keysProblem,
      () => admin(`accounts/${enc(accountId)}/keys`, { method: 'POST', body: { name: keyName.value.trim() || 'default' } }),
      issueForm,
    );
    if (!res) return;
    keysResult.replaceChildren();
    showSecret(res);
    issueForm.reset();
    loadKeys();
  });
  /** The secret, shown this once, with a copy button; "Done" removes it from the page. */
  function showSecret(res) {
    const secret = input({ type: 'text', readonly: true, value: res.key, id: 'new-key-secret', class: 'secret', 'aria-describedby': 'new-key-warning' });
    const copy = el('button', { type: 'button', class: 'secondary' }, 'Copy');
    const done = el('button', { type: 'button' }, 'Done: I have saved it');
    const copied = el('span', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(secret.value);
        copied.textContent = 'Copied to the clipboard.';
      } catch {
        secret.focus();
        secret.select();
        copied.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
      }
    });
    done.addEventListener('click', () => {
      secretSlot.replaceChildren();
      showResult(keysResult, `The key is now shown only masked, as ${res.masked}. The secret cannot be shown again.`);
      issue.focus();
    });
    secretSlot.replaceChildren(
      el(
        'div',
        { class: 'secret-box', role: 'region', 'aria-labelledby': 'new-key-heading' },
        el('h3', { id: 'new-key-heading' }, `New key “${keyName.value.trim() || 'default'}”`),
        el('p', { id: 'new-key-warning', class: 'warn' }, 'Copy the key now: this is the only time it is shown. Only its hash is stored.'),
        field('Secret key', secret),
        el('div', { class: 'row' }, copy, done, copied),
      ),
    );
    secret.focus();
    secret.select();
    announce('Key issued. The secret key is shown once, selected in the Secret key box.');
  }

  // Statement
  const today = dayUtc();
  const from = input({ type: 'date', name: 'from', required: true, value: `${today.slice(0, 8)}01` });
  const to = input({ type: 'date', name: 'to', required: true, value: today });
  const formatCsv = el('input', { type: 'radio', name: 'format', value: 'csv', id: nextId('fmt'), checked: true });
  const formatJson = el('input', { type: 'radio', name: 'format', value: 'json', id: nextId('fmt') });
  const download = el('button', { type: 'submit' }, 'Download statement');
  const stProblem = problemRegion();
  const stResult = resultRegion();
  const stForm = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('From (UTC day)', from),
    field('To (UTC day, included)', to),
    el(
      'fieldset',
      { class: 'field' },
      el('legend', {}, 'Format'),
      el(
        'div',
        { class: 'radio-row' },
        el('label', { for: formatCsv.id, class: 'radio' }, formatCsv, ' CSV'),
        el('label', { for: formatJson.id, class: 'radio' }, formatJson, ' JSON'),
      ),
    ),
    el('div', { class: 'form-actions' }, download),
  );
  stForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const format = formatJson.checked ? 'json' : 'csv';
    const res = await busy(
      download,
      stProblem,
      async () => {
        if (!/^\d{4}-\d{2}-\d{2}$/.test(from.value)) throw fail('Choose the first day.', 'from');
        if (!/^\d{4}-\d{2}-\d{2}$/.test(to.value)) throw fail('Choose the last day.', 'to');
        if (from.value > to.value) throw fail('The first day must not be after the last day.', 'from');
        const end = new Date(`${to.value}T00:00:00Z`);
        end.setUTCDate(end.getUTCDate() + 1);
        const q = `from=${enc(`${from.value}T00:00:00Z`)}&to=${enc(end.toISOString())}${format === 'csv' ? '&format=csv' : ''}`;
        const response = await admin(`accounts/${enc(accountId)}/statement?${q}`, { raw: true });
        const text = await response.text();
        return { text, format };
      },
      stForm,
    );
    if (!res) return;
    const name = `statement-${accountId}-${from.value}-to-${to.value}.${res.format}`;
    const blob = new Blob([res.text], { type: res.format === 'csv' ? 'text/csv' : 'application/json' });
    const href = URL.createObjectURL(blob);
    const a = el('a', { href, download: name, class: 'visually-hidden' }, name);
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 60_000);
    let summary;
    if (res.format === 'json') {
      const s = JSON.parse(res.text);
      summary = `${fmt(s.totals.charges)} charges, ${fmt(s.totals.adjustments)} adjustments, net ${fmt(s.totals.net)} tokens`;
    } else {
      const lines = res.text.split('\n');
      const total = lines.find((l) => l.startsWith('total,'))?.split(',') ?? [];
      summary = `${fmt(Number(total[1] ?? 0))} charges, ${fmt(Number(total[2] ?? 0))} adjustments, net ${fmt(Number(total[3] ?? 0))} tokens`;
    }
    showResult(stResult, `Downloaded ${name}: ${summary}.`);
  });

  view.append(
    backLink,
    title,
    problem,
    el(
      'div',
      { class: 'account-grid' },
      el(
        'section',
        { class: 'card balance-card', 'aria-labelledby': 'balance-heading' },
        el(
          'div',
          { class: 'card-head' },
          el('h2', { id: 'balance-heading' }, 'Balance'),
          (() => {
            const b = el('button', { type: 'button', class: 'secondary small' }, 'Refresh');
            b.addEventListener('click', () => loadBalance());
            return b;
          })(),
        ),
        balanceBody,
      ),
      el(
        'div',
        { class: 'stack' },
        card('Plan: subscribe or renew', subForm, subProblem, subResult),
        card('Extra tokens', grantForm, grantProblem, grantResult),
      ),
    ),
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'keys-heading' },
      el('h2', { id: 'keys-heading' }, 'API keys'),
      keysBody,
      keysProblem,
      keysResult,
      limitsSlot,
      secretSlot,
      el('h3', {}, 'Issue a key'),
      issueForm,
    ),
    card('Statement', el('p', { class: 'help' }, 'Every charge and adjustment in the period, with request ids and daily totals.'), stForm, stProblem, stResult),
  );

  loadBalance();
  loadKeys();
  admin('plans')
    .then((p) => {
      if (!alive()) return;
      plansList = p.data;
      renderPlanChoice();
    })
    .catch((err) => {
      if (alive()) showProblem(subProblem, err);
    });
}

// ---- plans ------------------------------------------------------------------------------------

function plansView(alive) {
  const problem = problemRegion();
  const list = el('div', { 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the plans…'));
  let modelIds = [];
  let editing = null;

  const planId = input({ type: 'text', name: 'plan_id', required: true, maxlength: 64 });
  const name = input({ type: 'text', name: 'name', required: true, maxlength: 200 });
  const quota = input({ type: 'number', name: 'quota', min: 0, step: 1, inputmode: 'numeric', required: true });
  const validity = input({ type: 'number', name: 'validity_days', min: 1, max: 3650, step: 1, inputmode: 'numeric', required: true, value: 30 });
  const rpm = input({ type: 'number', name: 'requests_per_minute', min: 1, step: 1, inputmode: 'numeric', required: true, value: 60 });
  const all = el('input', { type: 'checkbox', id: nextId('all'), name: 'models', checked: true });
  const modelBoxes = el('div', { class: 'checks' });
  const modelsField = el(
    'fieldset',
    { class: 'field models-field' },
    el('legend', {}, 'Models'),
    el('label', { class: 'check', for: all.id }, all, ' All models (*), also those priced later'),
    modelBoxes,
  );
  const submit = el('button', { type: 'submit' }, 'Define plan');
  const cancel = el('button', { type: 'button', class: 'secondary', hidden: true }, 'Cancel editing');
  const formProblem = problemRegion();
  const formResult = resultRegion();
  const formTitle = el('h2', { id: 'plan-form-heading' }, 'Define a plan');
  const form = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Plan id', planId, 'Letters, digits, _ . : -'),
    field('Name', name),
    field('Quota (tokens)', quota),
    field('Validity (days)', validity),
    field('Requests per minute', rpm),
    modelsField,
    el('div', { class: 'form-actions' }, submit, cancel),
  );

  function renderModelBoxes(selected = []) {
    modelBoxes.replaceChildren(
      ...modelIds.map((m) => {
        const box = el('input', { type: 'checkbox', value: m, id: nextId('m'), checked: selected.includes(m), disabled: all.checked });
        return el('label', { class: 'check', for: box.id }, box, ` ${m}`);
      }),
    );
  }
  all.addEventListener('change', () => {
    for (const b of modelBoxes.querySelectorAll('input')) b.disabled = all.checked;
  });

  function edit(p) {
    editing = p.plan_id;
    formTitle.textContent = `Update plan ${p.plan_id}`;
    planId.value = p.plan_id;
    planId.readOnly = true;
    name.value = p.name;
    quota.value = p.quota;
    validity.value = p.validity_days;
    rpm.value = p.requests_per_minute;
    all.checked = p.models.includes('*');
    renderModelBoxes(p.models);
    submit.textContent = 'Update plan';
    cancel.hidden = false;
    formResult.replaceChildren();
    name.focus();
  }
  function stopEditing() {
    editing = null;
    formTitle.textContent = 'Define a plan';
    form.reset();
    planId.readOnly = false;
    all.checked = true;
    renderModelBoxes();
    submit.textContent = 'Define plan';
    cancel.hidden = true;
  }
  cancel.addEventListener('click', () => {
    stopEditing();
    planId.focus();
  });

  async function load() {
    list.setAttribute('aria-busy', 'true');
    try {
      const [plans, models] = await Promise.all([admin('plans'), admin('models')]);
      if (!alive()) return;
      modelIds = models.data.map((m) => m.model_id);
      if (!editing) renderModelBoxes();
      const rows = plans.data.map((p) => {
        const b = el('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit plan ${p.plan_id}` }, 'Edit');
        b.addEventListener('click', () => edit(p));
        return el(
          'tr',
          { 'data-plan-id': p.plan_id },
          el('th', { scope: 'row' }, p.name, el('span', { class: 'sub' }, p.plan_id)),
          num(p.quota),
          num(p.validity_days),
          num(p.requests_per_minute),
          el('td', { class: 'models' }, p.models.includes('*') ? 'All models' : p.models.join(', ')),
          el('td', {}, when(p.updated_at)),
          el('td', {}, b),
        );
      });
      if (rows.length === 0) rows.push(emptyRow(7, 'No plans yet: define one below.'));
      list.replaceChildren(
        table({ caption: 'Plans', id: 'plans-table', head: ['Plan', '#Quota', '#Days', '#Requests/min', 'Models', 'Changed', 'Action'], rows }),
      );
    } catch (err) {
      if (!alive()) return;
      list.replaceChildren(el('p', { class: 'loading' }, 'The plans could not be loaded.'));
      showProblem(problem, err);
    } finally {
      list.setAttribute('aria-busy', 'false');
    }
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const update = editing;
    const res = await busy(
      submit,
      formProblem,
      async () => {
        const ints = { quota: Number(quota.value), validity_days: Number(validity.value), requests_per_minute: Number(rpm.value) };
        if (!planId.value.trim()) throw fail('Give the plan an id.', 'plan_id');
        if (!name.value.trim()) throw fail('Give the plan a name.', 'name');
        for (const [k, v] of Object.entries(ints)) if (!Number.isSafeInteger(v) || v < (k === 'quota' ? 0 : 1)) throw fail('Enter a whole number here.', k);
        const models = all.checked ? ['*'] : [...modelBoxes.querySelectorAll('input:checked')].map((b) => b.value);
        if (models.length === 0) throw fail('Choose at least one model, or all models.', 'models');
        const body = { name: name.value.trim(), ...ints, models };
        return update
          ? admin(`plans/${enc(update)}`, { method: 'PUT', body })
          : admin('plans', { method: 'POST', body: { plan_id: planId.value.trim(), ...body } });
      },
      form,
    );
    if (!res) return;
    const text = update ? `Plan ${res.planId} updated: subscriptions started or renewed from now get the new terms.` : `Plan ${res.planId} defined.`;
    stopEditing();
    await load();
    showResult(formResult, text);
  });

  view.append(
    ...heading('Plans', 'What a subscription gives: a quota of tokens for a number of days, a call rate and the models it may use.'),
    problem,
    el('section', { class: 'card', 'aria-labelledby': 'plans-list-heading' }, el('h2', { id: 'plans-list-heading' }, 'All plans'), list),
    el('section', { class: 'card', 'aria-labelledby': 'plan-form-heading' }, formTitle, form, formProblem, formResult),
  );
  load();
}

// ---- models -----------------------------------------------------------------------------------

function modelsView(alive) {
  const problem = problemRegion();
  const list = el('div', { 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the models…'));
  const editSlot = el('div');
  const result = resultRegion();

  async function load() {
    list.setAttribute('aria-busy', 'true');
    try {
      const models = await admin('models');
      if (!alive()) return;
      const weight = (v) => (v === null || v === undefined ? el('span', { class: 'muted' }, 'plain') : String(milli(v)));
      const rows = models.data.map((m) => {
        const b = el('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit the price of ${m.model_id}` }, 'Edit');
        b.addEventListener('click', () => edit(m, b));
        return el(
          'tr',
          { 'data-model-id': m.model_id },
          el('th', { scope: 'row' }, m.model_id),
          el('td', {}, m.alias ?? '—'),
          el('td', { class: 'num', 'data-value': milli(m.multiplier_milli) }, `×${milli(m.multiplier_milli)}`),
          el('td', {}, pill(m.status === 'ACTIVE' ? 'active' : 'inactive', m.status === 'ACTIVE' ? 'Active' : 'Inactive')),
          el('td', { class: 'num' }, weight(m.cache_read_milli)),
          el('td', { class: 'num' }, weight(m.cache_write_milli)),
          el('td', {}, when(m.updated_at)),
          el('td', {}, b),
        );
      });
      if (rows.length === 0) rows.push(emptyRow(8, 'No model is priced.'));
      list.replaceChildren(
        table({
          caption: 'Model prices',
          id: 'models-table',
          head: ['Model', 'Alias', '#Multiplier', 'Status', '#Cache read weight', '#Cache write weight', 'Priced', 'Action'],
          rows,
        }),
      );
    } catch (err) {
      if (!alive()) return;
      list.replaceChildren(el('p', { class: 'loading' }, 'The models could not be loaded.'));
      showProblem(problem, err);
    } finally {
      list.setAttribute('aria-busy', 'false');
    }
  }

  function edit(m, opener) {
    const multiplier = input({ type: 'number', name: 'multiplier', min: 0.001, step: 0.001, inputmode: 'decimal', value: milli(m.multiplier_milli) });
    const status = el('select', { name: 'status' }, el('option', { value: 'ACTIVE' }, 'Active'), el('option', { value: 'INACTIVE' }, 'Inactive'));
    status.value = m.status;
    const alias = input({ type: 'text', name: 'alias', maxlength: 100, value: m.alias ?? '' });
    const read = input({
      type: 'number',
      name: 'cache_read_weight',
      min: 0,
      max: 1000,
      step: 0.001,
      inputmode: 'decimal',
      value: milli(m.cache_read_milli) ?? '',
    });
    const write = input({
      type: 'number',
      name: 'cache_write_weight',
      min: 0,
      max: 1000,
      step: 0.001,
      inputmode: 'decimal',
      value: milli(m.cache_write_milli) ?? '',
    });
    const save = el('button', { type: 'submit' }, 'Save price');
    const close = el('button', { type: 'button', class: 'secondary' }, 'Cancel');
    const formProblem = problemRegion();
    const form = el(
      'form',
      { class: 'form-grid', novalidate: true },
      field('Multiplier', multiplier, 'Billed tokens = tokens × multiplier, from now on.'),
      field('Status', status),
      field('Alias', alias, 'Another id callers may use; empty for none.', { optional: true }),
      field('Cache read weight', read, 'Price of a cached prompt token (1 = a plain one); empty: a plain token.', { optional: true }),
      field('Cache write weight', write, 'Price of a cache-written prompt token; empty: a plain token.', { optional: true }),
      el('div', { class: 'form-actions' }, save, close),
    );
    close.addEventListener('click', () => {
      editSlot.replaceChildren();
      opener.focus();
    });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const res = await busy(
        save,
        formProblem,
        async () => {
          const body = {};
          const mult = Number(multiplier.value);
          if (!(mult > 0)) throw fail('The multiplier must be a number above 0.', 'multiplier');
          if (Math.round(mult * 1000) !== m.multiplier_milli) body.multiplier = mult;
          if (status.value !== m.status) body.status = status.value;
          const a = alias.value.trim() || null;
          if (a !== (m.alias ?? null)) body.alias = a;
          for (const [box, key, before] of [
            [read, 'cache_read_weight', m.cache_read_milli],
            [write, 'cache_write_weight', m.cache_write_milli],
          ]) {
            const v = box.value.trim() === '' ? null : Number(box.value);
            if (v !== null && !(v >= 0 && v <= 1000)) throw fail('A weight is a number from 0 to 1000, or empty.', key);
            if ((v === null ? null : Math.round(v * 1000)) !== (before ?? null)) body[key] = v;
          }
          if (Object.keys(body).length === 0) throw fail('Nothing changed.', null);
          return admin(`models/${m.model_id.split('/').map(enc).join('/')}`, { method: 'PATCH', body });
        },
        form,
      );
      if (!res) return;
      editSlot.replaceChildren();
      const text = `${m.model_id} priced: ×${milli(res.multiplierMilli)}, ${res.status === 'ACTIVE' ? 'active' : 'inactive'}${res.alias ? `, alias ${res.alias}` : ''}.`;
      // The table is reloaded before the message, so what the message announces is already shown.
      await load();
      showResult(result, text);
      list.querySelector(`tr[data-model-id="${CSS.escape(m.model_id)}"] button`)?.focus();
    });
    editSlot.replaceChildren(
      el(
        'section',
        { class: 'card edit-card', 'aria-labelledby': 'model-edit-heading' },
        el('h2', { id: 'model-edit-heading' }, `Price of ${m.model_id}`),
        form,
        formProblem,
      ),
    );
    multiplier.focus();
  }

  view.append(
    ...heading('Models and prices', 'Prices apply from the moment they are set; to fix what was already billed, use a correction.'),
    problem,
    result,
    editSlot,
    el('section', { class: 'card', 'aria-labelledby': 'models-list-heading' }, el('h2', { id: 'models-list-heading' }, 'Priced models'), list),
  );
  load();
}

// ---- channels ---------------------------------------------------------------------------------

const STATE_TEXT = { closed: 'Healthy', open: 'Open (failing)', half_open: 'Trial', disabled: 'Disabled' };

function channelsView(alive) {
  const problem = problemRegion();
  const result = resultRegion();
  const list = el('div', { 'aria-busy': 'true' }, el('p', { class: 'loading' }, 'Loading the channels…'));
  const refresh = el('button', { type: 'button', class: 'secondary small' }, 'Refresh');
  refresh.addEventListener('click', () => load());

  async function load() {
    list.setAttribute('aria-busy', 'true');
    try {
      const channels = await admin('channels');
      if (!alive()) return;
      const rows = channels.data.map((c) => {
        const disabled = c.state === 'disabled';
        const b = el(
          'button',
          {
            type: 'button',
            class: `small ${disabled ? '' : 'secondary danger-text'}`.trim(),
            'aria-label': `${disabled ? 'Enable' : 'Disable'} channel ${c.id}`,
          },
          disabled ? 'Enable' : 'Disable',
        );
        b.addEventListener('click', () => toggle(c));
        const note = c.disabled
          ? `By ${c.disabled.by}${c.disabled.reason ? `: “${c.disabled.reason}”` : ''}, ${when(c.disabled.at)}`
          : c.retry_at
            ? `Trial call after ${when(c.retry_at)}`
            : '';
        return el(
          'tr',
          { 'data-channel-id': c.id, 'data-state': c.state },
          el('th', { scope: 'row' }, c.id, el('span', { class: 'sub' }, `${c.provider} · ${c.upstream_model}`)),
          el('td', { class: 'models' }, c.models.join(', ')),
          el('td', {}, pill(c.state, STATE_TEXT[c.state] ?? c.state)),
          num(c.calls, { 'data-field': 'calls' }),
          num(c.failures, { 'data-field': 'failures' }),
          num(c.failovers, { 'data-field': 'failovers' }),
          el('td', { class: 'note' }, note),
          el('td', {}, b),
        );
      });
      if (rows.length === 0) rows.push(emptyRow(8, 'No channels in the models config.'));
      list.replaceChildren(
        table({
          caption: 'Upstream channels',
          id: 'channels-table',
          head: ['Channel', 'Models', 'State', '#Calls', '#Failures', '#Failovers', 'Note', 'Action'],
          rows,
        }),
      );
    } catch (err) {
      if (!alive()) return;
      list.replaceChildren(el('p', { class: 'loading' }, 'The channels could not be loaded.'));
      showProblem(problem, err);
    } finally {
      list.setAttribute('aria-busy', 'false');
    }
  }

  async function toggle(c) {
    const enable = c.state === 'disabled';
    const answer = await confirmAction({
      title: `${enable ? 'Enable' : 'Disable'} channel ${c.id}?`,
      body: enable
        ? [`Calls to ${c.models.join(', ')} may use ${c.id} again.`]
        : [`Calls to ${c.models.join(', ')} stop using ${c.id} and fail over to their other channels; a model with no other channel cannot be served.`],
      confirmLabel: enable ? 'Enable channel' : 'Disable channel',
      danger: !enable,
      reason: { label: 'Reason', required: !enable },
    });
    if (!answer.confirmed) {
      announce('The channel was not changed.');
      return;
    }
    try {
      const res = await admin(`channels/${pathOfChannel(c.id)}`, { method: 'PATCH', body: { enabled: enable, reason: answer.reason } });
      await load();
      const text = `Channel ${c.id} ${enable ? 'enabled' : 'disabled'}${res.changed ? '' : ' (it already was)'}.`;
      showResult(result, text);
      list.querySelector(`tr[data-channel-id="${CSS.escape(c.id)}"] button`)?.focus();
    } catch (err) {
      showProblem(problem, err);
    }
  }

  view.append(
    ...heading(
      'Channel health',
      'Each channel is one provider and upstream model. Counters are this gateway process’s, since it started; switches are events and reach every process.',
    ),
    problem,
    result,
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'channels-list-heading' },
      el('div', { class: 'card-head' }, el('h2', { id: 'channels-list-heading' }, 'Channels'), refresh),
      list,
    ),
  );
  load();
}

// ---- corrections ------------------------------------------------------------------------------

const COMPONENTS = {
  multiplier: { label: 'Multiplier', help: 'The right multiplier, e.g. 1.25.', step: 0.001 },
  cache_read_weight: { label: 'Cache read weight', help: 'The right price of a cached prompt token (1 = a plain one).', step: 0.001 },
  cache_write_weight: { label: 'Cache write weight', help: 'The right price of a cache-written prompt token.', step: 0.001 },
  image_tokens: { label: 'Tokens per image', help: 'The right number of tokens counted per image.', step: 1 },
};

/** A datetime-local value (this browser's time zone) as ISO 8601 UTC, or null. */
function localToIso(v) {
  if (!v) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}
function isoToLocal(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function reconciliationTable(report, idBase) {
  const rows = report.accounts.map((a) =>
    el(
      'tr',
      { 'data-account': a.accountId },
      el('th', { scope: 'row' }, el('a', { href: `#/accounts/${enc(a.accountId)}` }, a.accountId)),
      num(a.charges, { 'data-col': 'charges' }),
      num(a.billedOriginally, { 'data-col': 'billedOriginally' }),
      num(a.billedNow, { 'data-col': 'billedNow' }),
      num(a.corrected, { 'data-col': 'corrected' }),
      el(
        'td',
        { class: `num diff ${a.difference < 0 ? 'down' : a.difference > 0 ? 'up' : ''}`, 'data-col': 'difference', 'data-value': a.difference },
        signed(a.difference),
      ),
    ),
  );
  if (rows.length === 0) rows.push(emptyRow(6, 'No charge in this window.'));
  const t = report.totals;
  const foot = el(
    'tr',
    { 'data-account': '(total)' },
    el('th', { scope: 'row' }, 'Total'),
    num(t.charges, { 'data-col': 'charges' }),
    num(t.billedOriginally, { 'data-col': 'billedOriginally' }),
    num(t.billedNow, { 'data-col': 'billedNow' }),
    num(t.corrected, { 'data-col': 'corrected' }),
    el('td', { class: 'num', 'data-col': 'difference', 'data-value': t.difference }, signed(t.difference)),
  );
  return table({
    caption: `Reconciliation per account: billed and corrected tokens of ${report.modelId}`,
    id: `${idBase}-table`,
    head: ['Account', '#Charges', '#Billed originally', '#Billed now', '#Corrected', '#Difference'],
    rows,
    foot,
  });
}

/** Per account, the charges and the chain of earlier corrections of each. */
function chargeDetails(report) {
  return report.accounts.map((a) =>
    el(
      'details',
      { class: 'charges' },
      el('summary', {}, `${a.accountId}: ${fmt(a.charges)} charge${a.charges === 1 ? '' : 's'}`),
      table({
        caption: `Charges of ${a.accountId}`,
        head: ['Request', 'Time', '#Billed originally', '#Billed now', '#Corrected', '#Difference', 'Earlier corrections'],
        rows: a.items.map((c) =>
          el(
            'tr',
            {},
            el('th', { scope: 'row' }, el('code', {}, c.requestId)),
            el('td', {}, whenExact(c.at)),
            num(c.billedOriginally),
            num(c.billedNow),
            num(c.corrected),
            el('td', { class: 'num' }, signed(c.difference)),
            el(
              'td',
              { class: 'models' },
              c.adjustments.length ? c.adjustments.map((x) => `${x.correctionId.slice(0, 8)}… ${signed(x.delta)}`).join(', ') : '—',
            ),
          ),
        ),
      }),
    ),
  );
}

function reportSummary(report) {
  const componentText =
    report.component === 'image_tokens'
      ? `${fmt(report.value)} tokens per image`
      : `${COMPONENTS[report.component]?.label ?? report.component} ${report.value / 1000}`;
  return el(
    'dl',
    { class: 'facts inline' },
    el('dt', {}, 'Correction id'),
    el('dd', {}, el('code', { 'data-field': 'correction_id' }, report.correctionId)),
    el('dt', {}, 'Model'),
    el('dd', {}, report.modelId),
    el('dt', {}, 'Corrected to'),
    el('dd', {}, componentText),
    el('dt', {}, 'Window'),
    el('dd', {}, `${whenExact(report.from)} to ${whenExact(report.to)}`),
    el('dt', {}, 'Accounts, charges'),
    el('dd', {}, `${fmt(report.accounts.length)}, ${fmt(report.totals.charges)}`),
    el('dt', {}, 'Total difference'),
    el('dd', { 'data-field': 'total_difference', 'data-value': report.totals.difference }, `${signed(report.totals.difference)} tokens`),
  );
}

function correctionsView(alive) {
  const problem = problemRegion();
  const model = el('select', { name: 'model', required: true }, el('option', { value: '' }, 'Loading the models…'));
  const component = el('select', { name: 'component' }, ...Object.entries(COMPONENTS).map(([k, c]) => el('option', { value: k }, c.label)));
  const value = input({ type: 'number', name: 'value', min: 0, step: 0.001, inputmode: 'decimal', required: true });
  const valueField = field('Multiplier', value, COMPONENTS.multiplier.help);
  const now = new Date();
  const from = input({
    type: 'datetime-local',
    name: 'from',
    id: nextId('from'),
    step: 1,
    required: true,
    value: isoToLocal(new Date(now.getTime() - 86_400_000)),
  });
  const to = input({ type: 'datetime-local', name: 'to', id: nextId('to'), step: 1, value: isoToLocal(new Date(Math.floor(now.getTime() / 1000) * 1000)) });
  const fromUtc = el('output', { for: from.id, class: 'utc', id: `${from.id}-utc` });
  const toUtc = el('output', { for: to.id, class: 'utc', id: `${to.id}-utc` });
  from.setAttribute('aria-describedby', fromUtc.id);
  to.setAttribute('aria-describedby', toUtc.id);
  const reason = input({ type: 'text', name: 'reason', maxlength: 500 });
  const alsoNow = el('input', { type: 'checkbox', name: 'also_from_now', id: nextId('now') });
  const preview = el('button', { type: 'submit' }, 'Preview (dry run)');
  const formProblem = problemRegion();
  const form = el(
    'form',
    { class: 'form-grid', novalidate: true },
    field('Model', model),
    field('What to correct', component),
    valueField,
    el('div', { class: 'field' }, el('label', { for: from.id }, 'From (your local time, included)'), from, fromUtc),
    el('div', { class: 'field' }, el('label', { for: to.id }, 'To (your local time, excluded; in the past)'), to, toUtc),
    field('Reason for the correction', reason, 'Recorded with the correction.', { optional: true, wide: true }),
    el(
      'div',
      { class: 'field check-field' },
      el('label', { class: 'check', for: alsoNow.id }, alsoNow, ' Also price the model at this value from now on'),
      el('p', { class: 'help' }, 'Then “To” may be left empty: the window ends when the correction is applied. Not for tokens per image.'),
    ),
    el('div', { class: 'form-actions' }, preview),
  );

  // The dry run's summary is announced; the report itself is read like the rest of the page.
  const output = el('div', { class: 'correction-output' });
  const applied = el('div', { class: 'applied-output' });
  let previewed = null; // { terms, report }

  const showUtc = () => {
    fromUtc.textContent = localToIso(from.value) ? `= ${localToIso(from.value)}` : '';
    toUtc.textContent = localToIso(to.value) ? `= ${localToIso(to.value)}` : alsoNow.checked ? 'empty: until the correction is applied' : '';
  };
  const showComponent = () => {
    const c = COMPONENTS[component.value];
    valueField.querySelector('label').textContent = c.label;
    valueField.querySelector('.help').textContent = c.help;
    value.step = String(c.step);
  };
  form.addEventListener('input', () => {
    showUtc();
    if (previewed) markStale();
  });
  component.addEventListener('change', showComponent);
  showUtc();

  function terms() {
    const body = { model: model.value, component: component.value, reason: reason.value.trim() };
    if (!model.value) throw fail('Choose the model.', 'model');
    const v = Number(value.value);
    if (value.value.trim() === '' || !Number.isFinite(v)) throw fail(`Enter the right ${COMPONENTS[component.value].label.toLowerCase()}.`, 'value');
    body.value = v;
    body.from = localToIso(from.value);
    if (!body.from) throw fail('Choose when the window starts.', 'from');
    const end = localToIso(to.value);
    if (end) body.to = end;
    else if (!alsoNow.checked) throw fail('Choose when the window ends.', 'to');
    if (alsoNow.checked) body.also_from_now = true;
    return body;
  }

  let applyButton = null;
  function markStale() {
    if (!applyButton || applyButton.disabled) return;
    applyButton.disabled = true;
    output.querySelector('.stale-note')?.removeAttribute('hidden');
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    applied.replaceChildren();
    const res = await busy(
      preview,
      formProblem,
      async () => {
        const body = terms();
        const report = await admin('corrections', { method: 'POST', body: { ...body, dry_run: true } });
        return { body, report };
      },
      form,
    );
    if (!res) return;
    previewed = res;
    renderPreview(res.report);
    const t = res.report.totals;
    announce(
      `Dry run: ${fmt(t.charges)} charges of ${fmt(res.report.accounts.length)} accounts; billed now ${fmt(t.billedNow)}, corrected ${fmt(t.corrected)}, difference ${signed(t.difference)}. Nothing was written.`,
    );
  });

  let chartHost = null;
  let chartReport = null;
  let chartWidth = 0;
  function drawChart() {
    if (!chartHost || !chartReport) return;
    chartWidth = Math.floor(chartHost.clientWidth);
    chartHost.replaceChildren(reconciliationChart(chartReport, chartWidth, 'recon-chart'));
  }
  // Redrawn when its width changes (a rotated phone, a resized window), while this view is shown.
  const resize = new ResizeObserver(() => {
    if (!alive()) {
      resize.disconnect();
      return;
    }
    if (chartHost && Math.floor(chartHost.clientWidth) !== chartWidth) drawChart();
  });

  function renderPreview(report) {
    const empty = report.accounts.length === 0;
    applyButton = el('button', { type: 'button', class: 'danger', disabled: empty }, 'Apply correction');
    const stale = el('p', { class: 'help warn stale-note', hidden: true }, 'The form changed after this dry run: run the dry run again before applying.');
    const applyProblem = problemRegion();
    applyButton.addEventListener('click', () => apply(report, applyProblem));
    if (chartHost) resize.unobserve(chartHost);
    chartHost = el('div', { class: 'chart-host' });
    chartReport = report;
    output.replaceChildren(
      el(
        'section',
        { class: 'card', 'aria-labelledby': 'dry-run-heading', id: 'dry-run' },
        el('h2', { id: 'dry-run-heading' }, 'Dry run: what this correction would change'),
        el(
          'p',
          { class: 'help' },
          'Nothing has been written. Billed now is each charge plus every adjustment already applied to it; corrected is what it becomes.',
        ),
        reportSummary(report),
        el(
          'figure',
          { class: 'recon-figure' },
          chartHost,
          el(
            'figcaption',
            {},
            el('span', { class: 'legend-item' }, el('span', { class: 'legend-swatch billed-now', 'aria-hidden': 'true' }), 'Billed now'),
            el('span', { class: 'legend-item' }, el('span', { class: 'legend-swatch corrected', 'aria-hidden': 'true' }), 'Corrected'),
            el('span', { class: 'legend-note' }, 'The table below holds the same numbers.'),
          ),
        ),
        reconciliationTable(report, 'dry-run'),
        ...chargeDetails(report),
        el('div', { class: 'row apply-row' }, applyButton, empty ? el('span', { class: 'muted' }, 'Nothing to apply: no charge in this window.') : null),
        stale,
        applyProblem,
      ),
    );
    drawChart();
    resize.observe(chartHost);
  }

  async function apply(report, applyProblem) {
    if (!previewed) return;
    const t = report.totals;
    const answer = await confirmAction({
      title: 'Apply this correction?',
      body: [
        `${report.modelId}: ${fmt(t.charges)} charges of ${fmt(report.accounts.length)} accounts move from ${fmt(t.billedNow)} to ${fmt(t.corrected)} tokens (${signed(t.difference)}).`,
        'This appends the correction and one adjustment per charge to the ledger; charges are never edited. It can be undone only by another correction.',
      ],
      confirmLabel: 'Apply correction',
      danger: true,
    });
    if (!answer.confirmed) {
      announce('The correction was not applied.');
      return;
    }
    const res = await busy(applyButton, applyProblem, () => admin('corrections', { method: 'POST', body: { ...previewed.body, dry_run: false } }));
    if (!res) return;
    applyButton.disabled = true;
    previewed = null;
    const text = `Applied correction ${res.correctionId.slice(0, 8)}…: ${fmt(res.appended)} adjustment${res.appended === 1 ? '' : 's'} appended, ${fmt(res.already_applied)} already applied.`;
    applied.replaceChildren(
      el(
        'section',
        { class: 'card applied', 'aria-labelledby': 'applied-heading', id: 'applied', tabindex: -1 },
        el('h2', { id: 'applied-heading' }, 'Applied'),
        el('div', { class: 'result-box', role: 'status' }, el('p', {}, text)),
        el('p', { class: 'help' }, 'Billed now is as it was before this correction; each difference is the adjustment appended.'),
        el(
          'dl',
          { class: 'facts inline' },
          el('dt', {}, 'Adjustments appended'),
          el('dd', { 'data-field': 'appended', 'data-value': res.appended }, fmt(res.appended)),
          el('dt', {}, 'Already applied'),
          el('dd', { 'data-field': 'already_applied', 'data-value': res.already_applied }, fmt(res.already_applied)),
          el('dt', {}, 'Passes'),
          el('dd', {}, fmt(res.passes)),
        ),
        reportSummary(res),
        reconciliationTable(res, 'applied'),
      ),
    );
    applied.querySelector('#applied')?.focus();
  }

  view.append(
    ...heading(
      'Corrections',
      'Re-price what a model was billed in a window: a dry run shows the reconciliation per account; applying appends adjustments, never edits a charge.',
    ),
    problem,
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'correction-form-heading' },
      el('h2', { id: 'correction-form-heading' }, 'Correction'),
      form,
      formProblem,
    ),
    output,
    applied,
  );

  admin('models')
    .then((m) => {
      if (!alive()) return;
      model.replaceChildren(
        el('option', { value: '' }, 'Choose a model'),
        ...m.data.map((x) => el('option', { value: x.model_id }, `${x.model_id} (now ×${milli(x.multiplier_milli)})`)),
      );
    })
    .catch((err) => {
      if (alive()) showProblem(problem, err);
    });
}

// ---- verify -----------------------------------------------------------------------------------

/** The last verify run, kept while the operator looks at other sections. */
const verifyRun = { running: null, startedAt: 0, result: null, error: null, took: 0, progress: null, update: null };

const VERIFY_PHASES = { chains: 'hash chains', 'read models': 'read models' };

/**
 * POST /admin/v1/verify with its progress: NDJSON lines {object: "verification.progress", phase,
 * done, total}, then the result ({object: "verification", …}) or, if it failed once the answer
 * had begun, {object: "error", status, error}. Calls onProgress for each progress line.
 */
async function verifyWithProgress(onProgress) {
  const res = await admin('verify', { method: 'POST', raw: true, accept: 'application/x-ndjson' });
  // A gateway that answers one JSON body (no progress) is read as such.
  if (!/^application\/x-ndjson/i.test(res.headers.get('content-type') ?? '') || !res.body) return res.json();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let last = null;
  const take = (text) => {
    if (!text.trim()) return;
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      throw new AdminProblem(502, { message: 'The gateway sent a line of its verification that is not JSON.', code: 'bad_stream' });
    }
    if (msg?.object === 'verification.progress') onProgress(msg);
    else last = msg;
  };
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch {
      throw new AdminProblem(0, { message: 'The connection to the gateway was cut while it verified.', code: 'network_error' });
    }
    if (chunk.done) break;
    buffered += decoder.decode(chunk.value, { stream: true });
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      take(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  }
  take(buffered + decoder.decode());
  if (last?.object === 'verification') return last;
  // The HTTP status was 200, sent before the failure: the line carries the one it would have had.
  if (last?.object === 'error') throw new AdminProblem(Number(last.status) || 500, last.error ?? {});
  throw new AdminProblem(0, { message: 'The verification ended before its result arrived (the connection was cut).', code: 'network_error' });
}

function verifyView(alive) {
  const run = el('button', { type: 'button', id: 'verify-run' }, 'Run verify');
  const bar = el('progress', { id: 'verify-bar', 'aria-describedby': 'verify-status verify-elapsed' });
  const status = el('span', { id: 'verify-status' });
  const elapsed = el('span', { id: 'verify-elapsed', class: 'muted' });
  const progress = el('div', { class: 'verify-progress', hidden: true }, el('label', { for: 'verify-bar' }, 'Verifying the ledger…'), bar, status, elapsed);
  const result = el('div', { class: 'verify-result', role: 'status', 'aria-live': 'polite' });
  const problem = problemRegion();
  const section = el(
    'section',
    { class: 'card', 'aria-labelledby': 'verify-heading', 'aria-busy': 'false' },
    el('h2', { id: 'verify-heading' }, 'Audit'),
    el(
      'p',
      {},
      'Walks every event in order and recomputes each stream’s SHA-256 hash chain, then rebuilds every read model from the events into a scratch schema and compares it row by row with the live one. It reads only; it may take a while on a long ledger.',
    ),
    el('div', { class: 'row' }, run),
    progress,
    result,
    problem,
  );
  let timer = null;

  /** The bar and its text: indeterminate until the first progress line, then N of M events. */
  function renderProgress() {
    const p = verifyRun.progress;
    if (!p) {
      bar.removeAttribute('value');
      bar.removeAttribute('max');
      bar.removeAttribute('aria-valuetext');
      status.textContent = 'Starting…';
      return;
    }
    const max = Math.max(1, p.total);
    bar.max = max;
    bar.value = Math.min(p.done, max);
    const text = `Checked ${fmt(p.done)} of ${fmt(p.total)} events (${VERIFY_PHASES[p.phase] ?? p.phase})`;
    status.textContent = text;
    bar.setAttribute('aria-valuetext', text);
  }

  function render() {
    if (!alive()) {
      clearInterval(timer);
      return;
    }
    const running = !!verifyRun.running;
    run.disabled = running;
    progress.hidden = !running;
    section.setAttribute('aria-busy', String(running));
    if (running) {
      renderProgress();
      elapsed.textContent = `${Math.floor((Date.now() - verifyRun.startedAt) / 1000)} s elapsed`;
      return;
    }
    clearInterval(timer);
    timer = null;
    if (verifyRun.error) {
      showProblem(problem, verifyRun.error);
      result.replaceChildren();
      return;
    }
    problem.replaceChildren();
    const r = verifyRun.result;
    if (!r) {
      result.replaceChildren();
      return;
    }
    const items = [
      el(
        'p',
        { class: `verdict ${r.ok ? 'ok' : 'bad'}`, id: 'verify-verdict', 'data-ok': String(r.ok) },
        r.ok ? '✓ The ledger is intact' : '✗ The ledger did not verify',
      ),
      el(
        'dl',
        { class: 'facts inline' },
        el('dt', {}, 'Events checked'),
        el('dd', { 'data-field': 'events', 'data-value': r.events }, fmt(r.events)),
        el('dt', {}, 'Streams'),
        el('dd', { 'data-field': 'streams', 'data-value': r.streams }, fmt(r.streams)),
        el('dt', {}, 'Hash-chain problems'),
        el('dd', { 'data-field': 'chain_problems', 'data-value': r.chainProblems.length }, fmt(r.chainProblems.length)),
        el('dt', {}, 'Read-model differences'),
        el('dd', { 'data-field': 'read_model_differences', 'data-value': r.readModelDifferences.length }, fmt(r.readModelDifferences.length)),
        el('dt', {}, 'Took'),
        el('dd', {}, `${(verifyRun.took / 1000).toFixed(1)} s`),
      ),
    ];
    if (r.chainProblems.length) {
      items.push(
        table({
          caption: 'Hash-chain problems',
          captionVisible: true,
          head: ['Stream', '#Revision', '#Position', 'Problem'],
          rows: r.chainProblems
            .slice(0, 50)
            .map((p) => el('tr', {}, el('th', { scope: 'row' }, p.stream), num(p.revision), num(p.position), el('td', {}, p.problem))),
        }),
      );
    }
    if (r.readModelDifferences.length) {
      items.push(
        table({
          caption: 'Read-model differences',
          captionVisible: true,
          head: ['Table', 'Row'],
          rows: r.readModelDifferences.slice(0, 50).map((d) => el('tr', {}, el('th', { scope: 'row' }, d.table), el('td', {}, d.key))),
        }),
      );
    }
    result.replaceChildren(...items);
  }

  run.addEventListener('click', () => {
    verifyRun.startedAt = Date.now();
    verifyRun.result = null;
    verifyRun.error = null;
    verifyRun.progress = null;
    announce('Verifying the ledger. This may take a while.');
    verifyRun.running = verifyWithProgress((p) => {
      const phaseBegins = verifyRun.progress?.phase !== p.phase;
      verifyRun.progress = { phase: p.phase, done: Number(p.done) || 0, total: Number(p.total) || 0 };
      // The bar is not a live region (it changes several times a second); a new phase is said once.
      if (phaseBegins && p.phase === 'read models') announce('Hash chains checked. Now comparing the read models with a rebuild.');
      verifyRun.update?.();
    })
      // The result region (a live region) reads the outcome out.
      .then((r) => {
        verifyRun.result = r;
      })
      .catch((err) => {
        verifyRun.error = err;
      })
      .finally(() => {
        verifyRun.took = Date.now() - verifyRun.startedAt;
        verifyRun.running = null;
        render();
      });
    timer = setInterval(render, 500);
    render();
  });

  view.append(...heading('Verify the ledger', 'Checks that no event was edited and that every read model equals a rebuild from the events.'), section);
  // Progress lines redraw the view on screen (this one, until another section is opened).
  verifyRun.update = render;
  if (verifyRun.running) {
    timer = setInterval(render, 500);
    verifyRun.running.finally(() => render());
  }
  render();
}

// ---- start ------------------------------------------------------------------------------------

route();
