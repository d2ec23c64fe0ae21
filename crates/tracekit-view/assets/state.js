// The memtrace page's state. `state` is the view, and the URL's fragment
// holds it through the schema below (urlstate.js says how). `page` is what the
// server said (the trace's info, its whole curve) and the bookkeeping of the
// answers being drawn.
import { fresh, readFragment, writeFragment } from './urlstate.js';

// For each key: how the fragment holds it, and its default.
const SCHEMA = {
  from: ['text', ''],
  to: ['text', ''],
  live: ['text', ''],
  at: ['text', ''],
  minsize: ['text', ''],
  maxsize: ['text', ''],
  location: ['text', ''],
  cfrom: ['text', ''],
  cto: ['text', ''],
  never: ['text', ''],
  lfrom: ['text', ''],
  lto: ['text', ''],
  vfrom: ['text', ''],
  vto: ['text', ''],
  sources: ['list', ['minor', 'major', 'external']],
  clauses: ['json', []],
  zoom: ['json', []],
  fragment: ['json', []],
  tab: ['text', 'top'],
  orient: ['text', 'icicle'],
  sort: ['text', 'bytes'],
  tsort: ['text', 'total'],
  recursion: ['text', 'auto'],
  cby: ['text', 'leaf'],
  bfrom: ['text', ''],
  bto: ['text', ''],
};

// What the filter's reset leaves alone: how the view is drawn, not what.
const KEPT_BY_RESET = ['tab', 'orient', 'sort', 'tsort', 'recursion', 'cby', 'bfrom', 'bto'];

export const state = Object.fromEntries(Object.keys(SCHEMA).map((k) => [k, fresh(SCHEMA, k)]));

export const page = {
  info: null,
  full: null, // the unfiltered timeline
  base: null, // the compared trace's unfiltered timeline (--compare)
  features: { compare: false, followed: null }, // `/api/features`; `followed` of a trace followed as it is written (--follow)
  generation: 0, // answers to an older view are dropped
  lastFiltered: null, // the filtered timeline drawn last
  refresh: async () => {}, // redraws the view (set by app.js)
};

export function saveState() {
  writeFragment(SCHEMA, state);
}

export function loadState() {
  Object.assign(state, readFragment(SCHEMA));
}

// Clears the filter, the zoom and the focus.
export function resetFilter() {
  for (const k of Object.keys(SCHEMA)) if (!KEPT_BY_RESET.includes(k)) state[k] = fresh(SCHEMA, k);
}

// ---- the filter as command-line options ---------------------------------------

export function parseTime(t) {
  if (!t) return null;
  const m = /^([0-9.]+)\s*(us|µs|ms|s|m|h)?$/.exec(t.trim());
  if (!m) return null;
  const k = { us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 }[m[2] || 's'];
  return parseFloat(m[1]) * k;
}

export function filterArgs() {
  const a = [];
  const end = page.info.duration_us / 1e6 + 's';
  if (state.from || state.to) a.push('--between', state.from || '0s', state.to || end);
  if (state.cfrom || state.cto) a.push('--collected-between', state.cfrom || '0s', state.cto || end);
  if (state.never) a.push('--never-collected');
  if (state.lfrom || state.lto) a.push('--lifetime', state.lfrom || '0s', state.lto || end);
  if (state.vfrom || state.vto) a.push('--live-between', state.vfrom || '0s', state.vto || end);
  if (state.minsize) a.push('--min-size', state.minsize);
  if (state.maxsize) a.push('--max-size', state.maxsize);
  if (state.location) a.push('--location', state.location);
  for (const c of state.clauses) {
    const flag = {
      'require function': '--function',
      'require contains': '--location',
      'forbid function': '--forbid-function',
      'forbid contains': '--forbid',
    }[c.k + ' ' + c.m];
    if (flag && c.t) a.push(flag, c.t);
  }
  if (state.sources.length !== 3) {
    for (const s of state.sources) a.push('--source', s);
  }
  return a;
}

// Hidden frames and folded recursion change the stacks drawn, not which
// allocations count. Recursion is folded when the stacks are deeper than a
// screen ('auto'), always ('fold') or never ('keep').
export function stackArgs() {
  const recursion = { fold: ['--collapse-recursion'], keep: ['--no-collapse-recursion'] }[state.recursion] || [];
  return state.clauses
    .filter((c) => c.k === 'hide' && c.t)
    .flatMap((c) => [c.m === 'function' ? '--hide-function' : '--hide', c.t])
    .concat(recursion);
}

export function liveArgs(flame) {
  if (state.live === 'peak') return ['--peak'];
  if (state.live === 'at' && state.at) return ['--at', state.at];
  if (state.live === 'end' && flame) return ['--live-end'];
  return [];
}
