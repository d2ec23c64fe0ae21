// tracekit view: the page. Every figure comes from the server's /api/
// endpoints, which answer what `tracekit memtrace <subcommand> --json` prints;
// the page turns the filter into that subcommand's options.
'use strict';

const $ = (id) => document.getElementById(id);
const state = {
  from: '', to: '', live: '', at: '', minsize: '', maxsize: '', location: '',
  cfrom: '', cto: '', never: '', lfrom: '', lto: '', vfrom: '', vto: '',
  sources: ['minor', 'major', 'external'], clauses: [], tab: 'top', zoom: [], orient: 'icicle',
  sort: 'bytes', fragment: [], tsort: 'total',
};
let info = null;
let full = null;        // the unfiltered timeline
let features = { compare: false };
let generation = 0;     // answers to an older filter are dropped
let lastFiltered = null; // the filtered timeline drawn last

// ---- the URL holds the view -------------------------------------------------

function saveState() {
  const p = new URLSearchParams();
  for (const k of ['from', 'to', 'live', 'at', 'minsize', 'maxsize', 'location', 'cfrom', 'cto', 'never', 'lfrom', 'lto', 'vfrom', 'vto', 'tab', 'orient', 'sort']) {
    if (state[k]) p.set(k, state[k]);
  }
  if (state.sources.length !== 3) p.set('sources', state.sources.join(','));
  if (state.zoom.length) p.set('zoom', JSON.stringify(state.zoom));
  if (state.fragment.length) p.set('fragment', JSON.stringify(state.fragment));
  if (state.tsort !== 'total') p.set('tsort', state.tsort);
  if (state.clauses.length) p.set('clauses', JSON.stringify(state.clauses));
  const hash = '#' + p.toString();
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

function loadState() {
  const p = new URLSearchParams(location.hash.slice(1));
  for (const k of ['from', 'to', 'live', 'at', 'minsize', 'maxsize', 'location', 'cfrom', 'cto', 'never', 'lfrom', 'lto', 'vfrom', 'vto', 'tab', 'orient', 'sort']) {
    if (p.has(k)) state[k] = p.get(k);
  }
  if (p.has('sources')) state.sources = p.get('sources').split(',').filter(Boolean);
  try { state.zoom = p.has('zoom') ? JSON.parse(p.get('zoom')) : []; } catch (e) { state.zoom = []; }
  try { state.fragment = p.has('fragment') ? JSON.parse(p.get('fragment')) : []; } catch (e) { state.fragment = []; }
  state.tsort = p.get('tsort') || 'total';
  try { state.clauses = p.has('clauses') ? JSON.parse(p.get('clauses')) : []; } catch (e) { state.clauses = []; }
}

// ---- the filter as command-line options ---------------------------------------

function filterArgs() {
  const a = [];
  if (state.from || state.to) {
    a.push('--between', state.from || '0s', state.to || (info.duration_us / 1e6) + 's');
  }
  const end = (info.duration_us / 1e6) + 's';
  if (state.cfrom || state.cto) a.push('--collected-between', state.cfrom || '0s', state.cto || end);
  if (state.never) a.push('--never-collected');
  if (state.lfrom || state.lto) a.push('--lifetime', state.lfrom || '0s', state.lto || end);
  if (state.vfrom || state.vto) a.push('--live-between', state.vfrom || '0s', state.vto || end);
  if (state.minsize) a.push('--min-size', state.minsize);
  if (state.maxsize) a.push('--max-size', state.maxsize);
  if (state.location) a.push('--location', state.location);
  for (const c of state.clauses) {
    const flag = { 'require function': '--function', 'require contains': '--location', 'forbid function': '--forbid-function', 'forbid contains': '--forbid' }[c.k + ' ' + c.m];
    if (flag && c.t) a.push(flag, c.t);
  }
  if (state.sources.length !== 3) {
    for (const s of state.sources) a.push('--source', s);
  }
  return a;
}

// Hidden frames change the stacks drawn, not which allocations count.
function hideArgs() {
  return state.clauses.filter((c) => c.k === 'hide' && c.t).flatMap((c) => [c.m === 'function' ? '--hide-function' : '--hide', c.t]);
}

function liveArgs(flame) {
  if (state.live === 'peak') return ['--peak'];
  if (state.live === 'at' && state.at) return ['--at', state.at];
  if (state.live === 'end' && flame) return ['--live-end'];
  return [];
}

// The server answers only with the token of the URL it printed; it goes in a
// header, so that it stays out of the addresses of the requests.
const TOKEN = new URLSearchParams(location.search).get('token') || '';

function get(path) {
  return fetch(path, { headers: { Authorization: 'Bearer ' + TOKEN } });
}

async function api(endpoint, args) {
  const q = new URLSearchParams();
  for (const a of args) q.append('arg', a);
  const r = await get('/api/' + endpoint + '?' + q.toString());
  const text = await r.text();
  if (!r.ok) throw new Error(text);
  return JSON.parse(text);
}

function setStatus(msg, error) {
  $('status').textContent = msg || '';
  $('status').className = error ? 'error' : '';
}

// ---- formatting -------------------------------------------------------------------

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
}
const pct = (x) => (100 * x).toFixed(1) + '%';
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// ---- info ---------------------------------------------------------------------------

