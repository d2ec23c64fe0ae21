// The timeline page: its state (the view, pinned tracks, the selected slice,
// the search and the selected range, all held in the URL's fragment), the
// server's answers for what the canvas shows, and the keys and the mouse.
import {
  AXIS,
  HEADER,
  LANE,
  draw,
  drawFlame,
  duration,
  hit,
  labelOf,
  layout,
  plotWidth,
  rowTop,
  timeAt,
} from '/canvas.js';
import { answerText } from '/api.js';

// How long the last window took: its request, its parsing, its drawing (ms),
// and its size; for benchmarks.
const timing = { request: 0, parse: 0, draw: 0, bytes: 0 };

async function api(endpoint, params) {
  const t0 = performance.now();
  const text = await answerText(endpoint, new URLSearchParams(params));
  const t1 = performance.now();
  const answer = JSON.parse(text);
  if (endpoint === 'window') {
    Object.assign(timing, { request: t1 - t0, parse: performance.now() - t1, bytes: text.length });
  }
  return answer;
}

const $ = (id) => document.getElementById(id);
const canvas = $('timeline');
const ctx = canvas.getContext('2d');
const scroller = $('scroller');

// One schema: what the URL's fragment holds.
const state = {
  from: 0,
  to: 1,
  pinned: [],
  selected: null, // {track, lane, index}
  area: null, // {from, to, tracks}
  query: '',
};

let info = null; // the `tracks` answer
let lay = null;
let data = null; // the latest window answer
let names = {};
let width = 0;
let height = 0;
let scroll = 0;
let pending = 0;

function status(text, error = false) {
  const s = $('status');
  s.textContent = text;
  s.classList.toggle('error', error);
}

function busy(delta) {
  pending += delta;
  if (pending > 0) status('loading…');
  else if (!$('status').classList.contains('error')) status('');
}

function failed(e) {
  status(String(e.message ?? e), true);
}

function readUrl() {
  const h = new URLSearchParams(location.hash.slice(1));
  const num = (k) => (h.has(k) && h.get(k) !== '' && Number.isFinite(+h.get(k)) ? +h.get(k) : null);
  const list = (k) =>
    (h.get(k) ?? '')
      .split(',')
      .filter((x) => x !== '')
      .map(Number)
      .filter(Number.isInteger);
  const from = num('from');
  const to = num('to');
  if (from !== null && to !== null && to > from) Object.assign(state, { from, to });
  state.pinned = list('pin').filter((t) => t < info.tracks.length);
  const sel = list('slice');
  state.selected = sel.length === 3 ? { track: sel[0], lane: sel[1], index: sel[2] } : null;
  const area = list('range');
  state.area = area.length >= 2 ? { from: area[0], to: area[1], tracks: area.slice(2) } : null;
  state.query = h.get('q') ?? '';
}

let urlTimer = null;
function writeUrl() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => {
    const h = new URLSearchParams();
    h.set('from', Math.round(state.from));
    h.set('to', Math.round(state.to));
    if (state.pinned.length) h.set('pin', state.pinned.join(','));
    const s = state.selected;
    if (s) h.set('slice', `${s.track},${s.lane},${s.index}`);
    const a = state.area;
    if (a) h.set('range', [Math.round(a.from), Math.round(a.to), ...a.tracks].join(','));
    if (state.query) h.set('q', state.query);
    history.replaceState(null, '', location.pathname + location.search + '#' + h.toString());
  }, 100);
}

function span() {
  return Math.max(info.span_ns ?? 1, 1);
}

// Keeps the view inside the trace, at least 10 ns wide.
function clampView() {
  let { from, to } = state;
  const total = span();
  let w = Math.min(Math.max(to - from, 10), total);
  if (!Number.isFinite(w) || w <= 0) w = total;
  from = Math.min(Math.max(from, 0), total - w);
  state.from = from;
  state.to = from + w;
}

function frame() {
  draw(ctx, {
    width,
    height,
    view: state,
    lay,
    scroll,
    data,
    names,
    selected: state.selected,
    area: state.area,
  });
}

let drawing = false;
function redraw() {
  if (drawing) return;
  drawing = true;
  requestAnimationFrame(() => {
    drawing = false;
    frame();
  });
}

// The tracks whose rows show now.
function visibleTracks() {
  const out = [];
  for (const r of lay.rows) {
    if (r.kind !== 'track') continue;
    const top = rowTop(r, lay, scroll);
    if (top + r.h >= AXIS && top <= height) out.push(r.id);
  }
  return out;
}

