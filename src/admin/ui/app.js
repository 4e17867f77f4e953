// Sluice service overview: one row per service, live from the gateway's event stream
// (GET status/events: the chart history once, then the status and a chart point every second),
// and the Request dialog (its examples: snippets.js). Plain JavaScript modules, no build step, no
// framework, nothing from elsewhere.
import { ejectionsText, limitsText, loadsText, poolText, routerText, routingText } from './routing-text.js';
import { MODEL_NAME, NOTES, snippet } from './snippets.js';

/** Chart points kept per service: five minutes at one a second. */
const HISTORY_POINTS = 300;
const STATES = ['cold', 'starting', 'ready', 'draining'];
const REPLICA_ORDER = ['ready', 'starting', 'unreachable', 'draining'];

const table = document.getElementById('services');
const template = document.getElementById('service-template');
const connection = document.getElementById('connection');
const announcer = document.getElementById('announcer');
const emptyNote = document.getElementById('empty');
const poolSection = document.getElementById('pools');
const poolList = document.getElementById('pool-list');
const routerSection = document.getElementById('routers');
const routerList = document.getElementById('router-list');

/** slug → { status, points, view } */
const services = new Map();
/** slug → the router as the last status gave it (for its Request dialog). */
const routers = new Map();
let intervalMs = 1000;

// ── the event stream ───────────────────────────────────────────────────────────────────────

function connect() {
  const source = new EventSource('status/events');
  source.addEventListener('open', () => setConnection('live', 'live'));
  source.addEventListener('error', () => setConnection('reconnecting', 'reconnecting…'));
  source.addEventListener('history', (e) => {
    const data = JSON.parse(e.data);
    intervalMs = data.intervalMs;
    for (const [slug, points] of Object.entries(data.services)) entry(slug).points = points.slice(-HISTORY_POINTS);
  });
  source.addEventListener('status', (e) => {
    const data = JSON.parse(e.data);
    setConnection('live', `live · updated ${new Date(data.generatedAt).toLocaleTimeString()}`);
    const seen = new Set();
    for (const status of data.services) {
      seen.add(status.slug);
      const item = entry(status.slug);
      const point = data.points[status.slug];
      if (point !== undefined && (item.points.length === 0 || item.points[item.points.length - 1].t < point.t)) {
        item.points.push(point);
        if (item.points.length > HISTORY_POINTS) item.points.splice(0, item.points.length - HISTORY_POINTS);
      }
      render(item, status);
    }
    for (const [slug, item] of services) {
      if (!seen.has(slug)) {
        item.view?.root.remove();
        services.delete(slug);
      }
    }
    emptyNote.hidden = data.services.length > 0;
    renderRouters(data.routers ?? []);
    renderPools(data.pools ?? []);
  });
}

/** One item per router, its text from routerText (its models and the state of each). */
function renderRouters(list) {
  routerSection.hidden = list.length === 0;
  routers.clear();
  for (const router of list) routers.set(router.slug, router);
  while (routerList.children.length > list.length) routerList.lastElementChild.remove();
  list.forEach((router, i) => {
    let item = routerList.children[i];
    if (item === undefined) {
      item = document.createElement('li');
      item.className = 'loads router router-line';
      const text = document.createElement('span');
      text.className = 'router-text';
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'request-button';
      button.setAttribute('aria-haspopup', 'dialog');
      button.textContent = 'Request…';
      button.addEventListener('click', () => openDialog(item.dataset.router, button, true));
      item.append(text, button);
      routerList.append(item);
    }
    item.dataset.router = router.slug;
    item.querySelector('button').setAttribute('aria-label', `Request ${router.slug}: base URL, model and examples`);
    set(item.querySelector('.router-text'), routerText(router));
  });
}

/** One item per pool, its text from poolText (who holds which unit, who waits). */
function renderPools(pools) {
  poolSection.hidden = pools.length === 0;
  while (poolList.children.length > pools.length) poolList.lastElementChild.remove();
  pools.forEach((pool, i) => {
    let item = poolList.children[i];
    if (item === undefined) {
      item = document.createElement('li');
      item.className = 'loads pool';
      poolList.append(item);
    }
    item.dataset.pool = pool.name;
    set(item, poolText(pool));
  });
}

function setConnection(state, text) {
  connection.dataset.state = state;
  document.body.dataset.connection = state;
  connection.textContent = text;
}

function entry(slug) {
  let item = services.get(slug);
  if (item === undefined) {
    item = { status: undefined, points: [], view: undefined };
    services.set(slug, item);
  }
  return item;
}

// ── rows ───────────────────────────────────────────────────────────────────────────────────