function renderInfo() {
  const bytesPerSample = info.word_size / 8 / info.sample_rate;
  const rows = [
    ['executable', info.executable_name], ['pid', info.pid],
    ['host', info.host_name], ['word size', info.word_size + ' bits'],
    ['start time', info.start_time], ['duration', (info.duration_us / 1e6).toFixed(3) + ' s'],
    ['sample rate', `${Number(info.sample_rate.toPrecision(6))} (1/${Math.round(bytesPerSample)} bytes)`],
    ['context', info.context === null ? '(none)' : info.context],
    ['allocations', info.allocs + ` (${info.minor} minor, ${info.major} major, ${info.external} external)`],
    ['events', info.events],
  ];
  const dl = el('dl');
  for (const [k, v] of rows) dl.append(el('dt', { text: k }), el('dd', { text: String(v) }));
  $('info').replaceChildren(dl);
  $('title').textContent = info.file;
}

// ---- memory graph --------------------------------------------------------------------

const G = { left: 60, right: 10, top: 10, bottom: 22 };

function graphScale() {
  const svg = $('graph');
  const w = svg.clientWidth || 800;
  const h = svg.clientHeight || 180;
  const tmax = info.duration_us / 1e6 || 1;
  const ymax = Math.max(1, ...full.points.map((p) => p.live_bytes));
  return {
    w, h, tmax, ymax,
    x: (t) => G.left + (w - G.left - G.right) * t / tmax,
    y: (v) => h - G.bottom - (h - G.top - G.bottom) * v / ymax,
    t: (px) => Math.min(tmax, Math.max(0, (px - G.left) / (w - G.left - G.right) * tmax)),
  };
}

function area(points, s, key) {
  if (!points.length) return '';
  let d = `M${s.x(0)},${s.y(0)}`;
  for (const p of points) d += `L${s.x(p.time_s)},${s.y(p[key])}`;
  d += `L${s.x(points[points.length - 1].time_s)},${s.y(0)}Z`;
  return d;
}