// Asks for the window the view shows; one request at a time, the latest view
// asked again when it changed meanwhile.
let inFlight = false;
let again = false;
async function fetchWindow() {
  if (inFlight) {
    again = true;
    return;
  }
  inFlight = true;
  again = false;
  busy(1);
  try {
    const tracks = visibleTracks();
    const from = Math.floor(state.from);
    const to = Math.max(Math.ceil(state.to), from + 1);
    // In two halves, which the server's workers answer side by side.
    const px = Math.max(1, Math.round(plotWidth(width)));
    const half = Math.ceil(tracks.length / 2);
    const parts = [tracks.slice(0, half), tracks.slice(half)].filter((p) => p.length > 0);
    if (parts.length === 0) parts.push([]);
    const answers = await Promise.all(parts.map((p) => api('window', { from, to, px, tracks: p.join(',') })));
    const answer = answers[0];
    for (const other of answers.slice(1)) {
      answer.tracks.push(...other.tracks);
      Object.assign(answer.names, other.names);
      // A flow between the halves is in both.
      const seen = new Set(answer.flows.map((f) => JSON.stringify(f)));
      answer.flows.push(...other.flows.filter((f) => !seen.has(JSON.stringify(f))));
      answer.flows_cut ||= other.flows_cut;
    }
    // Names stay known: later answers give only the ids they use.
    Object.assign(names, answer.names);
    data = answer;
    const t = performance.now();
    frame();
    timing.draw = performance.now() - t;
    document.body.dataset.ready = 'true';
  } catch (e) {
    failed(e);
  } finally {
    inFlight = false;
    busy(-1);
    if (again) fetchWindow();
  }
}

function changed() {
  clampView();
  writeUrl();
  redraw();
  fetchWindow();
}

function resize() {
  const r = canvas.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  width = Math.max(300, Math.round(r.width));
  height = Math.max(100, Math.round(r.height));
  canvas.width = width * dpr;
  canvas.height = height * dpr;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  relayout();
}

function relayout() {
  lay = layout(info.tracks, info.counters, state.pinned);
  $('spacer').style.height = `${lay.height + 40}px`;
  scroll = Math.min(scroll, Math.max(0, lay.height + lay.band + AXIS - height + 40));
  changed();
}

function zoom(factor, atX) {
  const t = atX === null ? (state.from + state.to) / 2 : timeAt(state, width, atX);
  state.from = t - (t - state.from) * factor;
  state.to = t + (state.to - t) * factor;
  changed();
}

function pan(fraction) {
  const d = (state.to - state.from) * fraction;
  state.from += d;
  state.to += d;
  changed();
}

