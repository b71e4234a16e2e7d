// The usage page: billed tokens per UTC day split by model (stacked SVG bars), tables with
// totals, and the subscription card. Data from GET /v1/usage?daily=true&range=Nd&view=corrected (billed net of
// corrections) and /v1/subscription. "Download CSV" saves GET /v1/usage?group_by=key&format=csv
// for the selected range (fetched with the saved key in the Authorization header, then offered
// as a file from a Blob).
import { api, apiJson, compact, el, fmt, getKey, getPref, renderQuota, renderQuotaError, setPref, setupKeyBar, showProblem, svg } from './common.js';

const $ = (id) => document.getElementById(id);
const quota = $('quota');
const problem = $('problem');
const chartWrap = $('chart');
const chartTip = $('chart-tip');
const legend = $('legend');
const stats = $('stats');
const subBox = $('subscription');

const RANGES = [7, 30, 90];
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#59a14f', '#b07aa1', '#edc948', '#76b7b2', '#ff9da7', '#9c755f', '#8cd17d', '#d37295', '#bab0ac'];
const DAY_FMT = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
const LONG_FMT = new Intl.DateTimeFormat('en-US', { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });
const dayLabel = (iso) => DAY_FMT.format(new Date(`${iso}T00:00:00Z`));
const longDay = (iso) => LONG_FMT.format(new Date(`${iso}T00:00:00Z`));

let seq = 0;
let current = null; // { usage, colors, order }
let selected = -1;

setupKeyBar({
  onChange: () => {
    problem.replaceChildren();
    load();
  },
});

// ---- range ------------------------------------------------------------------------------------

function initialRange() {
  const fromUrl = /^(\d+)d$/.exec(new URLSearchParams(location.search).get('range') ?? '')?.[1];
  const wanted = Number(fromUrl ?? getPref('range', '30'));
  return RANGES.includes(wanted) ? wanted : 30;
}
const rangeDays = () => Number(document.querySelector('input[name="range"]:checked')?.value ?? 30);
$(`range-${initialRange()}`).checked = true;
for (const r of document.querySelectorAll('input[name="range"]')) {
  r.addEventListener('change', () => {
    setPref('range', String(rangeDays()));
    const url = new URL(location.href);
    url.searchParams.set('range', `${rangeDays()}d`);
    history.replaceState(null, '', url);
    load();
  });
}
$('refresh').addEventListener('click', () => load());

// ---- CSV download -----------------------------------------------------------------------------

const csvButton = $('download-csv');
const csvStatus = $('csv-status');
/** The error box of the last failed download, removed once a download works. */
let csvProblem = null;

/** The file name the gateway suggests (Content-Disposition), else one made from the range. */
function csvFileName(disposition, days) {
  const name = (/filename="([^"]+)"/i.exec(disposition ?? '')?.[1] ?? '').replace(/[^\w.-]/g, '_');
  return /^\w[\w.-]*\.csv$/.test(name) ? name : `usage-${days}d-by-key.csv`;
}

csvButton.addEventListener('click', async () => {
  const days = rangeDays();
  csvButton.disabled = true;
  csvButton.setAttribute('aria-busy', 'true');
  csvStatus.textContent = 'Preparing the CSV…';
  try {
    // The key goes in the Authorization header (api() adds it), never in the URL.
    const res = await api(`usage?group_by=key&format=csv&range=${days}d`);
    const text = await res.text();
    const name = csvFileName(res.headers.get('content-disposition'), days);
    const href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    const a = el('a', { href, download: name, class: 'visually-hidden' }, name);
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 60_000);
    const rows = Math.max(0, text.split('\n').filter((l) => l.trim()).length - 1);
    csvStatus.textContent = `Downloaded ${name} (${fmt(rows)} row${rows === 1 ? '' : 's'}, the last ${days} days).`;
    if (csvProblem?.isConnected) problem.replaceChildren();
  } catch (err) {
    csvStatus.textContent = '';
    csvProblem = showProblem(problem, err, { onKey: () => $('key-change').click() });
    csvProblem.querySelector('.problem-title')?.prepend('The CSV could not be downloaded: ');
  } finally {
    csvButton.disabled = false;
    csvButton.removeAttribute('aria-busy');
  }
});