function renderGraph(filtered) {
  const s = graphScale();
  const svg = $('graph');
  const ns = 'http://www.w3.org/2000/svg';
  const path = (cls, d) => { const p = document.createElementNS(ns, 'path'); p.setAttribute('class', cls); p.setAttribute('d', d); return p; };
  const text = (x, y, t, anchor) => { const e = document.createElementNS(ns, 'text'); e.setAttribute('x', x); e.setAttribute('y', y); if (anchor) e.setAttribute('text-anchor', anchor); e.textContent = t; return e; };
  const parts = [path('full', area(full.points, s, 'live_bytes'))];
  if (filtered) parts.push(path('filtered', area(filtered.points, s, 'live_bytes')));
  if ($('show-rate').checked) {
    const rmax = Math.max(1, ...full.points.map((p) => p.alloc_rate_bytes_per_s));
    let d = '';
    for (const p of full.points) d += (d ? 'L' : 'M') + s.x(p.time_s) + ',' + (s.h - G.bottom - (s.h - G.top - G.bottom) * p.alloc_rate_bytes_per_s / rmax);
    parts.push(path('rate', d));
  }
  // The allocated range and the collected range of the filter, shaded.
  for (const [from, to, cls] of [[state.from, state.to, 'range'], [state.cfrom, state.cto, 'range collected']]) {
    if (!from && !to) continue;
    const a = s.x(parseTime(from) ?? 0);
    const b = s.x(parseTime(to) ?? s.tmax);
    const r = document.createElementNS(ns, 'rect');
    r.setAttribute('class', cls); r.setAttribute('x', Math.min(a, b)); r.setAttribute('y', G.top);
    r.setAttribute('width', Math.abs(b - a)); r.setAttribute('height', s.h - G.top - G.bottom);
    parts.push(r);
  }
  // The axis in seconds from the start, or in wall-clock time (UTC).
  const when = (t) => ($('wall-time').checked
    ? new Date(info.start_time_us / 1000 + t * 1000).toISOString().replace('T', ' ').replace('Z', '')
    : t.toFixed(2) + ' s');
  parts.push(text(G.left - 4, G.top + 10, bytes(s.ymax), 'end'), text(G.left - 4, s.h - G.bottom, '0', 'end'),
    text(G.left, s.h - 6, when(0)), text(s.w / 2, s.h - 6, when(s.tmax / 2), 'middle'), text(s.w - G.right, s.h - 6, when(s.tmax), 'end'));
  svg.replaceChildren(...parts);
}

function parseTime(t) {
  if (!t) return null;
  const m = /^([0-9.]+)\s*(us|µs|ms|s|m|h)?$/.exec(t.trim());
  if (!m) return null;
  const k = { us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 }[m[2] || 's'];
  return parseFloat(m[1]) * k;
}

function setupDrag() {
  const svg = $('graph');
  let start = null;
  svg.addEventListener('mousedown', (e) => { start = e.offsetX; });
  svg.addEventListener('mouseup', (e) => {
    if (start === null) return;
    const s = graphScale();
    const [a, b] = [start, e.offsetX].sort((x, y) => x - y);
    start = null;
    if (b - a < 3) return;
    state.from = s.t(a).toFixed(6) + 's';
    state.to = s.t(b).toFixed(6) + 's';
    state.zoom = [];
    writeForm();
    refresh();
  });
}

// ---- filter form -------------------------------------------------------------------

function writeForm() {
  $('f-from').value = state.from; $('f-to').value = state.to;
  $('f-live').value = state.live; $('f-at').value = state.at;
  for (const k of ['cfrom', 'cto', 'lfrom', 'lto', 'vfrom', 'vto']) $('f-' + k).value = state[k];
  $('f-never').checked = !!state.never;
  $('f-minsize').value = state.minsize; $('f-maxsize').value = state.maxsize; $('f-location').value = state.location;
  for (const c of document.querySelectorAll('input[name=source]')) c.checked = state.sources.includes(c.value);
  const chips = state.clauses.map((c, i) => {
    const words = `${c.k} a frame whose ${c.m === 'function' ? 'function is' : (c.k === 'hide' ? 'name contains' : 'location contains')} "${c.t}"`;
    const x = el('button', { type: 'button', class: 'chip', title: 'remove', text: words + ' ×' });
    x.addEventListener('click', () => { state.clauses.splice(i, 1); writeForm(); });
    return x;
  });
  $('clauses').replaceChildren(...chips);
}

function readForm() {
  state.from = $('f-from').value.trim(); state.to = $('f-to').value.trim();
  state.live = $('f-live').value; state.at = $('f-at').value.trim();
  for (const k of ['cfrom', 'cto', 'lfrom', 'lto', 'vfrom', 'vto']) state[k] = $('f-' + k).value.trim();
  state.never = $('f-never').checked ? '1' : '';
  state.minsize = $('f-minsize').value.trim(); state.maxsize = $('f-maxsize').value.trim(); state.location = $('f-location').value.trim();
  state.sources = [...document.querySelectorAll('input[name=source]:checked')].map((c) => c.value);
}

// ---- views -------------------------------------------------------------------------