// Details of the selected slice.
async function showDetails() {
  const s = state.selected;
  const box = $('details');
  if (!s) {
    box.replaceChildren();
    return;
  }
  busy(1);
  try {
    const d = await api('details', s);
    const rows = [
      ['Name', d.name],
      ['Category', d.category],
      ['Thread', d.kind === 'async' ? `async track of process ${d.pid}` : `${d.thread ?? ''} (${d.pid}/${d.tid})`],
      ['Start', `${duration(d.start)} (${d.start_ns} ns on the trace's clock)`],
      ['Duration', d.open ? 'open until the end of the trace' : `${duration(d.duration_ns)} (${d.duration_ns} ns)`],
      ['Self time', `${duration(d.self_ns)} (${d.self_ns} ns)`],
      ['Depth', String(d.lane)],
    ];
    const table = document.createElement('table');
    table.id = 'details-table';
    const body = table.createTBody();
    const add = (k, v, cls) => {
      const tr = body.insertRow();
      const th = document.createElement('th');
      th.textContent = k;
      tr.append(th);
      const td = tr.insertCell();
      td.textContent = v;
      if (cls) tr.className = cls;
    };
    for (const [k, v] of rows) add(k, v);
    for (const [k, v] of Object.entries(d.args ?? {})) add(k, typeof v === 'string' ? v : JSON.stringify(v), 'arg');
    const h = document.createElement('h2');
    h.textContent = 'Slice';
    box.replaceChildren(h, table);
    box.dataset.slice = `${s.track},${s.lane},${s.index}`;
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

// The selected range's slices by name.
async function showArea() {
  const a = state.area;
  const box = $('selection');
  if (!a) {
    box.replaceChildren();
    return;
  }
  busy(1);
  try {
    const from = Math.floor(Math.min(a.from, a.to));
    const to = Math.ceil(Math.max(a.from, a.to));
    const r = await api('selection', { from, to, tracks: a.tracks.join(',') });
    const h = document.createElement('h2');
    h.textContent = `${r.slices} slices in ${duration(to - from)} on ${a.tracks.length} track${a.tracks.length === 1 ? '' : 's'}`;
    const table = document.createElement('table');
    table.id = 'selection-table';
    const head = table.createTHead().insertRow();
    for (const [k, n] of [
      ['Name', false],
      ['Count', true],
      ['Total', true],
      ['Self', true],
      ['Average', true],
      ['Max', true],
    ]) {
      const th = document.createElement('th');
      th.textContent = k;
      if (n) th.className = 'n';
      head.append(th);
    }
    const body = table.createTBody();
    for (const n of r.names) {
      const tr = body.insertRow();
      tr.dataset.count = n.count;
      tr.dataset.total = n.total_ns;
      const cells = [
        n.name,
        n.count,
        duration(n.total_ns),
        duration(n.self_ns),
        duration(n.avg_ns),
        duration(n.max_ns),
      ];
      cells.forEach((c, i) => {
        const td = tr.insertCell();
        td.textContent = String(c);
        if (i > 0) td.className = 'n';
      });
    }
    box.replaceChildren(h, table);
    // And its call tree, as a flame graph.
    const tree = await api('flame', { from, to, tracks: a.tracks.join(',') });
    if (tree.nodes.length > 0) {
      const title = document.createElement('h2');
      title.textContent = 'Flame graph of the range';
      const c = document.createElement('canvas');
      c.id = 'flame';
      const w = Math.max(200, box.clientWidth - 24);
      const hgt = drawFlame(null, tree, w);
      const dpr = window.devicePixelRatio || 1;
      c.width = w * dpr;
      c.height = hgt * dpr;
      c.style.width = `${w}px`;
      c.style.height = `${hgt}px`;
      c.dataset.nodes = tree.nodes.length;
      c.dataset.total = tree.total_ns;
      const fctx = c.getContext('2d');
      fctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      drawFlame(fctx, tree, w);
      box.insertBefore(c, table);
      box.insertBefore(title, c);
      const below = document.createElement('h2');
      below.textContent = 'By name';
      box.insertBefore(below, table);
    }
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

function select(s) {
  state.selected = s;
  writeUrl();
  redraw();
  showDetails();
}

// Brings the found slice into view: centred, the view widened to hold it,
// its track scrolled to.
function reveal(found) {
  const end = found.end ?? span();
  const w = state.to - state.from;
  const need = Math.max(w, (end - found.start) * 1.25);
  if (found.start < state.from || end > state.to || need > w) {
    const mid = (found.start + end) / 2;
    state.from = mid - need / 2;
    state.to = mid + need / 2;
  }
  const row = lay.rows.find((r) => r.kind === 'track' && r.id === found.track);
  if (row && !row.pinned) {
    const top = row.y + HEADER + LANE * found.lane;
    const visible = height - AXIS - lay.band - 60;
    if (top < scroll || top > scroll + visible) setScroll(Math.max(0, top - 40));
  }
  changed();
}

async function search(backward) {
  const text = $('search').value.trim();
  state.query = text;
  if (!text) {
    $('search-count').textContent = '';
    writeUrl();
    return;
  }
  busy(1);
  try {
    const params = { text };
    const s = state.selected;
    if (s) params.after = `${s.track},${s.lane},${s.index}`;
    if (backward) params.backward = 'true';
    let r = await api('search', params);
    // Past the last (or before the first): round again from the other end.
    if (!r.found && s) {
      delete params.after;
      r = await api('search', params);
    }
    $('search-count').textContent = r.matches === 1 ? '1 match' : `${r.matches} matches`;
    $('search-count').dataset.matches = r.matches;
    if (r.found) {
      const f = r.found;
      state.selected = { track: f.track, lane: f.lane, index: f.index };
      reveal(f);
      showDetails();
    }
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

function setScroll(v) {
  scroll = Math.max(0, v);
  scroller.scrollTop = scroll;
  redraw();
  fetchWindow();
}

// The mouse: a drag pans, a drag with Shift or on the axis selects a range, a
// click selects a slice or pins a track.
let drag = null;
let mouseX = null;
canvas.addEventListener('mousedown', (e) => {
  canvas.focus();
  const r = canvas.getBoundingClientRect();
  const x = e.clientX - r.left;
  const y = e.clientY - r.top;
  drag = {
    x,
    y,
    from: state.from,
    to: state.to,
    selecting: e.shiftKey || y < AXIS,
    moved: false,
  };
});
window.addEventListener('mousemove', (e) => {
  const r = canvas.getBoundingClientRect();
  const x = e.clientX - r.left;
  const y = e.clientY - r.top;
  mouseX = x >= 0 && x <= width && y >= 0 && y <= height ? x : null;
  if (!drag) return;
  if (Math.abs(x - drag.x) + Math.abs(y - drag.y) > 3) drag.moved = true;
  if (!drag.moved) return;
  if (drag.selecting) {
    const a = timeAt(state, width, drag.x);
    const b = timeAt(state, width, x);
    state.area = {
      from: Math.max(0, Math.min(a, b)),
      to: Math.min(span(), Math.max(a, b)),
      tracks: [],
    };
    redraw();
  } else {
    const dt = ((x - drag.x) / plotWidth(width)) * (drag.to - drag.from);
    state.from = drag.from - dt;
    state.to = drag.to - dt;
    clampView();
    redraw();
    fetchWindow();
  }
});
window.addEventListener('mouseup', (e) => {
  if (!drag) return;
  const d = drag;
  drag = null;
  const r = canvas.getBoundingClientRect();
  const x = e.clientX - r.left;
  const y = e.clientY - r.top;
  if (d.moved && d.selecting && state.area) {
    // The tracks the drag covered, or every track for a drag on the axis.
    const y0 = Math.min(d.y, y);
    const y1 = Math.max(d.y, y);
    const tracks = lay.rows
      .filter((row) => row.kind === 'track')
      .filter((row) => {
        if (d.y < AXIS) return true;
        const top = rowTop(row, lay, scroll);
        return top < y1 && top + row.h > y0;
      })
      .map((row) => row.id);
    // Whole nanoseconds: what the URL holds is what is asked.
    state.area = { from: Math.floor(state.area.from), to: Math.ceil(state.area.to), tracks };
    writeUrl();
    redraw();
    showArea();
    return;
  }
  if (d.moved) {
    changed();
    return;
  }
  const h = hit({ lay, scroll, data, view: state, width }, x, y);
  if (h.label && h.row.kind === 'track') {
    const i = state.pinned.indexOf(h.row.id);
    if (i >= 0) state.pinned.splice(i, 1);
    else state.pinned.push(h.row.id);
    relayout();
  } else if (h.item) {
    select({ track: h.row.id, lane: h.lane, index: h.item[3] });
  } else if (!h.axis) {
    select(null);
  }
});
canvas.addEventListener(
  'wheel',
  (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    if (e.ctrlKey || e.metaKey) {
      zoom(Math.exp(e.deltaY * 0.002), e.clientX - r.left);
    } else if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      pan(e.deltaX / plotWidth(width));
    } else {
      setScroll(scroll + e.deltaY);
    }
  },
  { passive: false },
);
scroller.addEventListener('scroll', () => {
  if (Math.abs(scroller.scrollTop - scroll) >= 1) {
    scroll = scroller.scrollTop;
    redraw();
    fetchWindow();
  }
});

// Perfetto's keys.
window.addEventListener('keydown', (e) => {
  if (e.target instanceof HTMLInputElement) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  switch (e.key.toLowerCase()) {
    case 'w':
      zoom(0.8, mouseX);
      break;
    case 's':
      zoom(1.25, mouseX);
      break;
    case 'a':
      pan(-0.1);
      break;
    case 'd':
      pan(0.1);
      break;
    case 'escape':
      state.area = null;
      showArea();
      select(null);
      break;
    case '/':
      e.preventDefault();
      $('search').focus();
      break;
    default:
      return;
  }
});

$('search-form').addEventListener('submit', (e) => {
  e.preventDefault();
  search(false);
});
$('search').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && e.shiftKey) {
    e.preventDefault();
    search(true);
  }
});
$('search-prev').addEventListener('click', () => search(true));
window.addEventListener('resize', resize);

async function main() {
  busy(1);
  try {
    info = await api('tracks', {});
    $('title').textContent = `${info.name} · ${info.slices} slices on ${info.tracks.length} tracks`;
    document.title = `${info.name} · tracekit view`;
    const problems = [info.damage, ...info.warnings].filter(Boolean);
    if (problems.length) {
      const d = $('damage');
      d.textContent =
        `The trace is damaged: ${problems.join('; ')}. ` +
        `Shown: the ${info.records} records read${info.damage ? ' before the damage' : ''}.`;
      d.hidden = false;
    }
    state.to = span();
    readUrl();
    $('search').value = state.query;
    resize();
    if (state.selected) showDetails();
    if (state.area) showArea();
    if (info.tracks.length === 0) {
      frame();
      document.body.dataset.ready = 'true';
    }
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

// The rows' labels, for scripts and tests: what the canvas shows.
window.tracekitRows = () =>
  lay?.rows.map((r) => ({
    kind: r.kind,
    id: r.id,
    label: labelOf(r),
    pinned: r.pinned,
  }));
window.tracekitView = () => ({ from: state.from, to: state.to });
window.tracekitTiming = () => ({ ...timing });

main();