// ---- loading ----------------------------------------------------------------------------------

async function load() {
  const mine = ++seq;
  const days = rangeDays();
  if (!getKey()) {
    renderQuotaError(quota, null);
    current = null;
    chartWrap.replaceChildren(el('p', { class: 'loading' }, 'Enter your API key to see your usage.'));
    for (const node of [legend, stats, $('models-table'), $('days-table')]) node.replaceChildren();
    chartTip.textContent = '';
    $('sub-body').replaceWith(el('p', { class: 'loading', id: 'sub-body' }, 'Enter your API key to see your plan.'));
    return;
  }
  chartWrap.setAttribute('aria-busy', 'true');
  subBox.setAttribute('aria-busy', 'true');
  const [usageResult, subResult] = await Promise.allSettled([
    apiJson(`usage?daily=true&range=${days}d&view=corrected`), // net of corrections: what is billed now
    apiJson('subscription'),
  ]);
  if (mine !== seq) return;
  chartWrap.setAttribute('aria-busy', 'false');
  subBox.setAttribute('aria-busy', 'false');
  problem.replaceChildren();
  if (subResult.status === 'fulfilled') {
    renderQuota(quota, subResult.value);
    renderSubscription(subResult.value);
  } else {
    renderQuotaError(quota, subResult.reason);
    $('sub-body').replaceWith(el('p', { class: 'loading', id: 'sub-body' }, 'The subscription could not be loaded.'));
  }
  if (usageResult.status === 'fulfilled') {
    renderUsage(usageResult.value);
  } else {
    current = null;
    chartWrap.replaceChildren(el('p', { class: 'loading' }, 'The usage could not be loaded.'));
    for (const node of [legend, stats, $('models-table'), $('days-table')]) node.replaceChildren();
  }
  const failure = usageResult.status === 'rejected' ? usageResult.reason : subResult.status === 'rejected' ? subResult.reason : null;
  if (failure) showProblem(problem, failure, { onKey: () => $('key-change').click() });
}

// ---- subscription card ------------------------------------------------------------------------

function relativeDays(iso) {
  const days = Math.round((Date.parse(iso) - Date.now()) / 86_400_000);
  if (days === 0) return 'today';
  return days > 0 ? `in ${days} day${days === 1 ? '' : 's'}` : `${-days} day${days === -1 ? '' : 's'} ago`;
}
const dateOf = (iso) => new Date(iso).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric' });

