// The tables: top sites, functions and hot paths, the callee and caller trees,
// the comparison with another trace.

import { api } from './api.js';
import { $, bytes, el, keyboardRows, pct } from './dom.js';
import { filterArgs, stackArgs, liveArgs, page, saveState, state } from './state.js';

export async function renderTop(gen) {
  const t = await api('top', [...liveArgs(false), '--limit', '100', ...filterArgs()]);
  if (gen !== page.generation) return;
  const live = t.at_s !== null;
  const cols = [
    ['site', 'site'],
    ['bytes', 'allocated'],
    ['allocs', 'allocs'],
    ['share', 'share'],
    ['live_end_bytes', 'live at end'],
  ];
  if (live) cols.splice(1, 0, ['live_at_bytes', t.at_peak ? 'live at peak' : 'live at ' + t.at_s + ' s']);
  const sites = [...t.sites];
  const key = cols.some(([k]) => k === state.sort) ? state.sort : null;
  if (key && key !== 'site') sites.sort((a, b) => b[key] - a[key]);
  const head = el(
    'tr',
    {},
    ...cols.map(([k, label]) => {
      const th = el('th', { class: k === 'site' ? 'name' : '', text: label });
      th.addEventListener('click', () => {
        state.sort = k;
        saveState();
        renderTop(page.generation);
      });
      return th;
    }),
  );
  const rows = sites.map((s) =>
    el(
      'tr',
      {},
      ...cols.map(([k]) => {
        const v = s[k];
        const txt = k === 'site' ? v : k === 'share' ? pct(v) : k.endsWith('bytes') ? bytes(v) : String(v);
        return el('td', { class: k === 'site' ? 'name' : '', text: txt });
      }),
    ),
  );
  const table = el('table', { id: 'top-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
  const summary = el('p', {
    text:
      `${t.sites.length} sites shown` + (t.others.sites ? `, ${t.others.sites} more (${bytes(t.others.bytes)})` : ''),
  });
  $('view').replaceChildren(summary, table);
  keyboardRows(table);
}

// Growing: the sites whose live bytes grow steadily over the trace (a leak's
// shape, as `top --growing` ranks them), each with its live bytes over time
// drawn in its row; hovering the curve names the bytes at each time.
export async function renderGrowing(gen) {
  const t = await api('top', ['--growing', '--limit', '100', ...filterArgs()]);
  if (gen !== page.generation) return;
  const g = t.growing;
  const labels = ['grows', 'steadiness', 'live at end', 'live over time', 'site'];
  const head = el('tr', {}, ...labels.map((l) => el('th', { class: l === 'site' ? 'name' : '', text: l })));
  const rows = g.sites.map((s) =>
    el(
      'tr',
      {},
      el('td', { text: bytes(s.bytes_per_s) + '/s' }),
      el('td', { text: s.steadiness.toFixed(2) }),
      el('td', { text: bytes(s.live_bytes.at(-1) ?? 0) }),
      el('td', {}, sparkline(g.times_s, s.live_bytes)),
      el('td', { class: 'name', text: s.site }),
    ),
  );
  const table = el('table', { id: 'growing-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
  const summary = el('p', {
    text: g.sites.length
      ? `${g.sites.length} sites whose live bytes grow steadily, steadiest first (live bytes at ${g.times_s.length} times)`
      : 'No site grows steadily.',
  });
  $('view').replaceChildren(summary, table);
  keyboardRows(table);
}

// A site's live bytes at `times` as a line the height of a row, its values in
// its tooltip.
function sparkline(times, values) {
  const ns = 'http://www.w3.org/2000/svg';
  const [w, h] = [160, 22];
  const end = times.at(-1) || 1;
  const top = Math.max(1, ...values);
  const points = values.map(
    (v, i) => `${((times[i] / end) * w).toFixed(1)},${(h - 1 - (v / top) * (h - 2)).toFixed(1)}`,
  );
  const svg = document.createElementNS(ns, 'svg');
  for (const [k, v] of [
    ['class', 'spark'],
    ['width', w],
    ['height', h],
    ['viewBox', `0 0 ${w} ${h}`],
  ])
    svg.setAttribute(k, String(v));
  const title = document.createElementNS(ns, 'title');
  title.textContent = values.map((v, i) => `${times[i].toFixed(3)} s: ${bytes(v)}`).join('\n');
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', points.join(' '));
  svg.append(title, line);
  return svg;
}

// Points of interest: each function's weight in the stacks it appears in (once
// per stack, however deep the recursion) and as the allocating frame, weighed
// by the server from the flame graph's tree.
export async function renderFunctions(gen) {
  const key = state.sort === 'self' ? 'self' : 'total';
  const f = await api('functions', [...liveArgs(true), ...filterArgs(), ...stackArgs(), '--sort', key]);
  if (gen !== page.generation) return;
  const rows = f.functions;
  const fmt = (w) => (f.unit === 'bytes' ? bytes(w) : String(w));
  const th = (k, label) => {
    const e = el('th', { text: label });
    e.addEventListener('click', () => {
      state.sort = k;
      saveState();
      renderFunctions(page.generation);
    });
    return e;
  };
  const table = el(
    'table',
    { id: 'functions-table' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { class: 'name', text: 'function' }),
        th('total', 'in its stacks'),
        el('th', { text: 'share' }),
        th('self', 'allocating'),
      ),
    ),
    el(
      'tbody',
      {},
      ...rows.map((r) =>
        el(
          'tr',
          {},
          el('td', { class: 'name', text: r.name }),
          el('td', { 'data-weight': String(r.total), text: fmt(r.total) }),
          el('td', { text: pct(r.total / (f.total || 1)) }),
          el('td', { text: fmt(r.self) }),
        ),
      ),
    ),
  );
  for (const [i, tr] of [...table.querySelectorAll('tbody tr')].entries()) {
    tr.focusView = () => {
      state.fragment = [rows[i].name];
      state.zoom = [];
      state.tab = 'flame';
      page.refresh();
    };
    tr.addEventListener('dblclick', tr.focusView);
  }
  const hot = await api('hot-paths', [...liveArgs(true), ...filterArgs(), ...stackArgs()]);
  if (gen !== page.generation) return;
  const hotRows = hot.paths.map((p) => {
    const tr = el(
      'tr',
      {},
      el('td', { class: 'name', text: p.frames.join(' › ') + (p.cut ? ' …' : '') }),
      el('td', { text: fmt(p.weight) }),
      el('td', { text: pct(p.share) }),
      el('td', { text: String(p.objects) }),
    );
    tr.focusView = () => {
      state.fragment = p.frames;
      state.zoom = [];
      state.tab = 'flame';
      page.refresh();
    };
    tr.addEventListener('dblclick', tr.focusView);
    return tr;
  });
  const hotTable = el(
    'table',
    { id: 'hot-paths-table' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { class: 'name', text: 'hot path (caller first)' }),
        el('th', { text: 'in its stacks' }),
        el('th', { text: 'share' }),
        el('th', { text: 'count' }),
      ),
    ),
    el('tbody', {}, ...hotRows),
  );
  $('view').replaceChildren(
    el('h3', { text: 'Hot paths' }),
    el('p', {
      class: 'hint',
      text: `call sequences in at least ${hot.frequency * 100}% of the weight, not explained by a longer one to within ${hot.tolerance * 100}% (${hot.paths_found} found; double-click or Enter focuses the flame graph on one)`,
    }),
    hotTable,
    el('h3', { text: 'Functions' }),
    el('p', { text: `${f.count} functions; the ${rows.length} heaviest` }),
    table,
  );
  keyboardRows(table);
  keyboardRows(hotTable);
}