async function renderTop(gen) {
  const t = await api('top', [...liveArgs(false), '--limit', '100', ...filterArgs()]);
  if (gen !== generation) return;
  const live = t.at_s !== null;
  const cols = [['site', 'site'], ['bytes', 'allocated'], ['allocs', 'allocs'], ['share', 'share'],
    ['live_end_bytes', 'live at end']];
  if (live) cols.splice(1, 0, ['live_at_bytes', t.at_peak ? 'live at peak' : 'live at ' + t.at_s + ' s']);
  const sites = [...t.sites];
  const key = cols.some(([k]) => k === state.sort) ? state.sort : null;
  if (key && key !== 'site') sites.sort((a, b) => b[key] - a[key]);
  const head = el('tr', {}, ...cols.map(([k, label]) => {
    const th = el('th', { class: k === 'site' ? 'name' : '', text: label });
    th.addEventListener('click', () => { state.sort = k; saveState(); renderTop(generation); });
    return th;
  }));
  const rows = sites.map((s) => el('tr', {}, ...cols.map(([k]) => {
    const v = s[k];
    const txt = k === 'site' ? v : k === 'share' ? pct(v) : k.endsWith('bytes') ? bytes(v) : String(v);
    return el('td', { class: k === 'site' ? 'name' : '', text: txt });
  })));
  const table = el('table', { id: 'top-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
  const summary = el('p', { text: `${t.sites.length} sites shown` + (t.others.sites ? `, ${t.others.sites} more (${bytes(t.others.bytes)})` : '') });
  $('view').replaceChildren(summary, table);
  keyboardRows(table);
}

// The stacks as the flame graph folds them.
let stacksRaw = { key: null, stacks: null };
async function folded(gen) {
  const args = [...liveArgs(true), ...filterArgs(), ...hideArgs()];
  const key = JSON.stringify(args);
  if (stacksRaw.key !== key) {
    const f = await api('flamegraph', args);
    if (gen !== generation) return null;
    stacksRaw = { key, stacks: f.stacks, total: f.total, unit: f.unit };
  }
  return stacksRaw;
}

// Points of interest: each function's weight in the stacks it appears in (once
// per stack, however deep the recursion) and as the allocating frame.
async function renderFunctions(gen) {
  const f = await folded(gen);
  if (!f || gen !== generation) return;
  const acc = new Map();
  for (const s of f.stacks) {
    const seen = new Set(s.frames);
    for (const name of seen) {
      const a = acc.get(name) || { name, total: 0, self: 0 };
      a.total += s.weight;
      acc.set(name, a);
    }
    const leaf = s.frames[s.frames.length - 1];
    if (leaf !== undefined) acc.get(leaf).self += s.weight;
  }
  const key = state.sort === 'self' ? 'self' : 'total';
  const rows = [...acc.values()].sort((a, b) => b[key] - a[key] || (a.name < b.name ? -1 : 1)).slice(0, 200);
  const fmt = (w) => (f.unit === 'bytes' ? bytes(w) : String(w));
  const th = (k, label) => {
    const e = el('th', { text: label });
    e.addEventListener('click', () => { state.sort = k; saveState(); renderFunctions(generation); });
    return e;
  };
  const table = el('table', { id: 'functions-table' },
    el('thead', {}, el('tr', {}, el('th', { class: 'name', text: 'function' }), th('total', 'in its stacks'), el('th', { text: 'share' }), th('self', 'allocating'))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, el('td', { class: 'name', text: r.name }), el('td', { 'data-weight': String(r.total), text: fmt(r.total) }),
      el('td', { text: pct(r.total / (f.total || 1)) }), el('td', { text: fmt(r.self) })))));
  for (const [i, tr] of [...table.querySelectorAll('tbody tr')].entries()) {
    tr.focusView = () => { state.fragment = [rows[i].name]; state.zoom = []; state.tab = 'flame'; refresh(); };
    tr.addEventListener('dblclick', tr.focusView);
  }
  const hot = await api('hot-paths', [...liveArgs(true), ...filterArgs(), ...hideArgs()]);
  if (gen !== generation) return;
  const hotRows = hot.paths.map((p) => {
    const tr = el('tr', {}, el('td', { class: 'name', text: p.frames.join(' › ') + (p.cut ? ' …' : '') }), el('td', { text: fmt(p.weight) }),
      el('td', { text: pct(p.share) }), el('td', { text: String(p.objects) }));
    tr.focusView = () => { state.fragment = p.frames; state.zoom = []; state.tab = 'flame'; refresh(); };
    tr.addEventListener('dblclick', tr.focusView);
    return tr;
  });
  const hotTable = el('table', { id: 'hot-paths-table' },
    el('thead', {}, el('tr', {}, el('th', { class: 'name', text: 'hot path (caller first)' }), el('th', { text: 'in its stacks' }), el('th', { text: 'share' }), el('th', { text: 'count' }))),
    el('tbody', {}, ...hotRows));
  $('view').replaceChildren(el('h3', { text: 'Hot paths' }),
    el('p', { class: 'hint', text: `call sequences in at least ${hot.frequency * 100}% of the weight, not explained by a longer one to within ${hot.tolerance * 100}% (${hot.paths_found} found; double-click or Enter focuses the flame graph on one)` }),
    hotTable, el('h3', { text: 'Functions' }), el('p', { text: `${acc.size} functions; the 200 heaviest` }), table);
  keyboardRows(table);
  keyboardRows(hotTable);
}

