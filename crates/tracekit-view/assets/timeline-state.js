// The timeline page's state, all of it here. `state` is the view, and the
// URL's fragment holds it through the schema below (urlstate.js says how):
// the time shown, the pinned tracks, the selected slice, the selected range
// and the search. `page` is what the server said, what the canvas draws from
// and the bookkeeping of the answers and of the mouse.

import { answerText } from './api.js';
import { $, setStatus } from './dom.js';
import { readFragment, writeFragment } from './urlstate.js';

// What the fragment holds: `from` and `to` the view (ns from the trace's
// first time, always written), `pin` the pinned tracks, `slice` the selected
// slice's track, lane and index, `range` the selected range's from, to and
// tracks, `q` the search, `fold` the folded tracks (`-` for none; absent, the
// page folds the deepest tracks until every track fits its height), `y` how far
// the tracks are scrolled, `base` the baseline range's from, to and tracks
// (what the selected range is compared with), `procs` the processes whose
// tracks are hidden under their header.
const SCHEMA = {
  from: ['number', null],
  to: ['number', null],
  pin: ['ints', []],
  slice: ['ints', []],
  range: ['ints', []],
  q: ['text', ''],
  fold: ['text', ''],
  y: ['number', null],
  base: ['ints', []],
  procs: ['ints', []],
};

export const state = {
  from: 0,
  to: 1,
  pinned: [],
  selected: null, // {track, lane, index}
  area: null, // {from, to, tracks}
  query: '',
  folded: null, // the folded tracks' ids, null until decided
  base: null, // {from, to, tracks}: the baseline range, if one is chosen
  closed: [], // the processes whose tracks are hidden
};

export const page = {
  info: null, // the `tracks` answer
  compares: false, // a trace to compare with is served (--compare)
  followed: null, // of a trace followed as it is written (--follow): { generation, writing }
  lay: null, // the rows laid out (canvas.js)
  data: null, // the latest window answer
  names: {}, // every name an answer gave, by id
  width: 0, // the canvas's size, in CSS pixels
  height: 0,
  scroll: 0, // how far the rows under the pinned band are scrolled
  pending: 0, // answers awaited
  urlTimer: null, // the fragment is written once the view rests
  drawing: false, // a frame is asked for
  inFlight: false, // a window is asked for
  again: false, // the view changed while it was asked for
  drag: null, // the mouse's drag on the canvas
  mouseX: null, // where the mouse is on the canvas, if it is
  toggled: '', // the rows the fold toggles were last placed for
  // How long the last window took: its request, its parsing, its drawing
  // (ms), and its size; for benchmarks.
  timing: { request: 0, parse: 0, draw: 0, bytes: 0 },
};

export async function api(endpoint, params) {
  const t0 = performance.now();
  const text = await answerText(endpoint, new URLSearchParams(params));
  const t1 = performance.now();
  const answer = JSON.parse(text);
  if (endpoint === 'window') {
    Object.assign(page.timing, { request: t1 - t0, parse: performance.now() - t1, bytes: text.length });
  }
  return answer;
}

// Counts the answers awaited; the status line says so while there are any.
export function busy(delta) {
  page.pending += delta;
  if (page.pending > 0) setStatus('loading…');
  else if (!$('status').classList.contains('error')) setStatus('');
}

export function failed(e) {
  setStatus(String(e.message ?? e), true);
}

export function readUrl() {
  const h = readFragment(SCHEMA);
  if (h.from !== null && h.to !== null && h.to > h.from) Object.assign(state, { from: h.from, to: h.to });
  state.pinned = h.pin.filter((t) => t < page.info.tracks.length);
  state.selected = h.slice.length === 3 ? { track: h.slice[0], lane: h.slice[1], index: h.slice[2] } : null;
  state.area = h.range.length >= 2 ? { from: h.range[0], to: h.range[1], tracks: h.range.slice(2) } : null;
  state.base = h.base.length >= 2 ? { from: h.base[0], to: h.base[1], tracks: h.base.slice(2) } : null;
  state.closed = h.procs;
  state.query = h.q;
  state.folded = h.fold === '' ? null : h.fold === '-' ? [] : h.fold.split(',').map(Number).filter(Number.isInteger);
  page.scroll = Math.max(0, h.y ?? 0);
}

export function writeUrl() {
  clearTimeout(page.urlTimer);
  page.urlTimer = setTimeout(() => {
    const s = state.selected;
    const a = state.area;
    writeFragment(SCHEMA, {
      from: Math.round(state.from),
      to: Math.round(state.to),
      pin: state.pinned,
      slice: s ? [s.track, s.lane, s.index] : [],
      range: a ? [Math.round(a.from), Math.round(a.to), ...a.tracks] : [],
      q: state.query,
      fold: state.folded === null ? '' : state.folded.length ? state.folded.join(',') : '-',
      y: Math.round(page.scroll),
      base: state.base ? [state.base.from, state.base.to, ...state.base.tracks] : [],
      procs: state.closed,
    });
  }, 100);
}

// The trace's length (ns), at least 1.
export function span() {
  return Math.max(page.info.span_ns ?? 1, 1);
}

// Keeps the view inside the trace, at least 10 ns wide.
export function clampView() {
  let { from, to } = state;
  const total = span();
  let w = Math.min(Math.max(to - from, 10), total);
  if (!Number.isFinite(w) || w <= 0) w = total;
  from = Math.min(Math.max(from, 0), total - w);
  state.from = from;
  state.to = from + w;
}
