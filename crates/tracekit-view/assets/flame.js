// The memtrace page's flame graph: the server's pruned tree around the zoomed
// node (or the focused call sequence, with its callers above it), drawn as
// boxes by flamegraph.js.

import { api } from './api.js';
import { $, bytes, colour, el, pct } from './dom.js';
import { diffColour, drawBoxes, layout } from './flamegraph.js';
import { filterArgs, stackArgs, liveArgs, page, saveState, state } from './state.js';

// The names from a node up to (not including) the root of a flametree answer.
function pathTo(nodes, i) {
  const names = [];
  for (let m = i; m > 0; m = nodes[m].parent) names.unshift(nodes[m].name);
  return names;
}

// The zoom's path as links, `root` first: a click zooms out to that frame
// and draws again with `render`.
function zoomCrumbs(root, path, render) {
  const crumbs = el('span', { id: 'crumbs' });
  [root, ...path].forEach((name, i) => {
    const a = el('a', { text: name });
    a.addEventListener('click', () => {
      state.zoom = path.slice(0, i);
      saveState();
      render(page.generation);
    });
    crumbs.append(i ? ' › ' : '', a);
  });
  return crumbs;
}

export async function renderFlame(gen) {
  const args = [...liveArgs(true), ...filterArgs(), ...stackArgs()];
  for (const f of state.fragment) args.push('--fragment', f);
  for (const f of state.zoom) args.push('--focus', f);
  const t = await api('flametree', args);
  if (gen !== page.generation) return;
  const fmt = (w) => (t.unit === 'bytes' ? bytes(w) : w + ' samples');
  const boxes = {
    colour: (name) => colour(name, 'warm'),
    title: (n) => `${n.name}\n${fmt(n.total)} (${pct(n.total / (t.total || 1))}), ${n.objects} objects`,
  };
  // The zoom and the fragment as far as this filter's stacks follow them.
  const path = t.focus;
  const fragment = t.fragment || [];
  const crumbs = zoomCrumbs(fragment.length ? '[' + fragment.join(' › ') + ']' : 'all', path, renderFlame);
  const orient = el(
    'select',
    { id: 'orient' },
    el('option', { value: 'icicle', text: 'icicle (callers on top)' }),
    el('option', { value: 'flame', text: 'flame (callers below)' }),
  );
  orient.value = state.orient;
  orient.addEventListener('change', () => {
    state.orient = orient.value;
    saveState();
    renderFlame(page.generation);
  });
  const recursion = el(
    'select',
    { id: 'recursion', title: 'a function called again below itself joins its outer call' },
    el('option', { value: 'auto', text: 'recursion: fold when deep' + (t.recursion_folded ? ' (folded)' : '') }),
    el('option', { value: 'fold', text: 'recursion: fold' }),
    el('option', { value: 'keep', text: 'recursion: keep every call' }),
  );
  recursion.value = state.recursion;
  recursion.addEventListener('change', () => {
    state.recursion = recursion.value;
    state.zoom = [];
    saveState();
    renderFlame(page.generation);
  });
  const shown = t.nodes.length ? t.nodes[0].total : 0;
  const total = el('span', {
    id: 'flame-total',
    'data-total': String(t.total),
    'data-shown': String(shown),
    text: `${t.what}: total ${fmt(t.total)}; shown ${fmt(shown)}` + (t.truncated ? ' (largest frames only)' : ''),
  });
  const setFragment = (f) => {
    state.fragment = f;
    state.zoom = [];
    saveState();
    renderFlame(page.generation);
  };
  const tools = el('span', { id: 'focus-tools' });
  if (!fragment.length) {
    const b = el('button', {
      type: 'button',
      id: 'focus-here',
      text: 'focus on ' + (path.length ? path[path.length - 1] : '…'),
    });
    b.disabled = !path.length;
    b.title = 'show the callers and callees of this function, wherever it is called';
    b.addEventListener('click', () => setFragment([path[path.length - 1]]));
    tools.append(b);
  } else {
    const drop = (id, text, f) => {
      const b = el('button', { type: 'button', id, text });
      b.addEventListener('click', () => setFragment(f));
      tools.append(b);
    };
    if (fragment.length > 1) {
      drop('retract-callers', '− outermost', fragment.slice(1));
      drop('retract-callees', '− innermost', fragment.slice(0, -1));
    }
    drop('clear-focus', 'clear focus', []);
  }
  const bar = el('div', { id: 'flame-bar' }, crumbs, orient, recursion, tools, total);
  const parts = [bar];
  const width = $('view').clientWidth || 1000;
  if (fragment.length) {
    // Callers above the fragment, drawn upward from it: click one to extend the
    // fragment toward its callers.
    const callers = el('div', { id: 'flame-callers', class: 'flame' });
    const callee = el('div', { id: 'fragment-bar', text: fragment.join(' › ') + ' — ' + fmt(shown) });
    parts.push(
      el('p', {
        class: 'hint',
        text: 'callers above (click to extend the focus toward them), callees below (click to extend toward them)',
      }),
      callers,
      callee,
    );
    const box = el('div', { id: 'flame', class: 'flame' });
    parts.push(box);
    $('view').replaceChildren(...parts);
    const cl = layout(t.callers, width);
    drawBoxes(callers, t.callers, cl, {
      ...boxes,
      up: true,
      skipRoot: true,
      click: (i) => setFragment([...pathTo(t.callers, i).reverse(), ...fragment]),
    });
    const ll = layout(t.nodes, width);
    drawBoxes(box, t.nodes, ll, {
      ...boxes,
      skipRoot: true,
      click: (i) => {
        if (path.length) {
          state.zoom = [...path, ...pathTo(t.nodes, i)];
          saveState();
          renderFlame(page.generation);
        } else setFragment([...fragment, ...pathTo(t.nodes, i)]);
      },
    });
    return;
  }
  const box = el('div', { id: 'flame', class: 'flame' });
  parts.push(box);
  $('view').replaceChildren(...parts);
  const lay = layout(t.nodes, box.clientWidth || width);
  drawBoxes(box, t.nodes, lay, {
    ...boxes,
    up: state.orient === 'flame',
    click: (i) => {
      state.zoom = [...path, ...pathTo(t.nodes, i)];
      saveState();
      renderFlame(page.generation);
    },
  });
}