// Lays out a flametree answer's nodes (preorder, parents first) as boxes:
// x and width from the weights, depth from the parents.
function layout(nodes, width) {
  const x = new Float64Array(nodes.length);
  const w = new Float64Array(nodes.length);
  const depth = new Int32Array(nodes.length);
  const next = new Float64Array(nodes.length); // where a node's next callee starts
  let depthMax = 0;
  nodes.forEach((n, i) => {
    if (n.parent < 0) { x[i] = 0; w[i] = width; } else {
      const p = n.parent;
      w[i] = nodes[p].total ? w[p] * n.total / nodes[p].total : 0;
      x[i] = next[p]; next[p] += w[i]; depth[i] = depth[p] + 1;
    }
    next[i] = x[i];
    depthMax = Math.max(depthMax, depth[i]);
  });
  return { x, w, depth, depthMax };
}

// Draws boxes into `box`; `up` puts depth 0 at the bottom. `click(i)` on a box.
function drawBoxes(box, nodes, lay, up, fmt, total, click, skipRoot) {
  const rows = lay.depthMax + (skipRoot ? 0 : 1);
  box.style.height = rows * 17 + 'px';
  const frag = document.createDocumentFragment();
  nodes.forEach((n, i) => {
    if (lay.w[i] < 0.5 || (skipRoot && i === 0)) return;
    const d = lay.depth[i] - (skipRoot ? 1 : 0);
    const e = el('div', { title: `${n.name}\n${fmt(n.total)} (${pct(n.total / (total || 1))}), ${n.objects} objects`, text: n.name });
    e.style.left = lay.x[i] + 'px'; e.style.top = (up ? rows - 1 - d : d) * 17 + 'px'; e.style.width = lay.w[i] + 'px';
    e.style.background = `hsl(${20 + (hash(n.name) % 40)}, 80%, ${60 + (hash(n.name) % 15)}%)`;
    e.addEventListener('click', () => click(i));
    frag.append(e);
  });
  box.append(frag);
}

// The names from a node up to (not including) the root of a flametree answer.
function pathTo(nodes, i) {
  const names = [];
  for (let m = i; m > 0; m = nodes[m].parent) names.unshift(nodes[m].name);
  return names;
}