function renderSubscription(sub) {
  const active = sub.status === 'active';
  const total = Number(sub.quota?.total ?? 0);
  const left = Number(sub.quota?.remaining ?? 0);
  const pct = total > 0 ? Math.max(0, Math.min(100, (left / total) * 100)) : 0;
  const rows = [
    [
      'Plan',
      el(
        'span',
        {},
        sub.plan ? sub.plan.name : 'No plan',
        ' ',
        el('span', { class: `status-pill ${active ? 'active' : 'expired'}` }, active ? 'Active' : 'Expired'),
      ),
    ],
    ['Main quota left', `${fmt(left)} of ${fmt(total)}`],
    ['Main quota used', fmt(sub.quota?.used)],
  ];
  if (Number(sub.quota?.reserved) > 0) rows.push(['Held by calls in progress', fmt(sub.quota.reserved)]);
  if (Number(sub.extra_tokens?.granted) > 0) rows.push(['Extra tokens left', `${fmt(sub.extra_tokens.remaining)} of ${fmt(sub.extra_tokens.granted)}`]);
  if (sub.starts_at) rows.push(['Started', dateOf(sub.starts_at)]);
  rows.push(['Expires', sub.expires_at ? `${dateOf(sub.expires_at)} (${relativeDays(sub.expires_at)})` : '—']);
  if (sub.rate_limit?.requests_per_minute) rows.push(['Call rate', `${fmt(sub.rate_limit.requests_per_minute)} requests/min`]);
  const body = el(
    'div',
    { id: 'sub-body' },
    el('p', { class: 'muted' }, 'Remaining tokens'),
    el('p', { class: 'big', id: 'sub-remaining' }, fmt(sub.remaining_tokens)),
    el(
      'div',
      { class: 'bar', 'aria-hidden': 'true' },
      svg('svg', { preserveAspectRatio: 'none' }, svg('rect', { x: 0, y: 0, height: '100%', width: `${pct}%`, fill: pct < 10 ? '#e15759' : '#4e79a7' })),
    ),
    el('dl', {}, ...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
  );
  if (!active) body.append(el('p', { class: 'help warn' }, 'The main plan has expired: only extra tokens can be used. Renew the plan to continue.'));
  else if (sub.remaining_tokens <= 0) body.append(el('p', { class: 'help warn' }, 'The quota is used up: renew or upgrade the plan, or add extra tokens.'));
  $('sub-body').replaceWith(body);
}

// ---- usage: stats, chart, tables --------------------------------------------------------------

function renderUsage(usage) {
  const order = [...usage.models].sort((a, b) => b.billed - a.billed || a.model.localeCompare(b.model)).map((m) => m.model);
  const colors = new Map(order.map((m, i) => [m, PALETTE[i % PALETTE.length]]));
  current = { usage, colors, order };
  const days = usage.daily ?? [];
  const active = days.filter((d) => d.requests > 0 || d.billed !== 0);
  const peak = days.reduce((best, d) => (d.billed > (best?.billed ?? 0) ? d : best), null);
  stats.replaceChildren(
    stat('Billed tokens', fmt(usage.totals.billed), 'stat-billed'),
    stat('Requests', fmt(usage.totals.requests)),
    stat('Images', fmt(usage.totals.images)),
    stat('Per active day', active.length ? fmt(Math.round(usage.totals.billed / active.length)) : '0'),
    stat('Busiest day', peak ? dayLabel(peak.date) : '—', undefined, peak ? `${fmt(peak.billed)} tokens` : null),
  );
  legend.replaceChildren(...order.map((m) => el('li', {}, swatch(colors.get(m)), m)));
  selected = -1;
  chartTip.textContent = '';
  drawChart();
  renderModelTable(usage, colors, order);
  renderDayTable(usage, active, colors, order);
}

function stat(label, value, id, sub = null) {
  return el('div', { class: 'stat' }, el('p', { class: 'label' }, label), el('p', { class: 'value', id }, value), sub ? el('p', { class: 'sub' }, sub) : null);
}

function swatch(color) {
  return svg('svg', { width: 12, height: 12, viewBox: '0 0 12 12', 'aria-hidden': 'true' }, svg('rect', { width: 12, height: 12, rx: 3, fill: color }));
}

/** A round axis maximum and tick step for values up to `max`. */
function niceScale(max, ticks = 4) {
  if (!(max > 0)) return { top: 1, step: 1 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
  return { top: Math.ceil(max / step) * step, step };
}

function dayText(d) {
  const parts = d.models
    .filter((m) => m.billed !== 0)
    .sort((a, b) => b.billed - a.billed)
    .map((m) => `${m.model} ${fmt(m.billed)}`);
  return `${longDay(d.date)}: ${fmt(d.billed)} billed tokens${parts.length ? ` — ${parts.join(', ')}` : ''}`;
}

function drawChart() {
  if (!current) return;
  const { usage, colors, order } = current;
  const days = usage.daily ?? [];
  const today = usage.range?.end;
  const W = Math.max(280, Math.floor(chartWrap.clientWidth || 640));
  const H = W < 520 ? 220 : 280;
  const m = { top: 12, right: 10, bottom: 28, left: W < 520 ? 40 : 52 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const max = Math.max(0, ...days.map((d) => d.billed));
  const { top, step } = niceScale(max);
  const y = (v) => m.top + ph - (Math.max(0, v) / top) * ph;
  const band = pw / Math.max(1, days.length);
  const barW = Math.max(2, Math.min(44, band * 0.72));
  const total = usage.totals.billed;

  const title = svg('title', { id: 'chart-title' }, `Billed tokens per day over the last ${days.length} days`);
  const desc = svg(
    'desc',
    { id: 'chart-desc' },
    total > 0
      ? `Total ${fmt(total)} billed tokens. Use the left and right arrow keys to read each day; the tables below hold the same numbers.`
      : 'No usage in this range.',
  );
  const root = svg(
    'svg',
    { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', tabindex: 0, 'aria-labelledby': 'chart-title chart-desc', 'data-max': top },
    title,
    desc,
  );

  for (let v = 0; v <= top + step / 2; v += step) {
    const yy = Math.round(y(v)) + 0.5;
    root.append(svg('line', { class: v === 0 ? 'axis' : 'grid', x1: m.left, x2: W - m.right, y1: yy, y2: yy }));
    root.append(svg('text', { x: m.left - 6, y: yy + 4, 'text-anchor': 'end' }, max > 0 ? compact(v) : v === 0 ? '0' : ''));
  }

  const every = Math.max(1, Math.ceil(days.length / Math.max(2, Math.floor(pw / 58))));
  days.forEach((d, i) => {
    const x = m.left + i * band + (band - barW) / 2;
    const g = svg('g', { class: `day${d.date === today ? ' today' : ''}`, 'data-date': d.date, 'data-billed': d.billed, 'data-index': i });
    g.append(svg('rect', { class: 'hit', x: m.left + i * band, y: m.top, width: band, height: ph }));
    let base = 0;
    const segs = [...d.models].filter((s) => s.billed > 0).sort((a, b) => order.indexOf(a.model) - order.indexOf(b.model));
    for (const s of segs) {
      const y0 = y(base);
      base += s.billed;
      const h = Math.max(1.5, y0 - y(base));
      g.append(
        svg(
          'rect',
          { class: 'seg', x, y: y0 - h, width: barW, height: h, fill: colors.get(s.model) ?? '#888', 'data-model': s.model },
          svg('title', {}, `${d.date} · ${s.model}: ${fmt(s.billed)} billed tokens`),
        ),
      );
    }
    if ((days.length - 1 - i) % every === 0) {
      g.append(
        svg(
          'text',
          { class: d.date === today ? 'today-label' : null, x: m.left + i * band + band / 2, y: H - 8, 'text-anchor': 'middle' },
          d.date === today && days.length <= 31 ? 'Today' : dayLabel(d.date),
        ),
      );
    }
    g.addEventListener('mouseenter', () => select(i));
    root.append(g);
  });
  if (max === 0) root.append(svg('text', { class: 'empty-note', x: m.left + pw / 2, y: m.top + ph / 2, 'text-anchor': 'middle' }, 'No usage in this range'));
  root.addEventListener('keydown', (ev) => {
    const last = days.length - 1;
    const next = { ArrowLeft: selected < 0 ? last : selected - 1, ArrowRight: selected < 0 ? last : selected + 1, Home: 0, End: last }[ev.key];
    if (next === undefined) return;
    ev.preventDefault();
    select(Math.max(0, Math.min(last, next)));
  });
  root.addEventListener('mouseleave', () => {
    if (document.activeElement !== root) {
      select(-1);
    }
  });
  chartWrap.replaceChildren(root);
  if (selected >= 0) select(selected);
}

function select(i) {
  selected = i;
  const root = chartWrap.querySelector('svg.chart');
  if (!root || !current) return;
  for (const g of root.querySelectorAll('g.day')) g.classList.toggle('selected', Number(g.dataset.index) === i);
  const d = current.usage.daily?.[i];
  chartTip.textContent = d ? dayText(d) : '';
}

function table(caption, head, rows, foot) {
  return el(
    'table',
    {},
    el('caption', { class: 'visually-hidden' }, caption),
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col', class: h === 'Models' ? 'models' : null }, h)))),
    el('tbody', {}, ...rows),
    foot ? el('tfoot', {}, foot) : null,
  );
}

function renderModelTable(usage, colors, order) {
  const byModel = new Map(usage.models.map((m) => [m.model, m]));
  const total = usage.totals.billed;
  const rows = order.map((id) => {
    const m = byModel.get(id);
    return el(
      'tr',
      {},
      el('th', { scope: 'row' }, el('span', { class: 'swatch-cell' }, swatch(colors.get(id)), id)),
      el('td', {}, fmt(m.requests)),
      el('td', {}, fmt(m.prompt_tokens)),
      el('td', {}, fmt(m.completion_tokens)),
      el('td', {}, fmt(m.images)),
      el('td', {}, fmt(m.billed)),
      el('td', {}, total > 0 ? `${((m.billed / total) * 100).toFixed(1)}%` : '—'),
    );
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 7 }, 'No usage in this range.')));
  const t = usage.totals;
  const foot = el(
    'tr',
    {},
    el('th', { scope: 'row' }, 'Total'),
    el('td', {}, fmt(t.requests)),
    el('td', {}, fmt(t.prompt_tokens)),
    el('td', {}, fmt(t.completion_tokens)),
    el('td', {}, fmt(t.images)),
    el('td', { id: 'total-billed', 'data-value': t.billed }, fmt(t.billed)),
    el('td', {}, total > 0 ? '100%' : '—'),
  );
  $('models-table').replaceChildren(
    table(
      `Usage by model over the last ${usage.range.days} days`,
      ['Model', 'Requests', 'Prompt tokens', 'Completion tokens', 'Images', 'Billed tokens', 'Share'],
      rows,
      foot,
    ),
  );
}

function renderDayTable(usage, active, colors, order) {
  const rows = [...active].reverse().map((d) =>
    el(
      'tr',
      { 'data-date': d.date },
      el('th', { scope: 'row' }, d.date === usage.range.end ? `${d.date} (today)` : d.date),
      el('td', {}, fmt(d.requests)),
      el('td', {}, fmt(d.tokens)),
      el('td', {}, fmt(d.images)),
      el('td', {}, fmt(d.billed)),
      el(
        'td',
        { class: 'models' },
        ...[...d.models]
          .filter((m) => m.billed !== 0)
          .sort((a, b) => order.indexOf(a.model) - order.indexOf(b.model))
          .flatMap((m, i) => [i ? ' · ' : null, el('span', { class: 'swatch-cell' }, swatch(colors.get(m.model)), `${m.model} ${fmt(m.billed)}`)]),
      ),
    ),
  );
  const quiet = (usage.daily?.length ?? 0) - active.length;
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 6 }, 'No usage in this range.')));
  const t = usage.totals;
  const foot = el(
    'tr',
    {},
    el('th', { scope: 'row' }, `Total, ${usage.range.days} days`),
    el('td', {}, fmt(t.requests)),
    el('td', {}, fmt(t.tokens)),
    el('td', {}, fmt(t.images)),
    el('td', { id: 'days-total-billed' }, fmt(t.billed)),
    el('td', { class: 'models' }, quiet > 0 ? `${quiet} day${quiet === 1 ? '' : 's'} without usage not listed` : ''),
  );
  $('days-table').replaceChildren(
    table(`Usage by day over the last ${usage.range.days} days`, ['Date (UTC)', 'Requests', 'Tokens', 'Images', 'Billed tokens', 'Models'], rows, foot),
  );
}

let lastWidth = 0;
new ResizeObserver(() => {
  const w = Math.floor(chartWrap.clientWidth);
  if (w !== lastWidth) {
    lastWidth = w;
    drawChart();
  }
}).observe(chartWrap);

load();