// Callee tree: the stacks from the callers down; caller tree: from the
// allocation sites up (every stack reversed). The server answers one level
// at a time, as rows are expanded.
export async function renderTree(gen, callers) {
  const base = [
    ...liveArgs(true),
    ...filterArgs(),
    ...stackArgs(),
    ...(callers ? ['--invert'] : []),
    '--depth',
    '1',
    '--min-share',
    '0',
  ];
  const level = async (path) => {
    const a = [...base];
    for (const p of path) a.push('--focus', p);
    return api('flametree', a);
  };
  const top = await level([]);
  if (gen !== page.generation) return;
  const fmt = (w) => (top.unit === 'bytes' ? bytes(w) : String(w));
  const order = (kids) => {
    const k = state.tsort;
    return kids.sort((a, b) => (k === 'name' ? (a.name < b.name ? -1 : 1) : b[k] - a[k]));
  };
  const body = el('tbody');
  const th = (k, label, cls) => {
    const e = el('th', { class: cls || '', 'data-sort': k, text: label + (state.tsort === k ? ' ▾' : '') });
    e.addEventListener('click', () => {
      state.tsort = k;
      saveState();
      renderTree(page.generation, callers);
    });
    return e;
  };
  const table = el(
    'table',
    { class: 'tree', id: callers ? 'caller-table' : 'callee-table' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        th('name', callers ? 'allocation site, then callers' : 'caller, then callees', 'name'),
        th('total', top.what),
        th('objects', 'count'),
        el('th', { text: 'share' }),
      ),
    ),
    body,
  );
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
        page.refresh();
      };
      const toggle = el('span', { class: 'toggle', text: c.callees ? '▸' : ' ' });
      tr.append(
        el('td', { class: 'name' }, ' '.repeat(depth * 2), toggle, c.name),
        el('td', { text: fmt(c.total) }),
        el('td', { text: String(c.objects) }),
        el('td', { text: pct(c.total / (top.total || 1)) }),
      );
      tr.expand = async () => {
        if (tr.open || !c.callees) return;
        tr.open = tr;
        toggle.textContent = '▾';
        const t = await level(here);
        if (tr.open !== tr) return;
        tr.open = addRows(t.nodes.slice(1), depth + 1, tr, here) || tr;
      };
      tr.collapse = () => {
        if (!tr.open) return;
        let r = tr.nextSibling;
        while (r && r !== tr.open.nextSibling) {
          const nx = r.nextSibling;
          r.remove();
          r = nx;
        }
        tr.open = null;
        toggle.textContent = '▸';
      };
      tr.addEventListener('click', () => (tr.open ? tr.collapse() : tr.expand()));
      if (last) last.after(tr);
      else body.append(tr);
      last = tr;
    }
    return last;
  };
  addRows(top.nodes.slice(1), 0, null, []);
  $('view').replaceChildren(
    el('p', {
      text: 'click or press → / ← to expand or collapse, ↑ ↓ to move, Enter to focus the flame graph on that call sequence; click a column to sort',
    }),
    table,
  );
  keyboardRows(table);
}