async function renderFlame(gen) {
  const args = [...liveArgs(true), ...filterArgs(), ...hideArgs()];
  for (const f of state.fragment) args.push('--fragment', f);
  for (const f of state.zoom) args.push('--focus', f);
  const t = await api('flametree', args);
  if (gen !== generation) return;
  const fmt = (w) => (t.unit === 'bytes' ? bytes(w) : w + ' samples');
  // The zoom and the fragment as far as this filter's stacks follow them.
  const path = t.focus;
  const fragment = t.fragment || [];
  const crumbs = el('span', { id: 'crumbs' });
  [fragment.length ? '[' + fragment.join(' › ') + ']' : 'all', ...path].forEach((name, i) => {
    const a = el('a', { text: name });
    a.addEventListener('click', () => { state.zoom = path.slice(0, i); saveState(); renderFlame(generation); });
    crumbs.append(i ? ' › ' : '', a);
  });
  const orient = el('select', { id: 'orient' }, el('option', { value: 'icicle', text: 'icicle (callers on top)' }), el('option', { value: 'flame', text: 'flame (callers below)' }));
  orient.value = state.orient;
  orient.addEventListener('change', () => { state.orient = orient.value; saveState(); renderFlame(generation); });
  const shown = t.nodes.length ? t.nodes[0].total : 0;
  const total = el('span', { id: 'flame-total', 'data-total': String(t.total), 'data-shown': String(shown), text: `${t.what}: total ${fmt(t.total)}; shown ${fmt(shown)}` + (t.truncated ? ' (largest frames only)' : '') });
  const setFragment = (f) => { state.fragment = f; state.zoom = []; saveState(); renderFlame(generation); };
  const tools = el('span', { id: 'focus-tools' });
  if (!fragment.length) {
    const b = el('button', { type: 'button', id: 'focus-here', text: 'focus on ' + (path.length ? path[path.length - 1] : '…') });
    b.disabled = !path.length;
    b.title = 'show the callers and callees of this function, wherever it is called';
    b.addEventListener('click', () => setFragment([path[path.length - 1]]));
    tools.append(b);
  } else {
    const drop = (id, text, f) => { const b = el('button', { type: 'button', id, text }); b.addEventListener('click', () => setFragment(f)); tools.append(b); };
    if (fragment.length > 1) {
      drop('retract-callers', '− outermost', fragment.slice(1));
      drop('retract-callees', '− innermost', fragment.slice(0, -1));
    }
    drop('clear-focus', 'clear focus', []);
  }
  const bar = el('div', { id: 'flame-bar' }, crumbs, orient, tools, total);
  const parts = [bar];
  const width = $('view').clientWidth || 1000;
  if (fragment.length) {
    // Callers above the fragment, drawn upward from it: click one to extend the
    // fragment toward its callers.
    const callers = el('div', { id: 'flame-callers', class: 'flame' });
    const callee = el('div', { id: 'fragment-bar', text: fragment.join(' › ') + ' — ' + fmt(shown) });
    parts.push(el('p', { class: 'hint', text: 'callers above (click to extend the focus toward them), callees below (click to extend toward them)' }), callers, callee);
    const box = el('div', { id: 'flame', class: 'flame' });
    parts.push(box);
    $('view').replaceChildren(...parts);
    const cl = layout(t.callers, width);
    drawBoxes(callers, t.callers, cl, true, fmt, t.total, (i) => setFragment([...pathTo(t.callers, i).reverse(), ...fragment]), true);
    const ll = layout(t.nodes, width);
    drawBoxes(box, t.nodes, ll, false, fmt, t.total, (i) => {
      if (path.length) { state.zoom = [...path, ...pathTo(t.nodes, i)]; saveState(); renderFlame(generation); } else setFragment([...fragment, ...pathTo(t.nodes, i)]);
    }, true);
    return;
  }
  const box = el('div', { id: 'flame', class: 'flame' });
  parts.push(box);
  $('view').replaceChildren(...parts);
  const lay = layout(t.nodes, box.clientWidth || width);
  drawBoxes(box, t.nodes, lay, state.orient === 'flame', fmt, t.total, (i) => {
    state.zoom = [...path, ...pathTo(t.nodes, i)];
    saveState();
    renderFlame(generation);
  }, false);
}

function hash(s) { let h = 0; for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0; return h; }