function createView(status) {
  const root = template.content.firstElementChild.cloneNode(true);
  root.dataset.slug = status.slug;
  const fields = {};
  for (const el of root.querySelectorAll('[data-field]')) fields[el.dataset.field] = el;
  const charts = {};
  for (const el of root.querySelectorAll('[data-chart]')) {
    charts[el.dataset.chart] = { svg: el.querySelector('svg'), max: el.querySelector('.chart-max'), paths: el.querySelectorAll('path') };
  }
  const button = root.querySelector('.request-button');
  button.setAttribute('aria-label', `Request ${status.slug}: base URL and examples`);
  button.addEventListener('click', () => openDialog(status.slug, button, false));
  for (const action of root.querySelectorAll('.load-button')) {
    action.setAttribute('aria-label', `${action.textContent} ${status.slug}`);
    action.addEventListener('click', () => loadOrUnload(status.slug, action.dataset.action, action));
  }
  table.append(root);
  return { root, fields, charts };
}

function render(item, status) {
  const previous = item.status;
  item.status = status;
  item.view ??= createView(status);
  const f = item.view.fields;
  set(f.slug, status.slug);
  set(f.baseUrl, status.baseUrl);
  set(f.kind, status.kind);
  const state = STATES.includes(status.state) ? status.state : 'cold';
  if (set(f.state, state)) {
    f.state.className = `state state-${state}`;
    item.view.root.dataset.state = state;
    if (previous !== undefined) announce(`${status.slug} is ${state}`);
  }
  set(f.replicas, replicasText(status.replicas));
  // Load starts a launched or Kubernetes replica; unload stops launched ones only (docs/operations.md#loading-and-unloading).
  for (const action of item.view.root.querySelectorAll('.load-button')) {
    action.hidden = action.dataset.action === 'load' ? status.kind === 'static' : status.kind !== 'launched';
  }
  // The expected start (the median of the recent ones), as the cell's tooltip: the row's text stays as it is.
  const expected = typeof status.expectedStartMs === 'number' ? `a replica start takes about ${Math.max(1, Math.ceil(status.expectedStartMs / 1000))} s` : '';
  if (f.replicas.title !== expected) f.replicas.title = expected;
  flashIfChanged(f.queued, String(status.queued));
  set(f.inflight, String(status.inflight));
  set(f.rps, formatRate(status.requestsPerSecond));
  set(f.ttfb, formatQuantiles(status.ttfbMs));
  set(f.firstEvent, formatQuantiles(status.stream.firstEventMs));
  set(f.betweenEvents, formatQuantiles(status.stream.betweenEventsMs));
  set(f.errors, status.lastMinute.errors === 0 ? `0 of ${status.lastMinute.requests}` : `${status.lastMinute.errors} of ${status.lastMinute.requests}`);
  f.errors.classList.toggle('has-errors', status.lastMinute.errors > 0);
  set(f.routing, routingText(status.routing));
  set(f.loads, loadsText(status.loads));
  f.loads.hidden = f.loads.textContent === '';
  set(f.ejections, ejectionsText(status.ejections, Date.now()));
  f.ejections.hidden = f.ejections.textContent === '';
  set(f.limits, limitsText(status.limits));
  f.limits.hidden = f.limits.textContent === '';
  drawCharts(item);
}

/** Sets text only when it changed (no churn for screen readers); true if it did. */
function set(el, text) {
  if (el.textContent === text) return false;
  el.textContent = text;
  return true;
}

function flashIfChanged(el, text) {
  if (set(el, text)) {
    el.classList.remove('flash');
    void el.offsetWidth; // restart the animation
    el.classList.add('flash');
  }
}

function announce(text) {
  announcer.textContent = text;
}

function replicasText(replicas) {
  const parts = [];
  for (const state of REPLICA_ORDER) if (replicas[state] > 0) parts.push(`${replicas[state]} ${state}`);
  for (const [state, n] of Object.entries(replicas)) if (!REPLICA_ORDER.includes(state) && n > 0) parts.push(`${n} ${state}`);
  return parts.length === 0 ? 'none' : parts.join(' · ');
}

function formatRate(rps) {
  if (rps === 0) return '0';
  return rps < 10 ? rps.toFixed(1) : String(Math.round(rps));
}

/** p50 and p99 as `38 / 50 ms` (one unit when they share it) or `375 ms / 1.20 s`. */
function formatQuantiles({ p50, p99 }) {
  const a = formatMs(p50);
  const b = formatMs(p99);
  const unit = (text) => text.slice(text.lastIndexOf(' '));
  if (p50 !== null && p99 !== null && unit(a) === unit(b)) return `${a.slice(0, a.lastIndexOf(' '))} / ${b}`;
  return `${a} / ${b}`;
}