// The sites (or functions, or files) whose bytes changed most between the
// compared trace (A) and this one (B), as `memtrace diff A B` ranks them: by
// the weight chosen (allocated bytes, or bytes live at a time, at each
// trace's peak or at the end).
export async function renderCompare(gen) {
  const weigh = state.live === 'end' ? ['--live'] : liveArgs(false);
  const d = await api('diff', ['--limit', '100', '--by', state.cby, ...weigh, ...filterArgs()]);
  if (gen !== page.generation) return;
  const key = { allocated: 'allocated_bytes', live_at: 'live_at_bytes', live_end: 'live_end_bytes' }[d.ranked_by];
  const [ka, kb] = [key + '_a', key + '_b'];
  const what = {
    allocated: 'allocated',
    live_at: d.live_at_s ? `live at ${d.live_at_s[0]} s (A), ${d.live_at_s[1]} s (B)` : 'live',
    live_end: 'live at the end',
  }[d.ranked_by];
  const rows = d.sites.map((r) => {
    const delta = r[kb] - r[ka];
    return el(
      'tr',
      {},
      el('td', { class: 'name', text: r.site }),
      el('td', { text: bytes(r[ka]) }),
      el('td', { text: bytes(r[kb]) }),
      el('td', {
        class: delta > 0 ? 'delta-up' : delta < 0 ? 'delta-down' : '',
        text: (delta > 0 ? '+' : '') + bytes(delta),
      }),
    );
  });
  const by = el(
    'select',
    { id: 'compare-by' },
    ...[
      ['leaf', 'by site (line)'],
      ['function', 'by function (moved lines match up)'],
      ['file', 'by file'],
      ['backtrace', 'by whole backtrace'],
    ].map(([value, text]) => el('option', { value, text })),
  );
  by.value = state.cby;
  by.addEventListener('change', () => {
    state.cby = by.value;
    page.refresh();
  });
  const table = el(
    'table',
    { id: 'compare-table' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { class: 'name', text: state.cby === 'leaf' ? 'site' : state.cby }),
        el('th', { text: 'A: ' + d.a.path }),
        el('th', { text: 'B: ' + d.b.path }),
        el('th', { text: 'difference, ' + what }),
      ),
    ),
    el('tbody', {}, ...rows),
  );
  $('view').replaceChildren(el('div', { id: 'flame-bar' }, by), table);
}