// Callee tree: the stacks from the callers down; caller tree: from the
// allocation sites up (every stack reversed). The server answers one level
// at a time, as rows are expanded.
async function renderTree(gen, callers) {
  const base = [...liveArgs(true), ...filterArgs(), ...hideArgs(), ...(callers ? ['--invert'] : []), '--depth', '1', '--min-share', '0'];
  const level = async (path) => {
    const a = [...base];
    for (const p of path) a.push('--focus', p);
    return api('flametree', a);
  };
  const top = await level([]);
  if (gen !== generation) return;
  const fmt = (w) => (top.unit === 'bytes' ? bytes(w) : String(w));
  const order = (kids) => {
    const k = state.tsort;
    return kids.sort((a, b) => (k === 'name' ? (a.name < b.name ? -1 : 1) : b[k] - a[k]));
  };
  const body = el('tbody');
  const th = (k, label, cls) => {
    const e = el('th', { class: cls || '', 'data-sort': k, text: label + (state.tsort === k ? ' ▾' : '') });
    e.addEventListener('click', () => { state.tsort = k; saveState(); renderTree(generation, callers); });
    return e;
  };
  const table = el('table', { class: 'tree', id: callers ? 'caller-table' : 'callee-table' },
    el('thead', {}, el('tr', {}, th('name', callers ? 'allocation site, then callers' : 'caller, then callees', 'name'),
      th('total', top.what), th('objects', 'count'), el('th', { text: 'share' }))), body);
  const addRows = (kids, depth, after, path) => {
    let last = after;
    for (const c of order(kids)) {
      const tr = el('tr', {});
      const here = [...path, c.name];
      // Enter focuses the flame graph on this call sequence (callers first).
      tr.focusView = () => {
        state.fragment = callers ? [...here].reverse() : [c.name];
        state.zoom = [];
        state.tab = 'flame';
        refresh();
      };
      const toggle = el('span', { class: 'toggle', text: c.callees ? '▸' : ' ' });
      tr.append(el('td', { class: 'name' }, ' '.repeat(depth * 2), toggle, c.name),
        el('td', { text: fmt(c.total) }), el('td', { text: String(c.objects) }), el('td', { text: pct(c.total / (top.total || 1)) }));
      tr.expand = async () => {
        if (tr.open || !c.callees) return;
        tr.open = tr; toggle.textContent = '▾';
        const t = await level(here);
        if (tr.open !== tr) return;
        tr.open = addRows(t.nodes.slice(1), depth + 1, tr, here) || tr;
      };
      tr.collapse = () => {
        if (!tr.open) return;
        let r = tr.nextSibling;
        while (r && r !== tr.open.nextSibling) { const nx = r.nextSibling; r.remove(); r = nx; }
        tr.open = null; toggle.textContent = '▸';
      };
      tr.addEventListener('click', () => (tr.open ? tr.collapse() : tr.expand()));
      if (last) last.after(tr); else body.append(tr);
      last = tr;
    }
    return last;
  };
  addRows(top.nodes.slice(1), 0, null, []);
  $('view').replaceChildren(el('p', { text: 'click or press → / ← to expand or collapse, ↑ ↓ to move, Enter to focus the flame graph on that call sequence; click a column to sort' }), table);
  keyboardRows(table);
}

function keyboardRows(table) {
  table.tabIndex = 0;
  table.addEventListener('keydown', (e) => {
    const rows = [...table.querySelectorAll('tbody tr')];
    let i = rows.findIndex((r) => r.classList.contains('selected'));
    if (e.key === 'ArrowDown') i = Math.min(rows.length - 1, i + 1);
    else if (e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'ArrowRight' && rows[i] && rows[i].expand) rows[i].expand();
    else if (e.key === 'ArrowLeft' && rows[i] && rows[i].collapse) rows[i].collapse();
    else if (e.key === 'Enter' && rows[i] && rows[i].focusView) { rows[i].focusView(); return; }
    else return;
    e.preventDefault();
    rows.forEach((r) => r.classList.remove('selected'));
    if (rows[i]) { rows[i].classList.add('selected'); rows[i].scrollIntoView({ block: 'nearest' }); }
  });
}

async function renderCompare(gen) {
  const d = await api('diff', ['--limit', '100', ...filterArgs()]);
  if (gen !== generation) return;
  const rows = d.sites.map((r) => {
    const delta = r.allocated_bytes_b - r.allocated_bytes_a;
    return el('tr', {}, el('td', { class: 'name', text: r.site }),
      el('td', { text: bytes(r.allocated_bytes_a) }), el('td', { text: bytes(r.allocated_bytes_b) }),
      el('td', { class: delta > 0 ? 'delta-up' : 'delta-down', text: (delta > 0 ? '+' : '') + bytes(delta) }));
  });
  const table = el('table', { id: 'compare-table' }, el('thead', {}, el('tr', {}, el('th', { class: 'name', text: 'site' }),
    el('th', { text: d.a.path }), el('th', { text: d.b.path }), el('th', { text: 'difference' }))), el('tbody', {}, ...rows));
  $('view').replaceChildren(table);
}