// The baseline's controls: keep the filter's allocation range as the
// baseline, or drop the one kept.
function baselineBar() {
  const end = page.info.duration_us / 1e6 + 's';
  const bar = el('p', { id: 'baseline' });
  const button = (attr, text, act) => {
    const b = el('button', { type: 'button', [attr]: '', text });
    b.addEventListener('click', () => {
      act();
      saveState();
      page.refresh();
    });
    return b;
  };
  if (state.bfrom) {
    bar.append(
      `baseline (A): this trace's allocations between ${state.bfrom} and ${state.bto} `,
      button('data-baseline-clear', 'clear the baseline', () => {
        state.bfrom = state.bto = '';
      }),
    );
  } else {
    const set = button('data-baseline-set', 'use the allocation range as the baseline (A)', () => {
      state.bfrom = state.from || '0s';
      state.bto = state.to || end;
    });
    set.disabled = !state.from && !state.to;
    bar.append(
      page.features.compare
        ? 'baseline (A): the trace given to --compare; or compare two ranges of this one: '
        : 'compare two ranges of this trace: drag across the memory graph to choose one, then ',
      set,
    );
  }
  return bar;
}

// The differential flame graph of this trace (B) against a baseline (A): the
// trace given to --compare, or this trace's allocations in another range.
// Each frame is as wide as in B, coloured by its change from A, with the
// functions that changed most below it.
export async function renderDiff(gen) {
  const bar = baselineBar();
  if (!state.bfrom && !page.features.compare) {
    $('view').replaceChildren(bar);
    return;
  }
  const base = state.bfrom ? ['--base-between', state.bfrom, state.bto] : [];
  const args = [...liveArgs(true), ...filterArgs(), ...stackArgs()];
  const focus = state.zoom.flatMap((f) => ['--focus', f]);
  const [t, f] = await Promise.all([
    api('flametree', ['--diff', ...base, ...args, ...focus]),
    api('functions', ['--diff', '--limit', '50', ...base, ...args]),
  ]);
  if (gen !== page.generation) return;
  const fmt = (w) => (t.unit === 'bytes' ? bytes(w) : w + ' samples');
  const signed = (d) => (d > 0 ? '+' : d < 0 ? '−' : '±') + fmt(Math.abs(d));
  const relative = (a, b) => (a ? ` (${b >= a ? '+' : '−'}${pct(Math.abs(b - a) / a)})` : b ? ' (new)' : '');
  const largest = Math.max(1, ...t.nodes.slice(1).map((n) => Math.abs(n.total - n.base_total)));
  const path = t.focus;
  const crumbs = zoomCrumbs('all', path, renderDiff);
  const legend = el(
    'span',
    { id: 'diff-legend' },
    `width: B (${fmt(t.total)}); colour: the change from the baseline (A, ${fmt(t.base_total)}) `,
    el('span', { class: 'grew', text: 'grew' }),
    ' ',
    el('span', { class: 'shrank', text: 'shrank' }),
  );
  const box = el('div', { id: 'flame', class: 'flame diff' });
  const rows = f.functions.map((r) => {
    const d = r.total - r.base_total;
    return el(
      'tr',
      {},
      el('td', { class: 'name', text: r.name }),
      el('td', { text: fmt(r.base_total) }),
      el('td', { text: fmt(r.total) }),
      el('td', {
        class: d > 0 ? 'delta-up' : d < 0 ? 'delta-down' : '',
        text: signed(d) + relative(r.base_total, r.total),
      }),
    );
  });
  const table = el(
    'table',
    { id: 'diff-functions' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { class: 'name', text: 'function (in the stacks, each once)' }),
        el('th', { text: 'A: total' }),
        el('th', { text: 'B: total' }),
        el('th', { text: 'change' }),
      ),
    ),
    el('tbody', {}, ...rows),
  );
  $('view').replaceChildren(
    bar,
    el('div', { id: 'flame-bar' }, crumbs, legend),
    box,
    el('h3', { text: `Largest changes by function (${f.count} functions)` }),
    table,
  );
  const lay = layout(t.nodes, box.clientWidth || $('view').clientWidth || 1000);
  drawBoxes(box, t.nodes, lay, {
    up: state.orient === 'flame',
    colour: (name, n) => diffColour((n.total - n.base_total) / largest),
    title: (n) =>
      `${n.name}\nB ${fmt(n.total)} (${pct(n.total / (t.total || 1))}), A ${fmt(n.base_total)}\nchange ${signed(n.total - n.base_total)}${relative(n.base_total, n.total)}`,
    attrs: (n) => ({ 'data-b': String(n.total), 'data-a': String(n.base_total), 'data-name': n.name }),
    click: (i) => {
      state.zoom = [...path, ...pathTo(t.nodes, i)];
      saveState();
      renderDiff(page.generation);
    },
  });
}
