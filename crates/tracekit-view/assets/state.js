// The page's state. `state` is the view, and the URL's hash holds it: one
// schema gives each key its default and how the hash writes it. `page` is what
// the server said (the trace's info, its whole curve) and the bookkeeping of
// the answers being drawn.

// For each key: how the hash holds it ('text' as is, 'list' comma-separated,
// 'json' as JSON), and its default. A key at its default is left out of the
// hash; a key the hash lacks, or holds unreadably, takes its default.
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
};

// What the filter's reset leaves alone: how the view is drawn, not what.
const KEPT_BY_RESET = ['tab', 'orient', 'sort', 'tsort', 'recursion'];

const fresh = (key) => structuredClone(SCHEMA[key][1]);
const write = (kind, v) => (kind === 'json' ? JSON.stringify(v) : kind === 'list' ? v.join(',') : v);

export const state = Object.fromEntries(Object.keys(SCHEMA).map((k) => [k, fresh(k)]));

export const page = {
  info: null,
  full: null, // the unfiltered timeline
  features: { compare: false },
  generation: 0, // answers to an older view are dropped
  lastFiltered: null, // the filtered timeline drawn last
  refresh: async () => {}, // redraws the view (set by app.js)
};

export function saveState() {
  const p = new URLSearchParams();
  for (const [k, [kind, def]] of Object.entries(SCHEMA)) {
    const v = write(kind, state[k]);
    if (v !== write(kind, def)) p.set(k, v);
  }
  const hash = '#' + p.toString();
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

export function loadState() {
  const p = new URLSearchParams(location.hash.slice(1));
  for (const [k, [kind]] of Object.entries(SCHEMA)) {
    state[k] = fresh(k);
    if (!p.has(k)) continue;
    const v = p.get(k);
    if (kind === 'text') state[k] = v;
    else if (kind === 'list') state[k] = v.split(',').filter(Boolean);
    else {
      try {
        state[k] = JSON.parse(v);
      } catch {
        // An unreadable value keeps the default.
      }
    }
  }
}

// Clears the filter, the zoom and the focus.
export function resetFilter() {
  for (const k of Object.keys(SCHEMA)) if (!KEPT_BY_RESET.includes(k)) state[k] = fresh(k);
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