// ---- putting it together --------------------------------------------------------------

async function refresh() {
  saveState();
  const gen = ++generation;
  setStatus('working…');
  for (const b of document.querySelectorAll('#tabs button')) b.setAttribute('aria-selected', String(b.dataset.tab === state.tab));
  try {
    const args = filterArgs();
    const view = { top: renderTop, flame: renderFlame, callees: (g) => renderTree(g, false), callers: (g) => renderTree(g, true), functions: renderFunctions, compare: renderCompare }[state.tab] || renderTop;
    // The graph's pass and the view's run side by side on the server.
    const shown = view(gen);
    shown.catch(() => {});
    const filtered = args.length ? await api('timeline', ['--points', '450', ...args]) : null;
    if (gen !== generation) return;
    lastFiltered = filtered;
    renderGraph(filtered);
    const peak = full.peak;
    const all = full.totals;
    $('summary').textContent = `${all.allocs} allocations, ${bytes(all.bytes)}; peak live heap ${bytes(peak.bytes)} at ${peak.time_s.toFixed(3)} s` +
      (filtered ? `; filtered: ${filtered.totals.allocs} allocations, ${bytes(filtered.totals.bytes)}, peak ${bytes(filtered.peak.bytes)} at ${filtered.peak.time_s.toFixed(3)} s` : '');
    await shown;
    if (gen === generation) setStatus('');
  } catch (e) {
    if (gen === generation) setStatus(e.message, true);
  }
}

async function main() {
  loadState();
  try {
    [info, full, features] = await Promise.all([api('info', []), api('timeline', ['--points', '450']), api('features', [])]);
  } catch (e) {
    setStatus('cannot load the trace: ' + e.message, true);
    return;
  }
  $('compare-tab').hidden = !features.compare;
  // A damaged trace is shown as far as it reads, and says so, as the command
  // line does with its exit status.
  if (info.damage) {
    const d = info.damage;
    $('damage').textContent = `This trace is damaged at byte ${d.offset}: ${d.message}. Everything shown is of the ${d.events_before} events before it.`;
    $('damage').hidden = false;
  }
  renderInfo();
  writeForm();
  setupDrag();
  $('filter-form').addEventListener('submit', (e) => { e.preventDefault(); readForm(); state.zoom = []; refresh(); });
  document.addEventListener('keydown', (e) => {
    // Keyboard on the focus: [ and ] drop its outermost and innermost frame, Escape clears it.
    if (state.tab !== 'flame' || e.target.closest('input, select, textarea')) return;
    if (e.key === 'Escape' && state.fragment.length) state.fragment = [];
    else if (e.key === '[' && state.fragment.length > 1) state.fragment = state.fragment.slice(1);
    else if (e.key === ']' && state.fragment.length > 1) state.fragment = state.fragment.slice(0, -1);
    else return;
    state.zoom = [];
    refresh();
  });
  $('reset').addEventListener('click', () => {
    Object.assign(state, { from: '', to: '', live: '', at: '', minsize: '', maxsize: '', location: '', cfrom: '', cto: '', never: '', lfrom: '', lto: '', vfrom: '', vto: '', sources: ['minor', 'major', 'external'], clauses: [], zoom: [], fragment: [] });
    writeForm(); refresh();
  });
  $('show-rate').addEventListener('change', () => renderGraph(lastFiltered));
  $('wall-time').addEventListener('change', () => renderGraph(lastFiltered));
  $('c-add').addEventListener('click', () => {
    const t = $('c-text').value.trim();
    if (!t) return;
    state.clauses.push({ k: $('c-kind').value, m: $('c-match').value, t });
    $('c-text').value = '';
    writeForm();
  });
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => { state.tab = b.dataset.tab; refresh(); });
  }
  window.addEventListener('hashchange', () => { loadState(); writeForm(); refresh(); });
  window.addEventListener('resize', () => renderGraph(lastFiltered));
  await refresh();
  document.body.dataset.ready = 'true';
}

main();
