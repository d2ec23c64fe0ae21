// The timeline page's panel under the canvas: the selected slice's details,
// and the selected range's call tree (a flame graph) and slices by name.

import { duration } from './canvas.js';
import { $, colour, el } from './dom.js';
import { drawBoxes, layout } from './flamegraph.js';
import { api, busy, failed, state } from './timeline-state.js';

// Details of the selected slice.
export async function showDetails() {
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
    const row = (k, v, cls) => el('tr', cls ? { class: cls } : {}, el('th', { text: k }), el('td', { text: v }));
    const args = Object.entries(d.args ?? {}).map(([k, v]) =>
      row(k, typeof v === 'string' ? v : JSON.stringify(v), 'arg'),
    );
    const table = el('table', { id: 'details-table' }, el('tbody', {}, ...rows.map(([k, v]) => row(k, v)), ...args));
    box.replaceChildren(el('h2', { text: 'Slice' }), table);
    box.dataset.slice = `${s.track},${s.lane},${s.index}`;
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

// A `flame` answer (nodes [parent, name id, weight], a root's parent null) as
// the flame graph draws it: a root that weighs them all, then each node's
// callees heaviest first, in preorder; nodes narrower than half a pixel at
// `width` are left out.
// The server's call tree (`[parent, name, weight]` per node, parents first)
// as the boxes to draw: `{parent, name, total, node}` in preorder, heaviest
// callee first, under a root as wide as the drawing, from `focus`'s subtree
// (the whole tree for null); boxes under half a pixel left out.
function flameNodes(tree, width, focus) {
  const children = tree.nodes.map(() => []);
  const roots = [];
  tree.nodes.forEach((n, i) => (n[0] === null ? roots : children[n[0]]).push(i));
  const byWeight = (a, b) => tree.nodes[b][2] - tree.nodes[a][2];
  const tops = focus === null ? roots : [focus];
  const total = tops.reduce((s, i) => s + tree.nodes[i][2], 0) || 1;
  const out = [{ parent: -1, name: '', total, node: null }];
  const add = (list, parent) => {
    for (const i of list.sort(byWeight)) {
      const [, name, weight] = tree.nodes[i];
      if ((weight / total) * width < 0.5) break;
      out.push({ parent, name: tree.names[name] ?? '', total: weight, node: i });
      add(children[i], out.length - 1);
    }
  };
  add(tops, 0);
  return out;
}

// The tree inverted: each node's self weight (what its callees do not cover)
// charged to its path read from the node up to its root, so that the hottest
// leaves are the roots and their callers are under them.
function inverted(tree) {
  const self = tree.nodes.map((n) => n[2]);
  tree.nodes.forEach((n) => {
    if (n[0] !== null) self[n[0]] -= n[2];
  });
  const nodes = [];
  const index = new Map();
  tree.nodes.forEach((_, i) => {
    if (self[i] <= 0) return;
    let parent = null;
    for (let j = i; j !== null; j = tree.nodes[j][0]) {
      const key = `${parent}/${tree.nodes[j][1]}`;
      let k = index.get(key);
      if (k === undefined) {
        k = nodes.length;
        index.set(key, k);
        nodes.push([parent, tree.nodes[j][1], 0]);
      }
      nodes[k][2] += self[i];
      parent = k;
    }
  });
  return { ...tree, nodes };
}

// The range's flame graph in `flame`, `width` pixels wide: hover names a box's
// time, a click shows the box's subtree alone, Escape (or a click on the
// first box) the whole again; `invert` draws the inverted tree.
function drawFlame(flame, tree, width, crumbs) {
  const shown = { focus: null, tree };
  const all = tree.total_ns || 1;
  const render = () => {
    const nodes = flameNodes(shown.tree, width, shown.focus);
    flame.replaceChildren();
    flame.dataset.total = shown.focus === null ? tree.total_ns : nodes[0].total;
    flame.dataset.focus = shown.focus === null ? '' : (nodes[1]?.name ?? '');
    const share = (t) => ((100 * t) / all).toFixed(1) + '%';
    drawBoxes(flame, nodes, layout(nodes, width), {
      row: 16,
      skipRoot: true,
      colour,
      minText: 18,
      title: (n) => `${n.name}: ${duration(n.total)} (${share(n.total)} of the range)`,
      attrs: (n) => ({ 'data-total': n.total }),
      click: (i) => {
        const node = nodes[i].node;
        shown.focus = shown.focus === node ? null : node;
        render();
        flame.focus();
      },
    });
    crumbs.textContent =
      shown.focus === null ? '' : `showing ${nodes[1]?.name ?? ''} alone (${duration(nodes[0].total)}); Escape: all`;
  };
  flame.tabIndex = 0;
  flame.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || shown.focus === null) return;
    e.stopPropagation();
    shown.focus = null;
    render();
  });
  render();
  return (invert) => {
    shown.tree = invert ? inverted(tree) : tree;
    shown.focus = null;
    render();
  };
}

// The selected range's slices by name, and its call tree.
export async function showArea() {
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
    const h = el('h2', {
      text: `${r.slices} slices in ${duration(to - from)} on ${a.tracks.length} track${a.tracks.length === 1 ? '' : 's'}`,
    });
    const columns = [
      ['Name', false],
      ['Count', true],
      ['Total', true],
      ['Self', true],
      ['Average', true],
      ['Max', true],
    ];
    const numeric = (n) => (n ? { class: 'n' } : {});
    const head = el('tr', {}, ...columns.map(([k, n]) => el('th', { ...numeric(n), text: k })));
    const rows = r.names.map((n) => {
      const cells = [
        n.name,
        n.count,
        duration(n.total_ns),
        duration(n.self_ns),
        duration(n.avg_ns),
        duration(n.max_ns),
      ];
      const tds = cells.map((c, i) => el('td', { ...numeric(i > 0), text: String(c) }));
      return el('tr', { 'data-count': n.count, 'data-total': n.total_ns }, ...tds);
    });
    const table = el('table', { id: 'selection-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
    box.replaceChildren(h, table);
    // And its call tree, as a flame graph.
    const tree = await api('flame', { from, to, tracks: a.tracks.join(',') });
    if (tree.nodes.length > 0) {
      const w = Math.max(200, box.clientWidth - 24);
      const flame = el('div', {
        id: 'flame',
        class: 'flame',
        'data-nodes': tree.nodes.length,
        'data-total': tree.total_ns,
      });
      flame.style.width = `${w}px`;
      const crumbs = el('span', { class: 'crumbs' });
      const invert = el('input', { type: 'checkbox', 'data-flame-invert': '' });
      const invertBy = drawFlame(flame, tree, w, crumbs);
      invert.addEventListener('change', () => invertBy(invert.checked));
      const tools = el(
        'p',
        { class: 'flame-tools' },
        el('label', {}, invert, ' inverted: the hottest leaves first, their callers under them'),
        ' ',
        crumbs,
      );
      box.insertBefore(el('h2', { text: 'Flame graph of the range' }), table);
      box.insertBefore(tools, table);
      box.insertBefore(flame, table);
      box.insertBefore(el('h2', { text: 'By name' }), table);
    }
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}
