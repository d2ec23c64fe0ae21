// The timeline page: the server's answers for what the canvas shows, drawn
// as the view changes; the search; the hooks that scripts and tests read.
// Its state is timeline-state.js's, its drawing canvas.js's, its panel
// timeline-panel.js's, its keys and mouse timeline-input.js's.
import { AXIS, HEADER, LANE, draw, labelOf, layout, plotWidth, rowTop, timeAt } from './canvas.js';
import { $, el, showDamage } from './dom.js';
import { listen } from './timeline-input.js';
import { showArea, showDetails } from './timeline-panel.js';
import { api, busy, clampView, failed, page, readUrl, span, state, writeUrl } from './timeline-state.js';
import { follow } from './api.js';

const canvas = $('timeline');
const ctx = canvas.getContext('2d');
const scroller = $('scroller');

function frame() {
  const { width, height, lay, scroll, data, names } = page;
  draw(ctx, { width, height, view: state, lay, scroll, data, names, selected: state.selected, area: state.area });
  placeToggles();
}

// A button over each shown track of more than one lane that folds it to its
// outermost lanes or unfolds it; laid out again only when the rows moved.
function placeToggles() {
  const key = `${page.scroll}/${page.height}/${page.lay.rows.map((r) => r.id + ':' + r.h).join(',')}`;
  if (key === page.toggled) return;
  page.toggled = key;
  const box = $('toggles');
  const buttons = [];
  for (const r of page.lay.rows) {
    const top = rowTop(r, page.lay, page.scroll);
    if (top < AXIS || top > page.height - HEADER) continue;
    if (r.kind === 'process') {
      const b = el('button', {
        'data-process-toggle': r.pid,
        'aria-expanded': String(!r.closed),
        title: r.closed ? `show the ${r.tracks} tracks of this process` : 'hide the tracks of this process',
        text: r.closed ? '▸' : '▾',
        style: `top: ${top}px`,
      });
      b.addEventListener('click', () => {
        state.closed = r.closed ? state.closed.filter((p) => p !== r.pid) : [...state.closed, r.pid];
        relayout();
      });
      buttons.push(b);
      continue;
    }
    if (r.kind !== 'track' || r.track.lanes <= 1) continue;
    const folded = r.lanes < r.track.lanes;
    const b = el('button', {
      'data-track-toggle': r.id,
      'aria-expanded': String(!folded),
      title: folded
        ? `unfold: ${r.track.lanes} lanes (${r.lanes} shown)`
        : 'fold to its outermost lanes, as many as there is room for',
      text: folded ? '▸' : '▾',
      style: `top: ${top}px`,
    });
    b.addEventListener('click', () => toggle(r.id));
    buttons.push(b);
  }
  box.replaceChildren(...buttons);
}

function toggle(id) {
  const folded = state.folded ?? [];
  state.folded = folded.includes(id) ? folded.filter((t) => t !== id) : [...folded, id];
  relayout();
}

// With no folds asked for, the deepest tracks folded until every row's header
// shows (a row's lanes may run past the bottom): every track is on the screen
// at first. A track that is the last row gains nothing by folding.
function decideFolds() {
  if (state.folded !== null) return;
  const room = page.height - AXIS;
  const { tracks, counters } = page.info;
  const folded = [];
  // Where the last row starts, the tracks not scrolled.
  const lastTop = () => {
    const lay = layout(tracks, counters, state.pinned, folded, 0, state.closed);
    const last = lay.rows.at(-1);
    return last ? [rowTop(last, lay, 0) - AXIS, last] : [0, null];
  };
  const deepest = [...tracks].filter((t) => t.lanes > 1).sort((a, b) => b.lanes - a.lanes || a.id - b.id);
  for (const t of deepest) {
    const [top, last] = lastTop();
    if (top + HEADER <= room) break;
    if (last?.kind === 'track' && last.id === t.id) continue;
    folded.push(t.id);
  }
  state.folded = folded.sort((a, b) => a - b);
}

function redraw() {
  if (page.drawing) return;
  page.drawing = true;
  requestAnimationFrame(() => {
    page.drawing = false;
    frame();
  });
}

// The tracks whose rows show now.
// The tracks on screen, as a window asks for them: a folded track with the
// lanes it shows (`ID:LANES`), so that its inner lanes, most of a deep
// track's slices, are not sent.
function visibleTracks() {
  const out = [];
  for (const r of page.lay.rows) {
    if (r.kind !== 'track') continue;
    const top = rowTop(r, page.lay, page.scroll);
    if (top + r.h >= AXIS && top <= page.height) out.push(r.lanes < r.track.lanes ? `${r.id}:${r.lanes}` : `${r.id}`);
  }
  return out;
}