function formatMs(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

// ── charts: inline SVG, x = the last five minutes, y from zero to the series' maximum ─────────

const W = 300;
const H = 48;

function drawCharts(item) {
  const points = item.points;
  const { charts } = item.view;
  const end = points.length > 0 ? points[points.length - 1].t : Date.now();
  const start = end - HISTORY_POINTS * intervalMs;
  const x = (t) => ((t - start) / (end - start)) * W;

  // Quantile charts: the points carry `<name>P50` and `<name>P99`, in ms (null: nothing observed).
  for (const [name, label] of [
    ['ttfb', 'Time to first byte'],
    ['firstEvent', 'Time to first token'],
    ['betweenEvents', 'Time between tokens'],
  ]) {
    const p50 = points.map((p) => p[`${name}P50`] ?? null);
    const p99 = points.map((p) => p[`${name}P99`] ?? null);
    const max = niceMax(Math.max(0, ...p99.filter((v) => v !== null), ...p50.filter((v) => v !== null)));
    const chart = charts[name];
    chart.paths[0].setAttribute('d', linePath(points, p99, x, max));
    chart.paths[1].setAttribute('d', linePath(points, p50, x, max));
    set(chart.max, `max ${formatMs(max === 1 && p99.every((v) => v === null) ? null : max)}`);
    chart.svg.setAttribute('aria-label', `${label} over the last 5 minutes: now p50 ${formatMs(lastValue(p50))}, p99 ${formatMs(lastValue(p99))}`);
  }

  for (const [name, pick, label, format] of [
    ['queued', (p) => p.queued, 'Queue depth', String],
    ['rps', (p) => p.rps, 'Requests per second', formatRate],
  ]) {
    const values = points.map(pick);
    const max = niceMax(Math.max(0, ...values));
    const chart = charts[name];
    chart.paths[1].setAttribute('d', linePath(points, values, x, max));
    chart.paths[0].setAttribute('d', areaPath(points, values, x, max));
    set(chart.max, `max ${format(max)}`);
    const now = values.length > 0 ? values[values.length - 1] : 0;
    chart.svg.setAttribute('aria-label', `${label} over the last 5 minutes: now ${format(now)}, peak ${format(Math.max(0, ...values))}`);
  }
}

function lastValue(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}

/** 1, 2 or 5 times a power of ten, at least the value (and at least 1). */
function niceMax(v) {
  if (!(v > 1)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function y(v, max) {
  return (H - 1 - (v / max) * (H - 3)).toFixed(1);
}

/** A polyline that breaks where a value is null (no requests in that window); a lone point is a dot. */
function linePath(points, values, x, max) {
  let d = '';
  let run = 0;
  for (let i = 0; i <= points.length; i++) {
    const v = i < points.length ? values[i] : null;
    if (v === null) {
      if (run === 1) d += 'h0.01'; // round caps draw a zero-length segment as a dot
      run = 0;
      continue;
    }
    d += `${run > 0 ? 'L' : 'M'}${x(points[i].t).toFixed(1)} ${y(v, max)}`;
    run += 1;
  }
  return d;
}

function areaPath(points, values, x, max) {
  if (points.length === 0) return '';
  let d = `M${x(points[0].t).toFixed(1)} ${H}`;
  for (let i = 0; i < points.length; i++) d += `L${x(points[i].t).toFixed(1)} ${y(values[i], max)}`;
  return `${d}L${x(points[points.length - 1].t).toFixed(1)} ${H}Z`;
}

// ── the Request dialog ─────────────────────────────────────────────────────────────────────

const dialog = document.getElementById('request-dialog');
const modelInput = document.getElementById('model-name');
const snippetEl = document.getElementById('snippet');
const snippetNote = document.getElementById('snippet-note');
const copyStatus = document.getElementById('copy-status');
let dialogSlug;
let opener;

const modelPick = document.getElementById('model-pick');
/** The dialog is open for a router (its model from the picker, OpenAI paths only). */
let dialogRouter = false;

/** The base URL the examples build on: a service's, or a router's (its OpenAI base_url is this + /request/v1). */
function dialogBase() {
  return dialogRouter ? routers.get(dialogSlug)?.baseUrl : services.get(dialogSlug)?.status.baseUrl;
}

function openDialog(slug, button, router) {
  dialogSlug = slug;
  dialogRouter = router;
  opener = button;
  const base = dialogBase();
  const fields = { slug, baseUrl: router ? `${base}/request/v1` : base, what: router ? 'router' : 'service' };
  for (const el of dialog.querySelectorAll('[data-field]')) el.textContent = fields[el.dataset.field];
  for (const el of dialog.querySelectorAll('[data-for]')) el.hidden = el.dataset.for !== (router ? 'router' : 'service');
  if (router) {
    dialog.querySelector('input[name="shape"][value="chat"]').checked = true;
    modelPick.replaceChildren(...(routers.get(slug)?.models ?? []).map((m) => new Option(`${m.id} (${m.service} · ${m.state})`, m.id)));
  }
  modelInput.value = MODEL_NAME.test(slug) ? slug : 'model';
  copyStatus.textContent = '';
  updateSnippet();
  dialog.showModal();
}

dialog.addEventListener('close', () => opener?.focus());
// A click on the backdrop (outside the dialog's box) closes it, as Esc does.
dialog.addEventListener('click', (e) => {
  if (e.target !== dialog) return;
  const r = dialog.getBoundingClientRect();
  if (e.clientX < r.left || e.clientX > r.right || e.clientY < r.top || e.clientY > r.bottom) dialog.close();
});
dialog.addEventListener('change', updateSnippet);
modelInput.addEventListener('input', updateSnippet);
modelPick.addEventListener('change', updateSnippet);

function choice(name) {
  return dialog.querySelector(`input[name="${name}"]:checked`).value;
}

function updateSnippet() {
  if (dialogSlug === undefined) return;
  const shape = choice('shape');
  // The openai SDKs speak only the OpenAI paths: hide them for the other shapes.
  for (const label of dialog.querySelectorAll('#client-choices label[data-only]')) {
    const fits = label.dataset.only === shape;
    label.hidden = !fits;
    if (!fits && label.querySelector('input').checked) dialog.querySelector('input[name="client"][value="curl"]').checked = true;
  }
  const model = dialogRouter ? modelPick.value : modelInput.value;
  const valid = MODEL_NAME.test(model);
  modelInput.setAttribute('aria-invalid', String(!dialogRouter && !valid));
  const base = dialogBase();
  const client = choice('client');
  snippetEl.textContent = snippet(shape, client, base, valid ? model : 'MODEL');
  snippetEl.dataset.shape = shape;
  snippetEl.dataset.client = client;
  snippetNote.textContent = NOTES[client];
}

// ── load and unload (POST /services/{slug}/load|unload, with an admin token) ───────────────────

const adminDialog = document.getElementById('admin-dialog');
const adminInput = document.getElementById('admin-token');
/** The admin token, in this page's memory only (never stored): asked for at the first load or unload. */
let adminToken;

function askToken() {
  adminInput.value = '';
  adminDialog.showModal();
  return new Promise((resolve) => {
    adminDialog.addEventListener('close', () => resolve(adminDialog.returnValue === 'ok' && adminInput.value !== '' ? adminInput.value : undefined), { once: true });
  });
}

async function loadOrUnload(slug, action, button) {
  const item = services.get(slug);
  const say = (text) => {
    set(item.view.fields.action, text);
    announce(`${slug}: ${text}`);
  };
  adminToken ??= await askToken();
  button.focus();
  if (adminToken === undefined) return;
  button.disabled = true;
  try {
    const res = await fetch(`services/${encodeURIComponent(slug)}/${action}`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
    const body = await res.json().catch(() => ({}));
    if (res.status === 401) adminToken = undefined; // asked again next time
    say(actionText(action, res.status, body));
  } catch {
    say(`${action} failed: the gateway did not answer`);
  } finally {
    button.disabled = false;
  }
}

/** What an answer of load or unload says, in a few words. */
function actionText(action, status, body) {
  if (status === 401) return 'not allowed: a token of admin.tokens is needed';
  if (body.error !== undefined) return typeof body.error === 'string' ? body.error : (body.error.message ?? `${action}: ${status}`);
  if (action === 'load') return body.state === 'ready' ? 'already loaded' : 'loading…';
  const stopped = body.stopped ?? [];
  const kept = body.kept ?? [];
  const parts = [stopped.length === 0 ? 'nothing idle to stop' : `stopped ${stopped.join(', ')}`];
  if (kept.length > 0) parts.push(`kept ${kept.join(', ')} (busy, or min)`);
  return parts.join(' · ');
}

// ── copying ────────────────────────────────────────────────────────────────────────────────

dialog.addEventListener('click', async (e) => {
  const button = e.target.closest('button.copy');
  if (button === null) return;
  const text = document.getElementById(button.dataset.copy).textContent;
  const ok = await copyText(text);
  copyStatus.textContent = ok ? 'Copied to the clipboard.' : 'Copying is not allowed here: select the text and copy it.';
});

/** The Clipboard API needs a secure context (https or localhost); elsewhere the old way works. */
async function copyText(text) {
  if (window.isSecureContext && navigator.clipboard !== undefined) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // fall through to the fallback
    }
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'visually-hidden';
  dialog.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

connect();