// Asks for the window the view shows; one request at a time, the latest view
// asked again when it changed meanwhile.
async function fetchWindow() {
  if (page.inFlight) {
    page.again = true;
    return;
  }
  page.inFlight = true;
  page.again = false;
  busy(1);
  try {
    const tracks = visibleTracks();
    const from = Math.floor(state.from);
    const to = Math.max(Math.ceil(state.to), from + 1);
    // In two halves, which the server's workers answer side by side.
    const px = Math.max(1, Math.round(plotWidth(page.width)));
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
    Object.assign(page.names, answer.names);
    page.data = answer;
    const t = performance.now();
    frame();
    page.timing.draw = performance.now() - t;
    document.body.dataset.ready = 'true';
  } catch (e) {
    failed(e);
  } finally {
    page.inFlight = false;
    busy(-1);
    if (page.again) fetchWindow();
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
  page.width = Math.max(300, Math.round(r.width));
  page.height = Math.max(100, Math.round(r.height));
  canvas.width = page.width * dpr;
  canvas.height = page.height * dpr;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  relayout();
}

function relayout() {
  decideFolds();
  const { tracks, counters } = page.info;
  page.lay = layout(tracks, counters, state.pinned, state.folded, page.height - AXIS, state.closed);
  $('spacer').style.height = `${page.lay.height + 40}px`;
  page.scroll = Math.min(page.scroll, Math.max(0, page.lay.height + page.lay.band + AXIS - page.height + 40));
  changed();
}

function zoom(factor, atX) {
  const t = atX === null ? (state.from + state.to) / 2 : timeAt(state, page.width, atX);
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

function setScroll(v) {
  page.scroll = Math.max(0, v);
  scroller.scrollTop = page.scroll;
  writeUrl();
  redraw();
  fetchWindow();
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
  // A slice in a folded track's inner lanes: the track unfolds to show it.
  if (found.lane > 0 && state.folded?.includes(found.track)) {
    state.folded = state.folded.filter((t) => t !== found.track);
    relayout();
  }
  const row = page.lay.rows.find((r) => r.kind === 'track' && r.id === found.track);
  if (row && !row.pinned) {
    const top = row.y + HEADER + LANE * found.lane;
    const visible = page.height - AXIS - page.lay.band - 60;
    if (top < page.scroll || top > page.scroll + visible) setScroll(Math.max(0, top - 40));
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

listen(canvas, scroller, { zoom, pan, setScroll, select, search, relayout, changed, redraw, fetchWindow });
window.addEventListener('resize', resize);

async function main() {
  busy(1);
  try {
    const [info, features] = await Promise.all([api('tracks', {}), api('features', {})]);
    page.info = info;
    page.compares = features.compare;
    page.followed = features.followed || null;
    showTitle();
    const problems = [info.damage, ...info.warnings].filter(Boolean);
    if (problems.length) {
      showDamage(
        `The trace is damaged: ${problems.join('; ')}. ` +
          `Shown: the ${info.records} records read${info.damage ? ' before the damage' : ''}.`,
      );
    }
    state.to = span();
    readUrl();
    $('search').value = state.query;
    resize();
    // The scroll the URL held, once the rows it scrolls are laid out.
    scroller.scrollTop = page.scroll;
    if (state.selected) showDetails();
    if (state.area || page.compares) showArea();
    if (info.tracks.length === 0) {
      frame();
      document.body.dataset.ready = 'true';
    }
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
  if (page.followed?.writing) followTrace();
}

function showTitle() {
  const info = page.info;
  const f = page.followed;
  const following = f ? (f.writing ? ' · following, still written' : ' · followed to its end') : '';
  $('title').textContent = `${info.name} · ${info.slices} slices on ${info.tracks.length} tracks${following}`;
  $('title').dataset.followed = f ? (f.writing ? 'writing' : 'ended') : '';
  document.title = `${info.name} · tracekit view`;
}

// A grown trace's tracks are numbered anew (a thread or task that came
// sorts among the others): what the state names by track follows each track
// to its new number; a track that is gone lets go of it.
function renumber(before, after) {
  const key = (t) => `${t.kind}/${t.pid}/${t.tid}/${t.name}`;
  const now = new Map(after.map((t) => [key(t), t.id]));
  const to = (id) => (before[id] ? now.get(key(before[id])) : undefined);
  const all = (ids) => ids.map(to).filter((id) => id !== undefined);
  state.pinned = all(state.pinned);
  if (state.folded !== null) state.folded = all(state.folded);
  for (const range of [state.area, state.base]) if (range) range.tracks = all(range.tracks);
  if (state.selected) {
    const track = to(state.selected.track);
    state.selected = track === undefined ? null : { ...state.selected, track };
  }
}

// A trace followed while its program writes it (`--follow`): what was added
// drawn each time it grew; a view of the whole trace stays of the whole trace.
function followTrace() {
  follow(page.followed, {
    grew: async () => {
      const whole = state.from <= 0 && state.to >= span();
      const before = page.info.tracks;
      try {
        page.info = await api('tracks', {});
      } catch (e) {
        failed(e);
        return false;
      }
      renumber(before, page.info.tracks);
      if (whole) state.to = span();
      relayout();
      if (state.area) showArea();
    },
    seen: (f) => {
      page.followed = f;
      showTitle();
    },
  });
}

// For scripts and tests: the rows' labels (what the canvas shows), the view,
// and how long the last window took.
window.tracekitRows = () =>
  page.lay?.rows.map((r) => ({
    kind: r.kind,
    id: r.id,
    label: labelOf(r),
    pinned: r.pinned,
    top: rowTop(r, page.lay, page.scroll),
    height: r.h,
    lanes: r.lanes,
  }));
window.tracekitView = () => ({ from: state.from, to: state.to });
window.tracekitTiming = () => ({ ...page.timing });

main();
